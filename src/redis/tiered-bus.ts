/**
 * What the tiered store's replicas tell each other, how a replica listens (its subscription, which
 * can be lost), and how it keeps an L2 read from undoing a change it heard about while the read was
 * in flight.
 *
 * Messages are JSON, small on purpose: who sent it, what kind of change, and the keys or tags; never
 * values. `{"from":"9f…","op":"set","keys":["user:1"]}`, `{"from":…,"op":"delete","keys":[…]}`,
 * `{"from":…,"op":"tags","tags":["User:1"]}`, `{"from":…,"op":"clear"}`. "set" and "delete" both
 * drop L1 copies; they differ for the registry: a delete is an invalidation (fills of the key in
 * flight are stale), a set is not.
 */
import type { Cluster, Redis } from 'ioredis';
import type { Entry } from '../core/freshness';
import { listen } from './connection-events';
import { hashSlot } from './keys';
import { warnIfDenied } from './permissions';

export type Change =
  | { readonly op: 'set'; readonly keys: readonly string[] }
  | { readonly op: 'delete'; readonly keys: readonly string[] }
  | { readonly op: 'tags'; readonly tags: readonly string[] }
  | { readonly op: 'clear' };

export interface Message {
  readonly from: string;
  readonly change: Change;
}

export function encodeMessage(from: string, change: Change): string {
  return JSON.stringify({ from, ...change });
}

/**
 * The messages for one change, each at most `maxBytes` (UTF-8): a change naming many keys or tags
 * is split into several. A single key or tag too long to fit any message becomes a "clear" (every
 * replica drops its whole L1, and its fills in flight: coarse, never stale).
 */
export function encodeMessages(from: string, change: Change, maxBytes: number): string[] {
  const whole = encodeMessage(from, change);
  if (Buffer.byteLength(whole) <= maxBytes) return [whole];
  if (change.op === 'clear') return [whole];
  const items = change.op === 'tags' ? change.tags : change.keys;
  const empty = Buffer.byteLength(encodeMessage(from, withItems(change, [])));
  const out: string[] = [];
  let chunk: string[] = [];
  let size = empty;
  for (const item of items) {
    // Its JSON form plus a comma: a bound on what it adds to the message.
    const cost = Buffer.byteLength(JSON.stringify(item)) + 1;
    if (empty + cost > maxBytes) return [encodeMessage(from, { op: 'clear' })];
    if (size + cost > maxBytes) {
      out.push(encodeMessage(from, withItems(change, chunk)));
      chunk = [];
      size = empty;
    }
    chunk.push(item);
    size += cost;
  }
  if (chunk.length > 0) out.push(encodeMessage(from, withItems(change, chunk)));
  return out;
}

function withItems(change: Exclude<Change, { op: 'clear' }>, items: readonly string[]): Change {
  return change.op === 'tags' ? { op: 'tags', tags: items } : { op: change.op, keys: items };
}

/** The message, or undefined when it is not one this version of herdcache understands. */
export function decodeMessage(raw: string): Message | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (parsed === null || typeof parsed !== 'object') return undefined;
  const { from, op, keys, tags } = parsed as { from?: unknown; op?: unknown; keys?: unknown; tags?: unknown };
  if (typeof from !== 'string') return undefined;
  if ((op === 'set' || op === 'delete') && isStrings(keys)) return { from, change: { op, keys } };
  if (op === 'tags' && isStrings(tags)) return { from, change: { op, tags } };
  if (op === 'clear') return { from, change: { op } };
  return undefined;
}

function isStrings(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === 'string');
}

export interface SubscriptionEvents {
  message(raw: string): void;
  /** Deaf from now on: the connection closed (it may come back). */
  lost(): void;
  /** SUBSCRIBE confirmed, at creation or after a reconnect: messages flow from now on. */
  joined(): void;
}

/**
 * The channel subscription on the user's dedicated connection. ioredis resubscribes by itself
 * after a reconnect; this sends one more SUBSCRIBE on every 'ready' anyway, because its reply says
 * when the subscription took effect (harmless: same channel, same connection).
 * In a Cluster the channel is a shard channel (SSUBSCRIBE, Redis 7): its messages travel to the
 * nodes of one shard instead of being broadcast to every node of the cluster. A server without
 * sharded pub/sub never confirms it: the replica stays deaf, and its L1 copies live at most l1Ttl.
 */
export class Subscription {
  readonly #connection: Redis | Cluster;
  readonly #channel: string;
  readonly #sharded: boolean;
  readonly #prefixedChannel: string;
  readonly #events: SubscriptionEvents;
  #active = false;
  #attempt = 0;
  #closed = false;
  /** Removes this subscription's handlers from the connection's shared listeners (connection-events.ts). */
  readonly #unlisten: (() => void)[];

  readonly #onMessage = (channel: string, message: string): void => {
    // A shard channel comes back with the client's keyPrefix, which the channel name does not carry.
    if (!this.#closed && (channel === this.#channel || channel === this.#prefixedChannel))
      this.#events.message(message);
  };

