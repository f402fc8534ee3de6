/** The OpenAPI document the service serves with its default configuration, as committed text. */
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config/config.js'

export const OPENAPI_FILE = new URL('../openapi.json', import.meta.url)

export async function renderOpenApiDocument (): Promise<string> {
  const app = await buildApp(loadConfig({ DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'silent' }))
  try {
    const response = await app.inject('/documentation/json')
    return `${JSON.stringify(response.json(), null, 2)}\n`
  } finally {
    await app.close()
  }
}
