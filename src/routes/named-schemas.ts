/** The schemas routes refer to by `$id`, named once so that the document and generated clients share them. */
import { ErrorSchema } from './common.schemas.js'
import { statusSchemas } from './health.schemas.js'
import { greetingSchemas } from './root.schemas.js'
import { userSchemas } from './users/user.schemas.js'

export const namedSchemas = [ErrorSchema, ...statusSchemas, ...greetingSchemas, ...userSchemas]
