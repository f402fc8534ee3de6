/** The contract of the change feed: an event, `GET /events`, and the webhooks (OpenAPI 3.1's `webhooks`). */
import { Type } from 'typebox'
import { errorResponse, RETRY_AFTER } from '../http/schemas.js'
import type { Webhooks } from '../http/pages/swagger.js'
import { EVENT_TYPES } from './outbox.js'

export const UserEvent = Type.Object({
  id: Type.Integer({
    minimum: 1,
    description: 'The event\'s position in the feed, rising in the order the changes were committed; the SSE `id:` and, as `evt_<id>`, the `webhook-id`.',
    examples: [42]
  }),
  type: Type.Enum(EVENT_TYPES, { description: 'What happened to the user.' }),
  timestamp: Type.String({ format: 'date-time', description: 'When the change was committed: UTC, to the millisecond.', examples: ['2026-12-02T13:21:41.118Z'] }),
  data: Type.Object({
    userId: Type.Integer({ minimum: 1, description: 'The user\'s id: `GET /users/{userId}` reads what the user is now.', examples: [7] }),
    changed: Type.Optional(Type.Array(Type.Enum(['name', 'email']), {
      description: '`user.updated` only: the fields the change set. Their values are not in the event: read the user.',
      examples: [['name']]
    }))
  }, { additionalProperties: false })
}, {
  $id: 'UserEvent',
  additionalProperties: false,
  description: 'A change to a user. It names the user and the fields changed, and holds no personal data, so that an erased user leaves none behind in the feed.',
  examples: [{ id: 42, type: 'user.updated', timestamp: '2026-12-02T13:21:41.118Z', data: { userId: 7, changed: ['name'] } }]
})

const STREAM_TEXT = 'Server-Sent Events: for each event, `id: <id>`, `event: <type>` and `data: <UserEvent as JSON>`; ' +
  'a comment line (`: heartbeat`) every `EVENTS_HEARTBEAT_MS` while nothing happens. The stream does not end while the service runs.'

export const EventsSchema = {
  summary: 'Follow changes to users',
  description: 'The change feed as Server-Sent Events (`text/event-stream`), from the position given by `Last-Event-ID` (as a reconnecting ' +
    '`EventSource` sends it) or `after`, else from now. Events come in the order their changes were committed, each once, ' +
    'on any instance: a reader that reconnects with the last id it saw misses nothing kept. A reader that takes none of what is sent for two ' +
    'heartbeats is disconnected, so that nothing is buffered for it without bound.',
  operationId: 'followEvents',
  tags: ['events'],
  querystring: Type.Object({
    after: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: 'Start after this event id; `0` starts at the oldest event kept. `Last-Event-ID` wins over it.', examples: [0] })),
    ticket: Type.Optional(Type.String({
      pattern: '^[A-Za-z0-9_-]{1,128}$',
      description: 'A ticket from `POST /events/tickets`, in place of `Authorization` for a browser\'s `EventSource`, which sends no header: ' +
        'good for one stream, within its `expires_in` seconds.'
    }))
  }),
  headers: Type.Object({
    'last-event-id': Type.Optional(Type.String({ pattern: '^(0|[1-9][0-9]{0,15})$', description: 'The id of the last event received: the stream starts after it.' }))
  }),
  response: {
    200: {
      description: STREAM_TEXT,
      content: { 'text/event-stream': { schema: Type.String({ description: STREAM_TEXT, examples: ['id: 42\nevent: user.updated\ndata: {"id":42,"type":"user.updated","timestamp":"2026-12-02T13:21:41.118Z","data":{"userId":7,"changed":["name"]}}\n\n'] }) } }
    },
    400: errorResponse(['validation_failed', 'event_from_another_feed'], '`Last-Event-ID` or `after` is not an event id, or names one after the newest: it comes from another feed.'),
    410: errorResponse(['events_purged'], 'Events after the position asked for are purged (`EVENTS_RETENTION`); the message names the oldest kept. Read the users again, then follow from the newest.'),
    429: errorResponse(['too_many_streams_for_client'], 'This client (a token\'s subject, else an address) has `EVENTS_MAX_READERS_PER_CLIENT` streams open: close one, or retry after `Retry-After` seconds.', { 'Retry-After': RETRY_AFTER }),
    503: errorResponse(['database_unavailable', 'too_many_streams'], 'The database cannot do its work now, or this instance has `EVENTS_MAX_READERS` streams open; retry after `Retry-After` seconds.', { 'Retry-After': RETRY_AFTER })
  }
}

export const TicketSchema = {
  summary: 'Get a ticket to follow changes from a browser',
  description: 'A browser\'s `EventSource` cannot send `Authorization`. A page that holds a token asks for a ticket, then opens ' +
    '`GET /events?ticket=<ticket>`: a ticket opens one stream, on any instance, within `expires_in` seconds, and is then spent. ' +
    'Its holder is the token\'s subject, whose bounds on streams it counts against. Ask for a new one to reconnect.',
  operationId: 'createEventsTicket',
  tags: ['events'],
  response: {
    201: Type.Object({
      ticket: Type.String({ description: 'Random; kept by the service only as its hash.', examples: ['3q2-7wVkT1r2YkPp3Bf9yZ0cWnq8vL5uJmN4hXgA6sE'] }),
      expires_in: Type.Integer({ minimum: 1, description: 'Seconds the ticket may wait to be used.', examples: [30] })
    }, { additionalProperties: false, description: 'A ticket for one stream.' }),
    503: errorResponse(['database_unavailable'], 'The database cannot do its work now; retry after `Retry-After` seconds.', { 'Retry-After': RETRY_AFTER })
  }
}

const SIGNED = 'Signed as the Standard Webhooks specification says: `webhook-id` (`evt_<id>`, the same on every try of one event), ' +
  '`webhook-timestamp` (seconds since 1970) and `webhook-signature` (`v1,` and the base64 HMAC-SHA256, keyed by `WEBHOOK_SECRET`, of ' +
  '`<webhook-id>.<webhook-timestamp>.<body>`).'

/** Each event as a webhook posts it to every `WEBHOOK_URLS` endpoint. */
export const webhooksDocument: Webhooks = {
  userEvent: {
    post: {
      summary: 'A change to a user, posted to each endpoint of WEBHOOK_URLS',
      description: `Every event, at least once and in order (one event at a time per endpoint): a 2xx takes it, anything else or no answer within 10 s is tried again after an exponential back-off with jitter, from \`WEBHOOK_RETRY_BASE_MS\`, for \`WEBHOOK_RETRY_FOR\`; then the event is kept as failed (\`webhook_failed_events\` in /metrics) and the next one goes. ${SIGNED}`,
      operationId: 'userEventWebhook',
      parameters: ['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((name) => ({ name, in: 'header', required: true, schema: { type: 'string' as const } })),
      requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/UserEvent' } } } },
      responses: { 200: { description: 'Any 2xx: the event is taken.' } }
    }
  }
}
