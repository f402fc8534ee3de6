/** The storage suites of test/app/ again, behind PgBouncer in transaction pooling mode (test/pgbouncer.ts). */
import { behindPgBouncer } from '../pgbouncer.js'
import { changingUsersSuite } from '../suites/changing-users.js'
import { healthSuite } from '../suites/health.js'
import { metricsSuite } from '../suites/metrics.js'
import { usersSuite } from '../suites/users.js'

for (const suite of [usersSuite, changingUsersSuite, healthSuite, metricsSuite]) suite(behindPgBouncer)
