/**
 * How an entry becomes bytes in a shared store, and back.
 *
 * A payload carries its own format version and its freshness, so a reader needs nothing but the
 * payload (no PTTL round trip), and a payload written by another program, an older herdcache or a
 * broken writer is recognised as such and read as a miss instead of being served.
 */
import { holdsSettled, settledReplacer } from '../core/settled';
import type { Entry } from '../core/freshness';
import { HerdcacheError } from '../core/errors';

export interface Codec {
  /**
   * True when `encode` returns Buffers that are not valid UTF-8 text (msgpack, compressed JSON):
   * the store then reads with the Buffer variants of its commands. Default false.
   */
  readonly binary?: boolean;
  /** Throws when the entry cannot be represented; the store reports it and skips the write. */
  encode(entry: Entry): string | Buffer;
  /** Throws on anything it did not write itself; the store reports it and answers a miss. */
  decode(raw: string | Buffer): Entry;
}

/** The format version inside every JSON payload; bump it when the layout changes. */
export const JSON_FORMAT_VERSION = 1;

/**
 * JSON with the layout `{"v":1,"f":freshUntil,"s":staleUntil,"m":fillMs,"t":tags,"g":tagVersions,"d":value}`
 * ("m" only when the entry records its fill time, for early refresh; "t" only for a tagged value,
 * "g" only with "t", aligned with it). Optional fields leave the format version at 1: an older
 * payload simply has none of them, and a reader that predates them would serve a tagged entry
 * without its fence, which is why tags must not be rolled out to a fleet still running a
 * herdcache that ignores "t" and "g" (upgrade every replica first, then add tags).
 * A field of the wrong shape (tags not strings, versions not integers, lengths apart) makes the
 * payload malformed: a miss, never an entry with half its fence.
 *
 * JSON has no Infinity: an infinite `freshUntil`/`staleUntil` is written as `null` and read back
 * as Infinity. The value itself follows JSON's rules (a Date comes back as a string, `undefined`
 * inside objects is dropped, Infinity inside the value becomes null); plug a codec of your own
 * when values need more. BigInt and cycles cannot be encoded: the write is skipped and reported.
 */
export const jsonCodec: Codec = {
  encode(entry: Entry): string {
    let data: string | undefined;
    try {
      // A value holding promises its producer awaited (a @cached field's: graphql/settle) writes their values.
      data = holdsSettled(entry.value) ? JSON.stringify(entry.value, settledReplacer) : JSON.stringify(entry.value);
    } catch (error) {
      throw new HerdcacheError('E_STORE_ENCODE', `herdcache: value cannot be encoded as JSON (${messageOf(error)})`, {
        cause: error,
      });
    }
    // A function or a symbol at the top level stringifies to undefined: there is nothing to store.
    if (data === undefined) {
      throw new HerdcacheError(
        'E_STORE_ENCODE',
        `herdcache: value of type ${typeof entry.value} cannot be encoded as JSON`,
      );
    }
    // Built by hand: the envelope object would be one more allocation per write for nothing.
    const fillMs = entry.fillMs;
    const m = fillMs !== undefined && Number.isFinite(fillMs) ? `,"m":${fillMs}` : '';
    const tags = entry.tags;
    let t = '';
    if (tags !== undefined && tags.length > 0) {
      t = `,"t":${JSON.stringify(tags)}`;
      const versions = entry.tagVersions;
      if (versions !== undefined) {
        if (!isVersionList(versions, tags.length))
          throw new HerdcacheError(
            'E_STORE_ENCODE',
            'herdcache: entry tagVersions must be integers aligned with its tags',
          );
        t += `,"g":[${versions.join(',')}]`;
      }
    }
    return `{"v":${JSON_FORMAT_VERSION},"f":${time(entry.freshUntil)},"s":${time(entry.staleUntil)}${m}${t},"d":${data}}`;
  },

  decode(raw: string | Buffer): Entry {
    const text = typeof raw === 'string' ? raw : raw.toString('utf8');
    const fast = decodePlain(text) ?? decodeUntagged(text);
    if (fast !== undefined) return fast;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      throw decodeError(`payload is not JSON (${messageOf(error)})`, error);
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
      throw decodeError('payload is not a herdcache entry');
    const payload = parsed as {
      v?: unknown;
      f?: unknown;
      s?: unknown;
      m?: unknown;
      t?: unknown;
      g?: unknown;
      d?: unknown;
    };
    if (payload.v !== JSON_FORMAT_VERSION) {
      throw decodeError(
        typeof payload.v === 'number'
          ? `unsupported format version ${payload.v} (this herdcache reads ${JSON_FORMAT_VERSION})`
          : 'payload is not a herdcache entry',
      );
    }
    const freshUntil = readTime(payload.f);
    const staleUntil = readTime(payload.s);
    const fillMs = payload.m;
    if (
      freshUntil === undefined ||
      staleUntil === undefined ||
      staleUntil < freshUntil ||
      payload.d === undefined ||
      (fillMs !== undefined && typeof fillMs !== 'number')
    ) {
      throw decodeError('payload is a malformed herdcache entry');
    }
    const { t: tags, g: versions } = payload;
    if (tags === undefined) {
      if (versions !== undefined) throw decodeError('payload has tag versions without tags');
      return fillMs === undefined
        ? { value: payload.d, freshUntil, staleUntil }
        : { value: payload.d, freshUntil, staleUntil, fillMs };
    }
    if (!isTagList(tags)) throw decodeError('payload tags are not a non-empty array of non-empty strings');
    if (versions !== undefined && !isVersionList(versions, tags.length))
      throw decodeError('payload tag versions are not integers aligned with its tags');
    const entry: { -readonly [P in keyof Entry]: Entry[P] } = { value: payload.d, freshUntil, staleUntil };
    if (fillMs !== undefined) entry.fillMs = fillMs;
    entry.tags = tags;
    if (versions !== undefined) entry.tagVersions = versions;
    return entry;
  },
};

