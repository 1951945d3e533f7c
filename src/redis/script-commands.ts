/**
 * Which command a script of herdcache's had refused, from Redis's error. Redis names a command it
 * refuses when it is sent, but one refused inside a script only as "can't run this command or
 * subcommand", with where: the error ends with `script: <sha1>, on @user_script:<line>.` (Redis 7).
 * The store has the scripts' sources (scripts.ts, through knowScripts): the sha1 says which, the line says the command
 * (its `redis.call('X'` or `redis.pcall('X'`; an `error(v)` re-raising the error of a pcall is the
 * pcall's command). permissions.ts names it in its warning.
 */
import { createHash } from 'node:crypto';

/** Where Redis says a script's error was raised. */
const WHERE = /script: ([0-9a-f]{40}), on @user_script:(\d+)\.?\s*$/;
const CALL = /redis\.p?call\('(\w+)'/g;
const RAISED = /\berror\((\w+)\)/;

/** The scripts' sources, as defined on a client (scripts.ts: defineScripts). */
let sources: readonly string[] = [];
/** Per script sha1 (as ioredis and Redis compute it), its lines: made on the first refusal. */
let bySha: Map<string, readonly string[]> | undefined;

/** The scripts herdcache defines (scripts.ts tells, so this file imports none of the store). */
export function knowScripts(scripts: readonly string[]): void {
  if (scripts === sources) return;
  sources = scripts;
  bySha = undefined;
}

/** Whether `message` is an error raised inside a script (Redis 7 says where). */
export function inScript(message: string): boolean {
  return WHERE.test(message);
}

/** The command (upper case) a script error was raised by, when the script is herdcache's; else undefined. */
export function commandOfScriptError(message: string): string | undefined {
  const where = WHERE.exec(message);
  if (where === null) return undefined;
  bySha ??= new Map(sources.map((lua) => [createHash('sha1').update(lua).digest('hex'), lua.split('\n')] as const));
  const lines = bySha.get(where[1]!);
  return lines === undefined ? undefined : commandAt(lines, Number(where[2]));
}

/** The command run on line `n` (1-based) of a script, or the pcall whose error that line re-raises. */
function commandAt(lines: readonly string[], n: number): string | undefined {
  const line = lines[n - 1];
  if (line === undefined) return undefined;
  const called = new Set<string>();
  for (const match of line.matchAll(CALL)) called.add(match[1]!.toUpperCase());
  if (called.size > 0) return called.size === 1 ? [...called][0] : undefined;
  const raised = RAISED.exec(line);
  if (raised === null) return undefined;
  const assigned = new RegExp(`\\b${raised[1]} = redis\\.pcall\\('(\\w+)'`);
  for (let i = n - 2; i >= 0; i--) {
    const match = assigned.exec(lines[i]!);
    if (match !== null) return match[1]!.toUpperCase();
  }
  return undefined;
}
