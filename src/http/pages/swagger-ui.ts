/** The docs page: Swagger UI from its own package, showing the document at `/documentation/json`. */
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'

/** The plugin's former address of the page, which it still redirects to the page. */
const FORMER_PAGE = '/documentation/static/index.html'

/** Swagger UI, showing the document. */
export default async function swaggerUiPage (app: FastifyInstance): Promise<void> {
  await app.register(swaggerUi, {
    routePrefix: '/documentation',
    uiHooks: {
      // The plugin redirects by rewriting the end of the URL, so the former address with a
      // query (`?utm_source=…`) redirected to itself, for ever; such a request goes to the page.
      onRequest: (request, reply, done) => {
        if (request.routeOptions.url === FORMER_PAGE && request.url !== FORMER_PAGE) {
          reply.redirect('/documentation/')
          return
        }
        done()
      }
    }
  })
}
