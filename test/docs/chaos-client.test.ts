/**
 * The chaos suite's recovery figures (docs/redis.md, Recovery) depend on one client option, the
 * reconnect delay (`retryStrategy`): they count only if it is the one the docs tell users to write.
 * The README's first Redis example and redis.md's first example give it, and chaos/replica.ts
 * uses the same expression.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { root, snippets } from './snippets';

/** The expression after `retryStrategy: (times) =>` in a snippet, or undefined. */
function strategyOf(code: string): string | undefined {
  return /retryStrategy: \(times(?:: number)?\)(?:: number)? => ([^\n]+?),?\n/.exec(code)?.[1];
}

const firstRedisExample = (file: string): string =>
  snippets().find((s) => s.file === file && s.lang === 'ts' && s.code.includes('new Redis('))!.code;

const replica = readFileSync(join(root, 'chaos', 'replica.ts'), 'utf8');
const chaosStrategy = /const RETRY_STRATEGY = \(times: number\): number => ([^\n]+);\n/.exec(replica)?.[1];

it('the chaos replicas reconnect with a retryStrategy of their own', () => {
  expect(chaosStrategy).toBe('Math.min(times * 50, 100)');
  expect(replica).toContain('retryStrategy: RETRY_STRATEGY');
});

it.each(['README.md', 'docs/redis.md'])("%s's first Redis example gives the chaos replicas' retryStrategy", (file) => {
  expect(strategyOf(firstRedisExample(file))).toBe(chaosStrategy);
});
