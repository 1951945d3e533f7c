/**
 * The Lua scripts of the fill lock and of tag invalidation. Each runs atomically on the server, so
 * "try the lock, then read the value" and "check the token, write, unlock" cannot interleave with
 * another replica's steps.
 * Registered with ioredis `defineCommand`: sent as EVALSHA, and as EVAL only the first time on a
 * connection (and after a SCRIPT FLUSH), which ioredis handles.
 *
 * Lock scripts take KEYS in pairs, value key then lock key, for every cache key of the call; in a
 * Cluster all KEYS of one call share a slot (the store groups by slot).
 */
import type { Cluster, Redis } from 'ioredis';
import { ANNOUNCED_BYTES_PER_CALL, ANNOUNCED_VALUE_MAX, VALUE_READER } from './fill-channels';
import { WAITERS_SUFFIX } from './keys';
import { TAG_BUMP, TAG_CLOCK, TAG_READ } from './tag-scripts';
import { knowScripts } from './script-commands';

/** Most bytes of waiter ids a key's marker holds (see WAITERS): some 290 processes of 13-byte ids. */
export const WAITERS_MAX_BYTES = 4096;

/**
 * GET that reads a key of another type (something foreign under our prefix) as missing, as MGET
 * does, not aborting the script halfway through a batch. Any other error (an ACL refusing GET)
 * fails the script: read as missing, waiters would wait out lockWaitTimeout, nothing counted.
 */
const SAFE_GET = `
local function get(key)
  local value = redis.pcall('GET', key)
  if type(value) == 'table' and value.err then
    if string.find(value.err, 'WRONGTYPE', 1, true) then return false end
    error(value)
  end
  return value
end`;

/**
 * The waiters of a key: who to tell when its lock is given up. A string key next to the value,
 * `prefix{K}:waiters` (the value's hash tag: same slot, so the lock scripts may touch it), holding
 * the ids of the processes waiting on it, space-separated, each added once. Its expiry is the
 * lock's remaining ttl, never longer: it goes with the lock it was registered on, and a waiter
 * still waiting on a later lock registers again on its next attempt (every attempt does). Plain
 * GET and SET, the commands the store already runs: no set type, no command more for an ACL.
 * Not among the script's KEYS: derived from the value key, like the lock's announcement.
 * Bounded: at most WAITERS_MAX_BYTES of ids (some 290 processes). A process that finds it full is
 * not added: it learns of the write by its poll (each poll re-reads), as a process without a
 * subscriber does. Without the bound a key a whole large fleet waits on would cost every attempt a
 * scan and a rewrite of a marker growing with the fleet, and every write one message per process.
 */
const WAITERS = `
local function wait_on(key, id, pttl)
  if id == nil or id == '' or pttl <= 0 then return end
  local marker = key .. '${WAITERS_SUFFIX}'
  local ids = get(marker)
  if not ids then
    ids = id
  elseif string.find(' ' .. ids .. ' ', ' ' .. id .. ' ', 1, true) then
    return
  elseif #ids + 1 + #id > ${WAITERS_MAX_BYTES} then
    return
  else
    ids = ids .. ' ' .. id
  end
  redis.call('SET', marker, ids, 'PX', pttl)
end`;

/**
 * Tells the waiters of a key whose lock was just given up (written or released) to read it now,
 * instead of after their poll backoff, and forgets them: one message per waiting process, on that
 * process's own channel (`channel` .. id); a key nobody waits on costs one GET and no message.
 * Not `written` (a release) and the value there: forgotten without a message (see RELEASE).
 * ARGV channel '' tells nobody.
 * `value`: the payload just written under the lock `token`, or nil. A waiter whose id ends with
 * VALUE_READER gets both in the message when the value is small (fill-channels.ts: the format, the
 * limits): its next step is to read that very value, so the message saves it a round trip. It
 * answers from it only if its own last attempt found the key held by `token`: then this write ran
 * after that attempt, within its load. (A message can be late: one of an earlier lock, written
 * before an invalidation the waiter's load came after, must not answer it; it only wakes it.)
 * Past the call's budget, or to other ids, the key alone.
 * PUBLISH on a standalone server; in a Cluster SPUBLISH on a shard channel of the keys' own slot
 * (a script may only touch its slot), which only that shard's subscribers hear. pcall: a server
 * without SPUBLISH (before Redis 7) must not fail the write; its waiters poll, as they always could.
 */
