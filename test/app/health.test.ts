import { testDatabases } from '../helpers.js'
import { healthSuite } from '../suites/health.js'

for (const database of testDatabases) healthSuite(database)
