// npm run lint: @eslint/js and typescript-eslint recommended, plus the type-aware promise rules a
// concurrency library needs (a promise nobody awaits is a load nobody settles).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'coverage/', 'node_modules/', '.tmp/', '.prof/'] },
  { linterOptions: { reportUnusedDisableDirectives: 'error' } },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      // One program per tsconfig (the nestjs example has its own: decorators).
      parserOptions: {
        project: ['./tsconfig.json', './examples/nestjs/tsconfig.json'],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      // `const { __typename: _, ...rest } = x` is how a field is left out of a copy.
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true }],
    },
  },
  {
    // A source file a new engineer can read in one sitting (issue 20): split before it grows past 400 lines.
    files: ['src/**/*.ts'],
    rules: { 'max-lines': ['error', { max: 400 }] },
  },
  {
    // Reason: a resolver's context and parent are `any` in the GraphQL integrations' public types, as
    // graphql-js types them (GraphQLFieldResolver<TSource, TContext = any>); the core stays strict.
    files: ['src/graphql/**', 'src/apollo/**', 'src/envelop/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // Reason: tests and examples read untyped GraphQL JSON responses (`data?: any`) and resolvers.
    files: ['test/**', 'examples/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
