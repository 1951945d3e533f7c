/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    // NestJS's decorators (experimental, with their metadata), for examples/nestjs only.
    '^.+/examples/nestjs/.+\\.ts$': [
      '@swc/jest',
      {
        jsc: {
          parser: { syntax: 'typescript', decorators: true },
          transform: { legacyDecorator: true, decoratorMetadata: true },
        },
      },
    ],
    '^.+\\.(t|j)sx?$': ['@swc/jest'],
  },
  // The package's own name resolves to the sources, as tsconfig.json's "paths" say (examples use it).
  moduleNameMapper: {
    '^herdcache$': '<rootDir>/src/core/index.ts',
    '^herdcache/(redis|graphql|apollo|envelop|prometheus|otel)$': '<rootDir>/src/$1/index.ts',
  },
  globalSetup: '<rootDir>/test/setup/global-setup.ts',
  globalTeardown: '<rootDir>/test/setup/global-teardown.ts',
  // A timeout catches a hang, not slowness: tests count things, and a loaded machine (a shared CI
  // runner, two CPU hogs) may take several times as long as a quiet one.
  testTimeout: 60_000,
  // A worker asked to exit after the last file is force-exited (and "failed to exit gracefully"
  // printed) after 500 ms by default. With two CPU hogs that happened with nothing left to wait
  // for: sampled every 100 ms, the workers held only their stdio/IPC pipes (no timer, socket or
  // child process; --detectOpenHandles finds none either), they were just not scheduled in time.
  workerGracefulExitTimeout: 5_000,
  // Two cores: two workers keep a real redis-server and the tests from starving each other.
  maxWorkers: 2,
};
