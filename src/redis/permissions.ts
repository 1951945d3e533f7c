/**
 * What herdcache says when the Redis user lacks a permission it needs (ACL): the rule it needs is in
 * docs/redis.md (Least privilege); a call refused for want of it fails like any store call (the
 * load is computed, the failure counted), and this names the permission once.
 */
import { HerdcacheError } from '../core/errors';
import { commandOfScriptError, inScript } from './script-commands';

/** The `process.emitWarning` code of a command, key or channel the Redis user may not use (ACL). */
export const NOPERM_WARNING = 'HERDCACHE_REDIS_NOPERM';

/** The permissions already warned about in this process. */
const warned = new Set<string>();

/**
 * A Redis user without a permission herdcache needs fails every call that needs it: its loads are
 * computed and the failures counted (`storeErrors`), as for any store failure. The cause is
 * configuration, not an outage, so it is said once per process and missing permission (a command,
 * however many operations send it or run it in their scripts; the keys; the channels), in words
 * that name it, with where the rule is. Redis names a refused command, but one refused inside a
 * script only by the script's line: script-commands.ts reads the command there.
 */
export function warnIfDenied(op: string, error: unknown): void {
  const reply = error instanceof HerdcacheError && error.cause !== undefined ? error.cause : error;
  const message = reply instanceof Error ? reply.message : String(reply);
  let what: string;
  let missing: string;
  const command = /no permissions to run the '([^']+)' command/.exec(message);
  const scripted = inScript(message);
  const where = scripted ? `inside herdcache's ${op} script` : `sent by ${op}`;
  if (command !== null) {
    missing = command[1]!.toLowerCase();
    what = `may not run ${missing.toUpperCase()} (${where})`;
  } else if (/can't run this command or subcommand/.test(message)) {
    const found = commandOfScriptError(message);
    missing = found === undefined ? 'script' : found.toLowerCase();
    what =
      found === undefined
        ? `may not run a command inside herdcache's ${op} script (Redis does not say which)`
        : `may not run ${found} (${where})`;
  } else if (/^NOPERM .*(key|channel)|can't access .*(key|channel)/.test(message)) {
    const kind = /channel/.test(message) ? 'channels' : 'keys';
    missing = kind;
    what = `may not use the ${kind} of ${op} (all under the store's prefix)`;
  } else return;
  if (warned.has(missing)) return;
  warned.add(missing);
  process.emitWarning(
    `herdcache: the Redis user ${what}: those calls fail and their loads are computed without the cache. Give the user the ACL rule in docs/redis.md (Least privilege). Redis said: ${message}`,
    { code: NOPERM_WARNING },
  );
}

/** @internal Forgets the warnings said (tests: each case of a missing permission warns anew). */
export function _forgetNoPermWarnings(): void {
  warned.clear();
}
