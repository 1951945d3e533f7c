/**
 * What herdcache says when the Redis user lacks a permission it needs (ACL): the rule it needs is in
 * docs/redis.md (Least privilege); a call refused for want of it fails like any store call (the
 * load is computed, the failure counted), and this names the permission once.
 */
import { HerdcacheError } from '../core/errors';

/** The `process.emitWarning` code of a command, key or channel the Redis user may not use (ACL). */
export const NOPERM_WARNING = 'HERDCACHE_REDIS_NOPERM';

/** The permissions already warned about in this process. */
const warned = new Set<string>();

/**
 * A Redis user without a permission herdcache needs fails every call that needs it: its loads are
 * computed and the failures counted (`storeErrors`), as for any store failure. The cause is
 * configuration, not an outage, so it is said once per process and permission, in words that
 * name it (Redis names a refused command, not a command refused inside a script, where the
 * script is named instead), with where the rule is.
 */
export function warnIfDenied(op: string, error: unknown): void {
  const reply = error instanceof HerdcacheError && error.cause !== undefined ? error.cause : error;
  const message = reply instanceof Error ? reply.message : String(reply);
  let what: string;
  let missing: string;
  const command = /no permissions to run the '([^']+)' command/.exec(message);
  if (command !== null) {
    missing = command[1]!.toLowerCase();
    what = `may not run ${missing.toUpperCase()} (sent by ${op})`;
  } else if (/^NOPERM .*(keys|channels)/.test(message)) {
    const kind = /channels/.test(message) ? 'channels' : 'keys';
    missing = `${kind}:${op}`;
    what = `may not use the ${kind} of ${op} (all under the store's prefix)`;
  } else if (/can't run this command or subcommand/.test(message)) {
    missing = `script:${op}`;
    what = `may not run a command inside herdcache's ${op} script (Redis does not say which)`;
  } else return;
  if (warned.has(missing)) return;
  warned.add(missing);
  process.emitWarning(
    `herdcache: the Redis user ${what}: those calls fail and their loads are computed without the cache. Give the user the ACL rule in docs/redis.md (Least privilege). Redis said: ${message}`,
    { code: NOPERM_WARNING },
  );
}
