/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.(t|j)sx?$': ['@swc/jest'] },
  // The package's own name resolves to the sources, as tsconfig.json's "paths" say (examples use it).
  moduleNameMapper: { '^herdcache$': '<rootDir>/src/core/index.ts', '^herdcache/(redis|graphql|apollo|envelop|prometheus|otel)$': '<rootDir>/src/$1/index.ts' },
  globalSetup: '<rootDir>/test/setup/global-setup.ts',
  globalTeardown: '<rootDir>/test/setup/global-teardown.ts',
  // A timeout catches a hang, not slowness: tests count things, and a loaded machine (a shared CI
  // runner, two CPU hogs) may take several times as long as a quiet one.
  testTimeout: 60_000,
  // Two cores: two workers keep a real redis-server and the tests from starving each other.
  maxWorkers: 2,
};
