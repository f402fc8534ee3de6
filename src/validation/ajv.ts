/**
 * The JSON Schema validators, for the configuration and for requests. Neither removes additional
 * properties: a schema that forbids them rejects the data. No HTTP here: config.ts uses it too.
 */
import { Ajv, type Options } from 'ajv'
import addFormats from 'ajv-formats'
import { isMailbox } from './email-format.js'

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
  ajv.addFormat('email', isMailbox)
  return ajv
}

export function createCoercingAjv (options: Options = {}): Ajv {
  return createAjv({ coerceTypes: 'array', ...options })
}