/** How an untagged payload as encode writes it starts, and the fields after its freshUntil. */
const HEAD = `{"v":${JSON_FORMAT_VERSION},"f":`;
const STALE = ',"s":';
const FILL_MS = ',"m":';
const DATA = ',"d":';

/** What scanTime last read: the number (Infinity for null), and whether it was null. */
let scanned = 0;
let scannedNull = false;

/**
 * Reads a JSON number or `null` at `at`: returns the position after it, -1 if there is none
 * (then the full path decides). Short integers (the timestamps encode writes) are summed digit
 * by digit, exactly (15 digits stay below 2^53); anything else goes through Number() of its
 * text, which reads a JSON number as JSON.parse does.
 */
function scanTime(text: string, at: number): number {
  let i = at;
  let c = text.charCodeAt(i);
  scannedNull = c === 110; /* n */
  if (scannedNull) {
    if (!text.startsWith('null', i)) return -1;
    scanned = Infinity;
    return i + 4;
  }
  if (c === 45 /* - */) c = text.charCodeAt(++i);
  if (c === 48 /* 0 */) c = text.charCodeAt(++i);
  else if (c >= 49 && c <= 57) {
    let n = 0;
    do {
      n = n * 10 + (c - 48);
      c = text.charCodeAt(++i);
    } while (c >= 48 && c <= 57);
    if (c !== 46 /* . */ && c !== 101 /* e */ && c !== 69 /* E */ && i - at <= 15 && text.charCodeAt(at) !== 45) {
      scanned = n;
      return i;
    }
  } else return -1;
  if (c === 46) {
    c = text.charCodeAt(++i);
    if (!(c >= 48 && c <= 57)) return -1;
    do c = text.charCodeAt(++i);
    while (c >= 48 && c <= 57);
  }
  if (c === 101 || c === 69) {
    c = text.charCodeAt(++i);
    if (c === 43 || c === 45 /* + - */) c = text.charCodeAt(++i);
    if (!(c >= 48 && c <= 57)) return -1;
    do c = text.charCodeAt(++i);
    while (c >= 48 && c <= 57);
  }
  scanned = Number(text.slice(at, i));
  return i;
}

/**
 * The warm read path's decode: an untagged payload as encode writes it is read by scanning its
 * header and parsing only the value, instead of parsing the envelope into an object and checking
 * its fields (the envelope costs as much to parse as a small value; a regular expression's match
 * costs an array and three strings per key). What it accepts is exactly what the full path
 * accepts for that text (the rest, `}`, closes the object, so the value is one JSON value);
 * anything else (tags, another field order, garbage) is left to the full path, which decides and
 * names the error.
 */
function decodeUntagged(text: string): Entry | undefined {
  const last = text.length - 1;
  if (text.charCodeAt(last) !== 125 /* } */ || !text.startsWith(HEAD)) return undefined;
  let at = scanTime(text, HEAD.length);
  if (at < 0 || !text.startsWith(STALE, at)) return undefined;
  const freshUntil = scanned;
  at = scanTime(text, at + STALE.length);
  if (at < 0) return undefined;
  const staleUntil = scanned;
  if (staleUntil < freshUntil) return undefined;
  let fillMs: number | undefined;
  if (text.startsWith(FILL_MS, at)) {
    at = scanTime(text, at + FILL_MS.length);
    // null is not a fill time: the full path calls it malformed.
    if (at < 0 || scannedNull) return undefined;
    fillMs = scanned;
  }
  if (!text.startsWith(DATA, at)) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text.slice(at + DATA.length, last));
  } catch {
    return undefined;
  }
  return fillMs === undefined ? { value, freshUntil, staleUntil } : { value, freshUntil, staleUntil, fillMs };
}

