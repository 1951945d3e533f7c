/**
 * The Lua scripts of the tag versions and the tag clock (tags.ts, tag-clock.ts), defined on the
 * client with the others by scripts.ts's defineScripts.
 */
/**
 * A reading of the tag clock (tag-clock.ts) at KEYS[1], or 0 when the key is missing or not ours (a
 * number is all the scripts ever write there).
 */
const CLOCK_READ = `
local function clock_at(key)
  local stored = redis.pcall('GET', key)
  if type(stored) == 'table' and stored.err and not string.find(stored.err, 'WRONGTYPE', 1, true) then error(stored) end
  if type(stored) ~= 'string' then return 0 end
  local n = tonumber(stored)
  if n == nil or n ~= n or n < 0 or n >= 9007199254740992 or n ~= math.floor(n) then return 0 end -- not ours (1e300, inf)
  return n
end
local function server_us()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000000 + tonumber(now[2])
end`;

/**
 * KEYS: the tag clock. Returns its reading now: the latest reading given to an invalidation, or the
 * server's time in microseconds if later (the clock key may be missing: never set, evicted). Every
 * invalidation made after this call gets a reading above it (TAG_BUMP). Reads only.
 */
export const TAG_CLOCK = `
${CLOCK_READ}
local stored = clock_at(KEYS[1])
local now = server_us()
if stored > now then return stored end
return now
`;

/**
 * KEYS: the tag clock when ARGV[2] is '' (then advanced here: one Redis, or Cluster's first step),
 * then per tag its version key and its sequence key (same slot). ARGV: expiry (ms) of the keys after
 * the bump; '' (take the reading from KEYS[1]), 'now' (the clock's node is unreachable: this node's
 * time stands in) or the reading the first step returned. Returns the reading, then the new versions.
 *
 * The reading: above the clock's last one and above the server's time in microseconds (so above any
 * reading TAG_CLOCK gave before this call), kept at the clock key. Each tag's sequence key keeps the
 * latest reading it was given (in a Cluster, replicas' bumps may reach a slot out of order).
 *
 * The versions: one more than the version (two replicas bumping at once both move it, and neither
 * can move it back), and at least the server's time in microseconds, so a version is never one a
 * lost key had (see TAG_READ: a version key lost with its node, a failover, an eviction, must not
 * read as a version entries recorded before). SET with PX in one script, so a version key never
 * exists without an expiry. Something foreign at a version key (another type, a string that is not
 * a positive integer) is replaced the same way: every entry of the tag is a miss from here on.
 * Numbers are written with %.0f: Lua's own conversion turns a microsecond reading into 1.7e+15.
 */
export const TAG_BUMP = `
${CLOCK_READ}
local first = 1
local reading
local now = server_us()
if ARGV[2] == '' then
  reading = math.max(clock_at(KEYS[1]), now) + 1
  redis.call('SET', KEYS[1], string.format('%.0f', reading), 'PX', ARGV[1])
  first = 2
elseif ARGV[2] == 'now' then
  reading = now + 1
else
  reading = tonumber(ARGV[2])
end
local out = { reading }
for i = first, #KEYS, 2 do
  local version = math.max(clock_at(KEYS[i]) + 1, now)
  redis.call('SET', KEYS[i], string.format('%.0f', version), 'PX', ARGV[1])
  out[#out + 1] = version
  local last = clock_at(KEYS[i + 1])
  if last < reading then last = reading end
  redis.call('SET', KEYS[i + 1], string.format('%.0f', last), 'PX', ARGV[1])
end
return out
`;

/**
 * KEYS: tag version keys (in TAG_READ's 'since' mode, each followed by its sequence key). ARGV: the
 * expiry (ms) of a version key made here, and '' or 'since'. Returns each tag's version (and its
 * sequence key's raw value, in 'since' mode).
 *
 * A missing version key (or one holding what is no version of ours: another type, another string)
 * is made here, at the server's time in microseconds (as a bump makes one),
 * rather than read as 0: the entries filled now record that version. A key lost later (its node
 * restarted empty, a failover that lost it, an eviction) is made again at a later time, a version
 * no entry recorded: they are misses, never served as current again. (Read as 0, every entry
 * filled before the tag's first invalidation, and every one that recorded a counter the lost key
 * is counted back to, read as current again.) Its expiry: the longest a tagged entry lives
 * (tagTtl), given again by a read past half of it, so a key read on stays; one not read for half
 * a tagTtl may expire under an entry, which is then a miss when the key is made again.
 */
export const TAG_READ = `
${CLOCK_READ}
local out = {}
local step = 1
if ARGV[2] == 'since' then step = 2 end
local now
for i = 1, #KEYS, step do
  local stored = redis.pcall('GET', KEYS[i])
  if type(stored) == 'table' and stored.err and not string.find(stored.err, 'WRONGTYPE', 1, true) then error(stored) end
  if stored == false or type(stored) ~= 'string' or not string.match(stored, '^%d+$') or #stored > 16 or tonumber(stored) > 9007199254740991 then
    -- Missing, or not a version of ours (another type, a string that is not one: garbage under our
    -- prefix): made at the server's time, as a bump would make it. Left as it was, no entry of the
    -- tag could be cached while it stays (its version unknown) and nothing would say so.
    now = now or string.format('%.0f', server_us())
    stored = now
    redis.call('SET', KEYS[i], stored, 'PX', ARGV[1])
  else
    -- Kept while it is read: a key past half its read expiry is given it again (SET: PEXPIRE is no
    -- command of the ACL rule). Else a key made by a read would expire under the entries that
    -- recorded it, which read then (a wave of misses every tagTtl). A longer expiry (a bump's) is
    -- never shortened.
    local pttl = redis.call('PTTL', KEYS[i])
    if pttl >= 0 and pttl < tonumber(ARGV[1]) / 2 then redis.call('SET', KEYS[i], stored, 'PX', ARGV[1]) end
  end
  out[#out + 1] = stored
  if step == 2 then
    local seq = redis.pcall('GET', KEYS[i + 1])
    if type(seq) == 'table' then seq = 'foreign' end -- another type: unknown (false, no key, reads as nil)
    out[#out + 1] = seq
  end
end
return out
`;