const ANNOUNCE = `
local announced = 0
local function announce(channel, sharded, key, written, value, token)
  local marker = key .. '${WAITERS_SUFFIX}'
  local ids = get(marker)
  if not ids then return end
  redis.call('DEL', marker)
  if channel == '' or (not written and redis.call('PTTL', key) ~= -2) then return end
  local publish = sharded == '1' and 'SPUBLISH' or 'PUBLISH'
  local carried = false
  if value and #value <= ${ANNOUNCED_VALUE_MAX} then
    carried = key .. token .. value .. string.format('%08x%08x', #key, #token)
  end
  for id in string.gmatch(ids, '%S+') do
    local message = key
    if carried and string.sub(id, -1) == '${VALUE_READER}' and announced + #value <= ${ANNOUNCED_BYTES_PER_CALL} then
      message = carried
      announced = announced + #value
    end
    redis.pcall(publish, channel .. id, message)
  end
end`;

/** One key's lock attempt, as ACQUIRE (below) describes it: 1 won, else the holder's token or 0. */
const TRY_LOCK = `
local function try_lock(key, lock, token, px, waiter)
  local won = redis.call('SET', lock, token, 'NX', 'PX', px)
  local held = false
  if not won then
    held = get(lock)
    if held == token then
      redis.call('SET', lock, token, 'PX', px) -- its expiry renewed (SET: one command fewer for an ACL rule to grant)
      won = true
    else
      local pttl = redis.call('PTTL', lock)
      if pttl == -1 then
        -- Not a lock of ours (ours always expire): taken over, whatever its type.
        redis.call('SET', lock, token, 'PX', px)
        won = true
      else
        wait_on(key, waiter, pttl)
      end
    end
  end
  if won then return 1 end
  return held or 0
end`;

/**
 * ARGV: token, lock ttl (ms), waiter id ('' : none), and optionally per key a '1' or '0' (char n for
 * the nth key; absent: all '0'): '1' for a background refresh, which does not wait on a key held by
 * another lock when it finds a value there (it keeps serving that value: the other lock refreshes
 * it), so it is registered as a waiter only when the key has no value. A caller of an earlier
 * version passes no flags and gets what it always got.
 * Returns, per key, `won` (1, or for a key held
 * by another lock its holder's token, else 0) then the raw value or nil. The holder's token lets a
 * waiter tell the announcement of that lock's write from a late one of an earlier lock (see ANNOUNCE).
 * The value is read in the same atomic call as the lock is tried: that read is the re-check that
 * stops a replica from filling a key another replica wrote between this replica's MGET and its lock.
 * Re-entrant for the same token: a retry after a timed-out acquire (which may have run on the
 * server) wins its own lock instead of waiting out the lock ttl behind itself. A lock key found
 * without expiry is taken over: herdcache sets a PX on every lock it takes (SET NX PX, PEXPIRE),
 * so such a key is nobody's lock (foreign, typed by hand, left by an old version, another type) and
 * nobody would ever release it; waiting on it would cost a load lockWaitTimeout for nothing.
 * A key held by another lock registers the caller as its waiter (see WAITERS): in the same call
 * that found the lock held, so waiting costs no round trip more.
 */
const ACQUIRE = `
${SAFE_GET}
${WAITERS}
${TRY_LOCK}
local out = {}
local refreshing = ARGV[4] or ''
for i = 1, #KEYS, 2 do
  local value = get(KEYS[i])
  local waiter = ARGV[3]
  if value and string.byte(refreshing, (i + 1) / 2) == 49 then waiter = '' end
  out[i] = try_lock(KEYS[i], KEYS[i + 1], ARGV[1], ARGV[2], waiter)
  out[i + 1] = value
end
return out
`;

