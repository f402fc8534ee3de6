/**
 * Traces, when OpenTelemetry's standard variables ask for them: a server span per request
 * (@fastify/otel), a child span per query, and trace ids on log lines. Nothing of this loads when
 * they are unset.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { FastifyOtelInstrumentation } from '@fastify/otel'
import { ExportResultCode, type ExportResult } from '@opentelemetry/core'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { BatchSpanProcessor, NodeTracerProvider, type ReadableSpan, type Span, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace-node'
import type { FastifyBaseLogger, FastifyPluginCallback } from 'fastify'
import { loggedUrl } from '../http/request/logging.js'

export interface Tracing {
  /** @fastify/otel's plugin, registered before everything else. */
  plugin: FastifyPluginCallback
  /** Has `log` say when the collector stops taking spans, and when it takes them again. */
  reportFailuresTo: (log: FastifyBaseLogger) => void
  /** Sends the spans not yet sent, then stops; spans the collector refuses or does not take within 2 s are lost. */
  shutdown: () => Promise<void>
}

/** How long the spans still waiting at shutdown may take to reach the collector. */
const FLUSH_AT_SHUTDOWN_MS = 2000

/**
 * An exporter that logs one line when its batches cannot be sent and one when they can again, as
 * for a database outage; OpenTelemetry itself says nothing.
 */
class ExporterWithOutageLog implements SpanExporter {
  log: FastifyBaseLogger | undefined
  private failedBatches = 0

  constructor (private readonly exporter: SpanExporter) {}

  export (spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.exporter.export(spans, (result) => {
      if (result.code === ExportResultCode.FAILED) {
        if (this.failedBatches++ === 0) {
          this.log?.warn({ err: result.error }, 'traces cannot be sent to the collector: they are dropped until it takes them again')
        }
      } else if (this.failedBatches > 0) {
        this.log?.info({ failedBatches: this.failedBatches }, 'traces are sent to the collector again')
        this.failedBatches = 0
      }
      done(result)
    })
  }

  async shutdown (): Promise<void> {
    await this.exporter.shutdown()
  }

  async forceFlush (): Promise<void> {
    await this.exporter.forceFlush?.()
  }
}

/** A request span's `url.path` (the target with its query) as log lines write it: nothing personal reaches the collector either. */
const maskedUrlPaths: SpanProcessor = {
  onStart (span: Span) {
    const path = span.attributes['url.path']
    if (typeof path === 'string') span.setAttribute('url.path', loggedUrl(path))
  },
  onEnd () {},
  shutdown: async () => {},
  forceFlush: async () => {}
}

/**
 * Registers the tracer provider for the process, with W3C trace context and the async context that
 * carries a request's span into its queries.
 */
export function startTracing (serviceName: string): Tracing {
  const exporter = new ExporterWithOutageLog(new OTLPTraceExporter())
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': serviceName }),
    spanProcessors: [maskedUrlPaths, new BatchSpanProcessor(exporter)]
  })
  provider.register()
  const instrumentation = new FastifyOtelInstrumentation()
  instrumentation.setTracerProvider(provider)
  return {
    plugin: instrumentation.plugin(),
    reportFailuresTo: (log) => { exporter.log = log },
    // The service has stopped all the same, whatever becomes of its last spans: its exit says
    // so, and a collector that does not answer costs the shutdown no more than a moment.
    async shutdown () {
      try {
        const sent = await Promise.race([provider.shutdown().then(() => true), sleep(FLUSH_AT_SHUTDOWN_MS, false, { ref: false })])
        if (!sent) exporter.log?.warn(`the last traces could not be sent to the collector within ${FLUSH_AT_SHUTDOWN_MS} ms`)
      } catch (error) {
        exporter.log?.warn({ err: error }, 'the last traces could not be sent to the collector')
      }
    }
  }
}
