/**
 * Response serializers, built by fast-json-stringify once for each shape: the routes declare the
 * same error answer under many statuses, each with its own description, and a serializer built for
 * one serves them all (docs/decisions/0024-one-serializer-per-response-shape.md).
 */
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler'
import type { FastifyServerOptions } from 'fastify'

/** What a response's schema holds for the OpenAPI document alone; fast-json-stringify ignores it. */
const DOCUMENTATION_ONLY = new Set(['description', 'examples', 'headers'])

/** The shape a serializer is built from: the schema without its documentation. */
function shapeOf (schema: unknown): string {
  if (typeof schema !== 'object' || schema === null) return JSON.stringify(schema)
  return JSON.stringify(Object.entries(schema).filter(([keyword]) => !DOCUMENTATION_ONLY.has(keyword)))
}

export const schemaController: FastifyServerOptions['schemaController'] = {
  compilersFactory: {
    buildSerializer (externalSchemas, options) {
      const compile = SerializerSelector()(externalSchemas, options)
      const built = new Map<string, ReturnType<typeof compile>>()
      return (route) => {
        const shape = shapeOf(route.schema)
        let serializer = built.get(shape)
        if (serializer === undefined) {
          serializer = compile(route)
          built.set(shape, serializer)
        }
        return serializer
      }
    }
  }
}
