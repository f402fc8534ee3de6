/** `npm run openapi`: writes the served OpenAPI document to openapi.json, for clients to generate from. */
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { OPENAPI_FILE, renderOpenApiDocument } from './openapi-document.js'

writeFileSync(OPENAPI_FILE, await renderOpenApiDocument())
process.stdout.write(`Wrote ${fileURLToPath(OPENAPI_FILE)}\n`)