/**
 * The pipeline's read of keys expected missing, and their locks, in one call (FillLock.readOrAcquire).
 * KEYS and ARGV as ACQUIRE's. Per key: a value found is returned as is (`won` -1, no lock tried:
 * the registry judges it, and tries the lock in a separate call if it cannot use it); a key found
 * missing has its lock tried as ACQUIRE does (won 1, the holder's token, or 0; value nil: the
 * script is atomic, so the read before the lock is its re-check). A cold key's filler thus starts
 * after one round trip instead of two (read, then lock), and its waiters are registered by it.
 */
const READ_OR_ACQUIRE = `
${SAFE_GET}
${WAITERS}
${TRY_LOCK}
local out = {}
for i = 1, #KEYS, 2 do
  local value = get(KEYS[i])
  if value then
    out[i] = -1
    out[i + 1] = value
  else
    out[i] = try_lock(KEYS[i], KEYS[i + 1], ARGV[1], ARGV[2], ARGV[3])
    out[i + 1] = false
  end
end
return out
`;

/**
 * ARGV: announce channel (the waiters' ids are appended), sharded ('1'/'0'), then per key token, payload and px ('0': no expiry;
 * '-1': nothing to write, only release). Returns per key 1 when the value was written, else 0.
 * The fence: a filler whose lock expired (paused, slow) or was deleted by an invalidation no longer
 * matches and writes nothing, so it cannot overwrite a newer value or resurrect an invalidated one.
 * A token per key: the fenced writes of fills started by different lock calls (different tokens)
 * in the same tick still travel in one script call.
 */
const WRITE_AND_RELEASE = `
${SAFE_GET}
${ANNOUNCE}
local out = {}
for i = 1, #KEYS, 2 do
  local n = (i + 1) / 2
  local a = 3 * n
  out[n] = 0
  if get(KEYS[i + 1]) == ARGV[a] then
    local px = ARGV[a + 2]
    if px == '0' then
      redis.call('SET', KEYS[i], ARGV[a + 1])
      out[n] = 1
    elseif px ~= '-1' then
      redis.call('SET', KEYS[i], ARGV[a + 1], 'PX', px)
      out[n] = 1
    end
    redis.call('DEL', KEYS[i + 1])
    announce(ARGV[1], ARGV[2], KEYS[i], true, out[n] == 1 and ARGV[a + 1] or nil, ARGV[a])
  end
end
return out
`;

/**
 * KEYS: lock keys only. ARGV: token, announce channel, sharded ('1'/'0'). Compare-and-delete:
 * another filler's lock is untouched. A lock released without a write (its fill failed) is
 * announced too, to its waiters: they then try the lock at once instead of after their backoff.
 * Unless the value is there (PTTL -2: no key): then the release is a re-check's (a replica took
 * the free lock only to find the value written, typically a woken waiter), and whoever registered
 * on that brief lock read the same value in the call that registered it: a message would tell
 * nothing (a waiter that cannot use that value, outdated by its tags, polls). The announcement
 * names the value key.
 */
const RELEASE = `
${SAFE_GET}
${ANNOUNCE}
local released = 0
local suffix = #':lock'
for i = 1, #KEYS do
  if get(KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    released = released + 1
    announce(ARGV[2], ARGV[3], string.sub(KEYS[i], 1, #KEYS[i] - suffix), false, nil, nil)
  end
end
return released
`;

/**
 * KEYS: per key, value key, lock key, invalidation marker. ARGV: the invalidation's time (ms,
 * registry clock), the marker's expiry (ms). Deletes the value and its lock (which fences locked
 * fills) and leaves the marker (which fences fills without the lock: see WRITE_UNLESS_INVALIDATED).
 * The marker keeps the latest time it was given: replicas' invalidations may arrive out of order.
 */
const INVALIDATE = `
${SAFE_GET}
for i = 1, #KEYS, 3 do
  redis.call('UNLINK', KEYS[i], KEYS[i + 1])
  local previous = tonumber(get(KEYS[i + 2]))
  local at = tonumber(ARGV[1])
  if previous ~= nil and previous > at then at = previous end
  redis.call('SET', KEYS[i + 2], string.format('%d', at), 'PX', ARGV[2])
end
return 1
`;

