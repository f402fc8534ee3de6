/**
 * The JSON Schema validators of the service, for the configuration and for requests. Neither
 * removes additional properties: a schema that forbids them rejects the data. No HTTP here:
 * config.ts, below the HTTP layer, uses it too.
 */
import { Ajv, type Options } from 'ajv'
import addFormats from 'ajv-formats'

const sharedOptions: Options = {
  removeAdditional: false,
  useDefaults: true,
  allErrors: false,
  // TypeBox adds annotations (e.g. `~kind`) that Ajv's strict mode would reject.
  strict: false,
  // The schemas are this service's own, fixed and tested; checking each against the JSON
  // Schema meta-schema would compile that meta-schema once per instance at every start-up.
  validateSchema: false
}

export function createAjv (options: Options): Ajv {
  const ajv = new Ajv({ ...sharedOptions, ...options })
  addFormats.default(ajv)
  return ajv
}

export function createCoercingAjv (): Ajv {
  return createAjv({ coerceTypes: 'array' })
}
