/** The bench's reading of wrk's output (bench/wrk.ts). */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { readWrkOutput } from '../../bench/wrk.js'

/** wrk 4.1's output with `--latency`, as the bench saw it on a slow day, and the Lua script's count. */
const output = (p50: string, p99: string) => `Running 3s test @ http://127.0.0.1:46047/
  1 threads and 256 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    77.19ms  205.43ms   2.00s    94.51%
    Req/Sec     7.61k     1.13k    9.59k    66.67%
  Latency Distribution
     50%  ${p50}
     75%   38.30ms
     90%   43.51ms
     99%  ${p99}
  22726 requests in 3.03s, 16.10MB read
Requests/sec:   7503.16
Transfer/sec:      5.32MB
unexpected: 3
`

test('the bench reads requests, requests/s, p50, p99 and unexpected answers off wrk\'s output', () => {
  assert.deepEqual(readWrkOutput(output(' 29.97ms', ' 812.00us')), { requests: 22726, rps: 7503.16, p50: 29.97, p99: 0.812, unexpected: 3 })
})

test('the bench reads latencies of a second or more, whose one-letter unit wrk pads with a space', () => {
  // A run stopped here with "wrk printed no /^\s+99%\s+(\S+)$/m".
  assert.deepEqual(readWrkOutput(output(' 29.97ms', '  1.23s ')), { requests: 22726, rps: 7503.16, p50: 29.97, p99: 1230, unexpected: 3 })
  assert.equal(readWrkOutput(output('  1.10m ', '  2.00s ')).p50, 66_000)
})

test('output without a figure the bench needs is an error naming it', () => {
  assert.throws(() => readWrkOutput('unable to connect to 127.0.0.1:1 Connection refused\n'), /wrk printed no \/\(\\d\+\) requests in\//)
})
