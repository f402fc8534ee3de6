/**
 * A TCP proxy between the service and PostgreSQL that a test can cut and restore, to play a
 * database outage: cutting resets every open connection and leaves new ones unanswered, as
 * a crashed server behind a silent network would. Freezing leaves the open connections open
 * but carries nothing more over them, while new ones work, as when a failover moves the
 * server's address and the old server is gone without a word. With `stallOn`, a connection whose client sends that text hears
 * nothing more from the server, as from a server that hangs midway.
 */
import net from 'node:net'
import { once } from 'node:events'
import type { TestContext } from 'node:test'

export interface TcpProxy {
  port: number
  cut: () => void
  restore: () => void
  freeze: () => void
}

export async function startTcpProxy (t: TestContext, target: { host: string, port: number }, stallOn?: string): Promise<TcpProxy> {
  let cut = false
  const sockets = new Set<net.Socket>()
  const track = (socket: net.Socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => socket.destroy())
  }

  const pairs = new Set<[net.Socket, net.Socket]>()
  const server = net.createServer((client) => {
    track(client)
    if (cut) return
    const upstream = net.connect(target.port, target.host)
    track(upstream)
    pairs.add([client, upstream])
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
    if (stallOn === undefined) {
      client.pipe(upstream).pipe(client)
      return
    }
    let stalled = false
    client.on('data', (data: Buffer) => {
      stalled ||= data.includes(stallOn)
      upstream.write(data)
    })
    upstream.on('data', (data: Buffer) => { if (!stalled) client.write(data) })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => {
    for (const socket of sockets) socket.destroy()
    server.close()
  })

  const dropAll = () => { for (const socket of sockets) socket.destroy() }
  return {
    port: (server.address() as net.AddressInfo).port,
    cut: () => { cut = true; dropAll() },
    restore: () => { cut = false; dropAll() },
    freeze: () => {
      for (const pair of pairs) {
        for (const socket of pair) {
          socket.unpipe()
          socket.removeAllListeners('data')
          socket.pause()
        }
      }
      pairs.clear()
    }
  }
}
