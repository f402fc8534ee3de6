/**
 * Traces, when the standard OpenTelemetry environment asks for them (OTEL_EXPORTER_OTLP_ENDPOINT
 * or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; OTEL_SERVICE_NAME names the service): every request a
 * server span (@fastify/otel, Fastify's own instrumentation), continuing an incoming W3C
 * `traceparent`; every database query a child span (`src/db/traced-queries.ts`); and the log
 * lines of a request its trace and span ids. Spans go over OTLP/HTTP in batches. Nothing of
 * this is loaded when the variables are unset.
 */
import { FastifyOtelInstrumentation } from '@fastify/otel'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node'
import type { FastifyPluginCallback } from 'fastify'

export interface Tracing {
  /** @fastify/otel's plugin, registered before everything else. */
  plugin: FastifyPluginCallback
  /** Sends the spans not yet sent, then stops. */
  shutdown: () => Promise<void>
}

/**
 * Registers the tracer provider for the whole process (and with it W3C trace context and the
 * async context that carries a request's span into its queries). The exporter reads its
 * endpoint, headers and timeouts from the standard OTEL_EXPORTER_OTLP_* variables.
 */
export function startTracing (serviceName: string): Tracing {
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': serviceName }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())]
  })
  provider.register()
  const instrumentation = new FastifyOtelInstrumentation()
  instrumentation.setTracerProvider(provider)
  return {
    plugin: instrumentation.plugin(),
    shutdown: async () => await provider.shutdown()
  }
}