  readonly #onLost = (): void => {
    this.#active = false;
    this.#attempt++; // a SUBSCRIBE answered after this belongs to the old connection
    this.#events.lost();
  };

  readonly #onReady = (): void => {
    this.#subscribe();
  };

  constructor(connection: Redis | Cluster, channel: string, events: SubscriptionEvents) {
    this.#connection = connection;
    this.#channel = channel;
    this.#sharded = connection.isCluster === true;
    this.#prefixedChannel = this.#sharded ? (connection.options?.keyPrefix ?? '') + channel : channel;
    this.#events = events;
    this.#unlisten = [
      listen(connection, this.#sharded ? 'smessage' : 'message', this.#onMessage),
      listen(connection, 'close', this.#onLost),
      listen(connection, 'end', this.#onLost),
      listen(connection, 'ready', this.#onReady),
    ];
    if (this.#sharded)
      // A sharded subscriber's shard connection that drops emits neither 'close' nor 'end' on the
      // Cluster: only '-node' (ioredis then replaces it, and says 'subscribersReady' once its
      // channels are subscribed again). Deaf meanwhile: L1 emptied; SSUBSCRIBE once ready again
      // confirms when messages flow (and empties L1 again).
      this.#unlisten.push(
        listen(connection, '-node', this.#onShardLost),
        listen(connection, 'subscribersReady', this.#onReady),
      );
    this.#subscribe();
  }

  /**
   * A Cluster connection ended (`nodeKey`: its "host:port"). The Cluster says '-node' for any of
   * its connections (an idle one the server closed, another shard's): deaf only when it is the
   * channel's shard (or the slots are not known). ioredis subscribes the channel again on a new
   * connection and then says 'subscribersReady', where it is confirmed (#onReady).
   */
  readonly #onShardLost = (_redis: unknown, nodeKey: unknown): void => {
    if (this.#closed) return;
    const serving = (this.#connection as Cluster).slots?.[hashSlot(this.#prefixedChannel)];
    if (serving !== undefined && serving.length > 0 && !serving.includes(String(nodeKey))) return;
    this.#onLost();
  };

  /** Whether messages reach this replica now. */
  get active(): boolean {
    return this.#active;
  }

  #subscribe(): void {
    if (this.#closed) return;
    const attempt = ++this.#attempt;
    const connection = this.#connection as Redis;
    (this.#sharded ? connection.ssubscribe(this.#channel) : connection.subscribe(this.#channel)).then(
      () => {
        if (this.#closed || attempt !== this.#attempt) return;
        this.#active = true;
        this.#events.joined();
      },
      (error: unknown) => {
        // Still deaf; the next 'ready' (a Cluster: 'subscribersReady') tries again.
        warnIfDenied(this.#sharded ? 'ssubscribe' : 'subscribe', error);
      },
    );
  }

  /** Stops listening and unsubscribes (bounded: a close must not hang on a dead connection). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#active = false;
    const connection = this.#connection;
    for (const off of this.#unlisten) off();
    if (connection.status !== 'ready') return;
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise((resolve) => {
      timer = setTimeout(resolve, 1000);
      timer.unref();
    });
    const unsubscribed = this.#sharded
      ? (connection as Redis).sunsubscribe(this.#channel)
      : (connection as Redis).unsubscribe(this.#channel);
    await Promise.race([unsubscribed.catch(() => undefined), bound]);
    clearTimeout(timer);
  }
}

/**
 * The changes seen while one L2 call was in flight (a read, a write, a lock attempt). Its results
 * become L1 copies only for keys and tags nothing touched meanwhile: a change heard over pub/sub, or
 * a write or invalidation issued here after the call (which the call's answer predates).
 * Windows live only as long as their call (plus a tag check): their number is bounded by the calls
 * in flight, and what they record by the changes heard in that time.
 */
export class ChangeWindow {
  /** When the call was issued: an L1 copy made from its answer lives until start + l1Ttl. */
  readonly start: number;
  #all = false;
  #keys: Set<string> | undefined;
  #tags: Set<string> | undefined;

  constructor(start: number) {
    this.start = start;
  }

  dropKeys(keys: readonly string[]): void {
    if (this.#all) return;
    const set = (this.#keys ??= new Set());
    for (const key of keys) set.add(key);
  }

  dropTags(tags: readonly string[]): void {
    if (this.#all) return;
    const set = (this.#tags ??= new Set());
    for (const tag of tags) set.add(tag);
  }

  dropAll(): void {
    this.#all = true;
    this.#keys = undefined;
    this.#tags = undefined;
  }

  /** Whether `key` (with `entry`'s tags) may be copied into L1 from this call's answer. */
  allows(key: string, entry: Entry | undefined): boolean {
    if (this.#all) return false;
    if (this.#keys?.has(key)) return false;
    const tags = this.#tags;
    if (tags !== undefined && entry?.tags !== undefined) {
      for (const tag of entry.tags) if (tags.has(tag)) return false;
    }
    return true;
  }
}
