/**
 * `--packed`: the replicas load herdcache as a user installs it, from the tarball `npm pack` makes
 * (prepack builds dist/), extracted into a scratch node_modules; its dependency (lru-cache) and
 * ioredis are linked from this checkout's node_modules, so nothing is downloaded. The replicas are
 * told where through HERDCACHE_CHAOS_PACKAGE (replica.ts). Removed when the runner exits.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const PACKAGE_ENV = 'HERDCACHE_CHAOS_PACKAGE';

/** Packs, installs into a scratch directory, and returns it (also set in PACKAGE_ENV for the replicas). */
export function installPacked(): string {
  const root = join(__dirname, '..');
  const dir = mkdtempSync(join(tmpdir(), 'herdcache-chaos-packed-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  // A dist/ newer than every source is packed as it is (prepack would rebuild it: a minute on a busy machine).
  const flags = builtAfter(join(root, 'dist', 'index.mjs'), [join(root, 'src'), join(root, 'package.json')])
    ? ['--ignore-scripts']
    : [];
  const tarball = execFileSync('npm', ['pack', '--silent', ...flags, '--pack-destination', dir], {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  })
    .trim()
    .split('\n')
    .pop()!;
  const installed = join(dir, 'node_modules', 'herdcache');
  mkdirSync(installed, { recursive: true });
  execFileSync('tar', ['-xzf', join(dir, tarball), '-C', installed, '--strip-components=1']);
  for (const dependency of ['ioredis', 'lru-cache'])
    symlinkSync(join(root, 'node_modules', dependency), join(dir, 'node_modules', dependency));
  process.env[PACKAGE_ENV] = dir;
  return join(dir, tarball);
}

/** Whether `built` exists and is newer than every file under `sources`. */
function builtAfter(built: string, sources: readonly string[]): boolean {
  let at: number;
  try {
    at = statSync(built).mtimeMs;
  } catch {
    return false;
  }
  const newer = (path: string): boolean => {
    const stat = statSync(path);
    if (!stat.isDirectory()) return stat.mtimeMs > at;
    return readdirSync(path).some((name) => newer(join(path, name)));
  };
  return !sources.some(newer);
}