/**
 * KEYS: per write, value key and invalidation marker (one slot: a Cluster call holds one slot's).
 * ARGV: per write, payload, px ('0': no expiry), since (ms, when the fill started). Writes each
 * unless its key was invalidated at or after its `since`: a fill without the lock that started
 * before an invalidation may hold data older than it, and nothing else fences it (the lock's
 * deletion fences only fills that held the lock). Returns per write 1 when written, else 0. The
 * unlocked writes of one setMany (a loader's batch) are one call (redis-unlocked-writes).
 */
const WRITE_UNLESS_INVALIDATED = `
${SAFE_GET}
local out = {}
for i = 1, #KEYS, 2 do
  local j = (i - 1) / 2 * 3
  local at = tonumber(get(KEYS[i + 1]))
  if at ~= nil and at >= tonumber(ARGV[j + 3]) then
    out[#out + 1] = 0
  else
    if ARGV[j + 2] == '0' then
      redis.call('SET', KEYS[i], ARGV[j + 1])
    else
      redis.call('SET', KEYS[i], ARGV[j + 1], 'PX', ARGV[j + 2])
    end
    out[#out + 1] = 1
  end
end
return out
`;

type Arg = string | Buffer | number | readonly (string | Buffer)[];

/** The commands `defineScripts` adds to a client (numKeys first: the key count varies per call). */
export interface LockScripts {
  herdcacheLockAcquire3(numKeys: number, ...args: Arg[]): Promise<(number | string | null)[]>;
  herdcacheLockAcquire3Buffer(numKeys: number, ...args: Arg[]): Promise<(number | Buffer | null)[]>;
  herdcacheReadOrLock1(numKeys: number, ...args: Arg[]): Promise<(number | string | null)[]>;
  herdcacheReadOrLock1Buffer(numKeys: number, ...args: Arg[]): Promise<(number | Buffer | null)[]>;
  herdcacheLockWrite4(numKeys: number, ...args: Arg[]): Promise<number[]>;
  herdcacheLockRelease3(numKeys: number, ...args: Arg[]): Promise<number>;
  herdcacheTagClock1(numKeys: number, ...args: Arg[]): Promise<number>;
  herdcacheTagBump3(numKeys: number, ...args: Arg[]): Promise<number[]>;
  herdcacheTagRead1(numKeys: number, ...args: Arg[]): Promise<(string | null)[]>;
  herdcacheInvalidate1(numKeys: number, ...args: Arg[]): Promise<number>;
}

/** A pipeline with the write script (see WRITE_UNLESS_INVALIDATED). */
export interface ScriptPipeline {
  herdcacheWriteUnlessInvalidated1(numKeys: number, ...args: Arg[]): unknown;
}

/**
 * Adds the scripts to the user's client. The names carry a version: a future script with other
 * semantics gets a new name instead of silently replacing this one on a shared client.
 * Defining them again (a second store on the same client) is harmless: same name, same script.
 */
export function defineScripts(client: Redis | Cluster): LockScripts {
  for (const [name, lua] of Object.entries(SCRIPTS)) client.defineCommand(name, { lua });
  // A command refused inside one is named by its line there (permissions.ts).
  knowScripts(SOURCES);
  return client as unknown as LockScripts;
}

/** Every script, by the name it is defined under. */
const SCRIPTS: Readonly<Record<string, string>> = {
  herdcacheLockAcquire3: ACQUIRE,
  herdcacheReadOrLock1: READ_OR_ACQUIRE,
  herdcacheLockWrite4: WRITE_AND_RELEASE,
  herdcacheLockRelease3: RELEASE,
  herdcacheTagClock1: TAG_CLOCK,
  herdcacheTagBump3: TAG_BUMP,
  herdcacheTagRead1: TAG_READ,
  herdcacheInvalidate1: INVALIDATE,
  herdcacheWriteUnlessInvalidated1: WRITE_UNLESS_INVALIDATED,
};

/** The scripts' sources, as sent. */
const SOURCES: readonly string[] = Object.values(SCRIPTS);
