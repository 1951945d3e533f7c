import { defineConfig } from 'tsup';

export default defineConfig({
  entry: ['src/index.ts'],
  format: ['cjs', 'esm'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'node20',
  // Peer dependencies stay external: the user brings them.
  external: ['graphql', '@apollo/server', 'ioredis', 'prom-client'],
});