/**
 * The header (everything before the value) of the last payload decodePlain read, and its times:
 * the entries of one batch fill are written with one clock reading, so a batch read back is
 * mostly payloads with that same header. Comparing it whole is one string equality of a slice;
 * reading it costs a few dozen character reads (~60 per payload, a third of a warm read's decode).
 */
let lastHeader = '';
let lastFresh = 0;
let lastStale = 0;

/**
 * The most common payload, `{"v":1,"f":<int>,"s":<int>,"d":<value>}` (finite times, no fill time,
 * no tags): the header of the last one read again (lastHeader), else read with the two timestamps
 * summed in local variables (decodeUntagged's general scan keeps what it read in module state, a
 * boxed number per write, and tests each field name with startsWith). Whatever it does not
 * recognise (null times, a fill time, another shape) is left to decodeUntagged. Integers of at
 * most 15 digits without sign, fraction or exponent are summed exactly, as JSON.parse reads them;
 * a leading zero is left to the general scan.
 */
function decodePlain(text: string): Entry | undefined {
  const last = text.length - 1;
  if (text.charCodeAt(last) !== 125 /* } */) return undefined;
  const n = lastHeader.length;
  // Compared as a slice with ===, not with startsWith: the header changes from batch to batch, and
  // startsWith of a search string the compiler cannot fold is a builtin call comparing character
  // by character (~180 ns a payload, measured); string equality of the slice is ~10 times cheaper.
  if (n > 0 && text.length > n && text.slice(0, n) === lastHeader) {
    const value = parseValue(text, n, last);
    return value === NOT_JSON ? undefined : { value, freshUntil: lastFresh, staleUntil: lastStale };
  }
  if (!has(text, 0, HEAD)) return undefined;
  let i = HEAD.length;
  let c = text.charCodeAt(i);
  if (c < 49 || c > 57) return undefined;
  let freshUntil = 0;
  do {
    freshUntil = freshUntil * 10 + (c - 48);
    c = text.charCodeAt(++i);
  } while (c >= 48 && c <= 57);
  if (i - HEAD.length > 15 || !has(text, i, STALE)) return undefined;
  i += STALE.length;
  const start = i;
  c = text.charCodeAt(i);
  if (c < 49 || c > 57) return undefined;
  let staleUntil = 0;
  do {
    staleUntil = staleUntil * 10 + (c - 48);
    c = text.charCodeAt(++i);
  } while (c >= 48 && c <= 57);
  if (i - start > 15 || staleUntil < freshUntil || !has(text, i, DATA)) return undefined;
  i += DATA.length;
  const value = parseValue(text, i, last);
  if (value === NOT_JSON) return undefined;
  lastHeader = text.slice(0, i);
  lastFresh = freshUntil;
  lastStale = staleUntil;
  return { value, freshUntil, staleUntil };
}

const NOT_JSON: unique symbol = Symbol('not JSON');

/** JSON.parse of text[from, to), or NOT_JSON. */
function parseValue(text: string, from: number, to: number): unknown {
  try {
    return JSON.parse(text.slice(from, to));
  } catch {
    return NOT_JSON;
  }
}

/** Whether `text` holds `mark` at `at`. */
function has(text: string, at: number, mark: string): boolean {
  for (let j = 0; j < mark.length; j++) if (text.charCodeAt(at + j) !== mark.charCodeAt(j)) return false;
  return true;
}

function isTagList(value: unknown): value is string[] {
  return Array.isArray(value) && value.length > 0 && value.every((tag) => typeof tag === 'string' && tag.length > 0);
}

/** Versions are non-negative safe integers (the server's clock in µs; small counts from earlier versions), one per tag. */
function isVersionList(value: unknown, length: number): value is number[] {
  return Array.isArray(value) && value.length === length && value.every((v) => Number.isSafeInteger(v) && v >= 0);
}

function time(ms: number): string {
  return Number.isFinite(ms) ? String(ms) : 'null';
}

function readTime(value: unknown): number | undefined {
  if (value === null) return Infinity;
  return typeof value === 'number' ? value : undefined;
}

function decodeError(reason: string, cause?: unknown): HerdcacheError {
  return new HerdcacheError(
    'E_STORE_DECODE',
    `herdcache: stored entry cannot be decoded: ${reason}`,
    cause === undefined ? undefined : { cause },
  );
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
