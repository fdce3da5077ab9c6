import swc from 'unplugin-swc';
import { defineConfig } from 'vitest/config';

// esbuild/oxc transforms drop decorator metadata (`design:paramtypes`), which
// Nest's dependency injection and our key-template checks rely on: SWC keeps it.
export default defineConfig({
  resolve: { tsconfigPaths: true },
  plugins: [
    swc.vite({
      module: { type: 'es6' },
      jsc: {
        target: 'es2022',
        parser: { syntax: 'typescript', decorators: true },
        transform: { legacyDecorator: true, decoratorMetadata: true },
      },
    }),
  ],
  test: {
    globals: true,
    root: './',
    include: ['libs/**/*.spec.ts', 'apps/**/*.spec.ts', 'test/**/*.spec.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores: files run in parallel two at a time, tests inside a file in order.
    maxWorkers: 2,
    pool: 'forks',
  },
});
