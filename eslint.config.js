import neostandard from 'neostandard'

export default [
  // Built and generated files are not ours to lint.
  { ignores: ['dist/', 'coverage/'] },
  ...neostandard({ ts: true }),
  {
    // Configuration is read and validated once, in src/config/, and passed in.
    files: ['src/**/*.ts'],
    ignores: ['src/config/config.ts'],
    rules: {
      'no-restricted-properties': ['error', { object: 'process', property: 'env', message: 'Read configuration through src/config/.' }],
      '@typescript-eslint/no-restricted-imports': ['error', {
        paths: ['node:http', 'http'].map((name) => ({
          name,
          allowTypeImports: true,
          message: 'Require it (see src/http/edge/malformed-http.ts): importing node:http loads undici into every process.'
        }))
      }]
    }
  }
]
