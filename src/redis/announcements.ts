/**
 * Fill announcements: a replica waiting on another replica's fill lock learns the moment the value
 * lands, instead of after its poll backoff (50 ms, doubling).
 *
 * Only where someone waits. A process that finds a key locked by another registers as its waiter
 * in the same script call (the lock attempt: its id goes into `prefix{K}:waiters`, which expires
 * with the lock; scripts.ts). The fenced write script, and the release script, read that marker
 * when they give the lock up: nobody registered, no message (a fill nobody waits on costs one GET
 * inside the script, the same at 4 or 64 subscribed replicas); otherwise one message per waiting
 * process, on that process's own channel, and the marker is deleted. So the filler pays no round
 * trip, a replica that does not wait hears nothing, and Redis output grows with the waiters of a
 * key, never with the fleet. A small value (up to 16 KiB) travels in the message with the token of
 * the lock it was written under, written and announced by one atomic script: the waiter answers from
 * it when its own last attempt found that lock (so the write came after it: a late message of an
 * earlier lock only wakes it) and the value is usable (tags still current), with no round trip
 * after the write. Otherwise (a release, a large
 * value, an outdated one, a writer of an earlier version) the woken waiter tries the lock again at
 * once, and that one script call reads the value (the lock's re-check). Either way the bytes are
 * those the re-read would have fetched. A
 * background refresh that meets the lock with the stale value there keeps serving it and is not
 * registered (the attempt says which keys are refreshes): it waits for nothing, so nothing is sent
 * to it. A key's marker holds at most 4 KiB of ids (some 290 processes): further processes are not
 * registered and learn of the write by their poll, so a key the whole of a large fleet waits on
 * costs a bounded marker and a bounded number of messages per write.
 *
 * Why a channel per process, not per key: a per-key channel would need a SUBSCRIBE and an
 * UNSUBSCRIBE per wait, on another connection than the lock attempt (so its confirmation races
 * the attempt, or costs a round trip before it), and server-side channel churn under every
 * stampede; a bounded set of hashed channels would still reach processes waiting on other keys
 * of the bucket, and be subscribed by whoever waits there. A process channel is subscribed once
 * and kept: no churn, and the marker names exactly who waits.
 *
 * Ordering, why no waiter is left behind: both scripts run atomically on the server. A waiter's
 * attempt that runs before the write finds the lock held and registers: the write sees it and
 * tells it. One that runs after the write finds the lock gone (or someone else's new lock) and
 * reads the value written, in the same call: nothing to be told. A waiter that keeps waiting
 * registers again on every attempt (on whatever lock holds the key then).
 *
 * One subscriber connection per store (the user's, like tieredStore's) serves every waiting key of
 * the process: its channel is subscribed once and stays subscribed, and a local map routes each
 * message to the waits of its key. Standalone: one channel, `prefix` + `filled.` + the process id
 * (PUBLISH/SUBSCRIBE). Cluster: sharded pub/sub (Redis 7 SPUBLISH/SSUBSCRIBE), one shard channel
 * per hash slot and process, named with a hash tag of that slot so the write script (which may
 * only touch its own slot) can publish on it, and subscribed lazily the first time a key of that
 * slot is waited on; a message then travels to the shard of its slot only.
 *
 * Polling stays underneath, unchanged: a wait ends with the announcement or with the poll's sleep,
 * whichever comes first. So a lost message, a subscriber that is disconnected, or a server without
 * sharded pub/sub costs latency (the backoff), never correctness; each such wait is counted.
 * Messages published while a channel's SUBSCRIBE was not yet confirmed are lost: when it is
 * confirmed (first time, or after a reconnect), every wait in progress is woken once to re-check.
 */
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { invalidOption } from '../core/errors';
import type { LockWatch } from '../core/store';
import { disconnectSettled, listen } from './connection-events';
import { warnIfDenied } from './permissions';
import { hashSlot } from './keys';
import { VALUE_READER, parseAnnouncement, shardChannel, standaloneChannel } from './fill-channels';
import { Wait, type WaitOwner } from './fill-wait';
import type { RedisLink } from './link';

function noop(): void {}

export interface WakeStats {
  /** Whether the subscriber connection is up (its channels may still be subscribing). */
  readonly listening: boolean;
  /** Channels subscribed and confirmed (standalone: at most 1; Cluster: one per slot waited on). */
  readonly channels: number;
  /** Announcements received for keys this process was waiting on. */
  readonly received: number;
  /** Waits ended by an announcement (or a re-subscription), before the poll's sleep was over. */
  readonly woken: number;
  /** Waits that ran their whole poll sleep: no announcement came (lost, or none yet). */
  readonly polled: number;
  /** Waits begun while their key's channel was not subscribed (connection down, unsupported): polling only. */
  readonly deaf: number;
}

type ChannelState = 'subscribing' | 'active' | 'failed' | 'unsupported';

/** How long a channel whose SUBSCRIBE failed is left alone before a wait tries again. */
const RETRY_AFTER_MS = 5000;

export class FillAnnouncements implements WaitOwner {
  /** The connection, once there is one: the user's (given), or opened here on the first wait. */
  #subscriber: Redis | Cluster | undefined;
  /** Whether the connection was opened here: then it is ours to close (close()). */
  readonly #owned: boolean;
  readonly #link: RedisLink;
  readonly #sharded: boolean;
  /** Channel name as sent to SUBSCRIBE/SSUBSCRIBE (the subscriber adds its keyPrefix to shard channels). */
  readonly #channels = new Map<string, { state: ChannelState; since: number; attempt: number }>();
  /** Full Redis value key → the waits on it. */
  readonly #waits = new Map<string, Set<Wait>>();
  readonly #standaloneChannel: string;
  /**
   * This store's waiter id: the lock attempts register it on the keys they find held, and the
   * scripts announce those keys on the channels named with it. Random: unique across the fleet
   * for any practical purpose (48 bits), hex (never the space that separates ids in a marker),
   * ending with VALUE_READER: this store reads a value out of the message that carries one.
   */
  readonly #id = randomBytes(6).toString('hex') + VALUE_READER;
  /** A Cluster without sharded pub/sub (before Redis 7): nothing would reach us, so we register nowhere. */
  #unsupported = false;
  #listening = false;
  #closed = false;
  /** Removes this store's handlers from the shared listeners of the client and the subscriber. */
  #unlisten: (() => void)[] = [];
  received = 0;
  woken = 0;
  polled = 0;
  deaf = 0;

  readonly #onMessage = (_channel: Buffer, message: Buffer): void => {
    const { key, token, payload } = parseAnnouncement(message, this.#link.binary);
    const waits = this.#waits.get(key);
    if (waits === undefined) return;
    this.received++;
    // Decoded once for every wait on the key; undecodable: they re-read it, as without a value.
    const entry = payload === undefined ? undefined : this.#link.decodeAgain(payload);
    for (const wait of waits) wait.announce(key, entry, token);
  };

  readonly #onLost = (): void => {
    this.#listening = false;
    for (const channel of this.#channels.values())
      if (channel.state === 'active' || channel.state === 'subscribing') channel.state = 'failed';
  };

  readonly #onReady = (): void => {
    this.#listening = true;
    // ioredis resubscribes by itself; asking again gives the moment it took effect (see joined).
    for (const [name, channel] of this.#channels) if (channel.state !== 'unsupported') this.#subscribe(name);
  };

  /** The user quit (or gave up on) the store client: a subscriber opened for it goes with it. */
  readonly #onClientEnd = (): void => {
    this.close();
  };

  /**
   * Before each reconnection of our own connection: the user's client closed meanwhile without an
   * 'end' (ioredis 5's disconnect() while it was itself reconnecting leaves it 'reconnecting', its
   * retries stopped): ours stops too, or its retries alone would keep the process alive.
   */
  readonly #onReconnecting = (): void => {
    const client = this.#link.client as unknown as { status?: string; manuallyClosing?: boolean };
    if (client.status === 'end' || client.manuallyClosing === true) this.close();
  };

  /**
   * `subscriber`: the user's connection, used as given (subscribed now: the first stampede is
   * heard); undefined: the store opens its own, `client.duplicate()` (a Cluster: with sharded
   * subscribers), the first time a wait needs it, and closes it on close() or when the user's
   * client ends. A process whose replicas never wait on each other never opens it.
   */
  constructor(subscriber: Redis | Cluster | undefined, link: RedisLink) {
    this.#link = link;
    this.#sharded = link.cluster;
    this.#standaloneChannel = standaloneChannel(link) + this.#id;
    this.#owned = subscriber === undefined;
    if (subscriber === undefined) {
      // One listener on the client for all its stores (connection-events.ts), not one per store.
      this.#unlisten.push(listen(link.client, 'end', this.#onClientEnd));
      return;
    }
    this.#attach(subscriber);
    // Standalone: one channel for everything, subscribed now so the first stampede is heard.
    if (!this.#sharded) this.#subscribe(this.#standaloneChannel);
  }

  /**
   * Whether a subscriber connection is there (given, or opened by an earlier watch): the read that
   * tries locks (read-or-lock.ts) watches only then, so a process that never waits opens none.
   */
  get opened(): boolean {
    return this.#subscriber !== undefined && !this.#closed;
  }

  /** Whether the store opened (or will open) its own subscriber connection. */
  get owned(): boolean {
    return this.#owned;
  }

  #attach(subscriber: Redis | Cluster): void {
    this.#subscriber = subscriber;
    this.#listening = subscriber.status === 'ready';
    this.#unlisten.push(
      listen(subscriber, this.#sharded ? 'smessageBuffer' : 'messageBuffer', this.#onMessage),
      listen(subscriber, 'close', this.#onLost),
      listen(subscriber, 'end', this.#onLost),
      listen(subscriber, 'ready', this.#onReady),
    );
  }

  /** The connection, opened on first use when it is ours. */
  #connection(): Redis | Cluster {
    if (this.#subscriber !== undefined) return this.#subscriber;
    const client = this.#link.client;
    // Same server(s), options and keyPrefix as the user's client (shard channels carry the keyPrefix).
    const opened = this.#sharded
      ? (client as Cluster).duplicate([], { shardedSubscribers: true })
      : (client as Redis).duplicate();
    // Its failures show in its status (deaf waits poll, counted): not an unhandled 'error' event.
    opened.on('error', noop);
    this.#unlisten.push(listen(opened, 'reconnecting', this.#onReconnecting));
    this.#attach(opened);
    if (!this.#sharded) this.#subscribe(this.#standaloneChannel);
    return opened;
  }

  /**
   * The id the lock attempts register as the waiter of a key held elsewhere: '' when nothing
   * announced could reach this store (closed, no connection opened: no watch yet, or a Cluster
   * without sharded pub/sub), so that no fill sends it a message. Registered even while the subscriber connects: its confirmation
   * wakes every wait to re-check, and from then on the messages arrive.
   */
  waiterId(): string {
    return this.#closed || this.#unsupported || this.#subscriber === undefined ? '' : this.#id;
  }

  stats(): WakeStats {
    let channels = 0;
    for (const channel of this.#channels.values()) if (channel.state === 'active') channels++;
    return {
      listening: this.#listening,
      channels,
      received: this.received,
      woken: this.woken,
      polled: this.polled,
      deaf: this.deaf,
    };
  }

  /** Starts hearing the announcements of `keys` (cache keys); see LockWatch. */
  watch(keys: readonly string[]): LockWatch {
    const wait = new Wait(this);
    this.add(wait, keys);
    return wait;
  }

  /** Routes the announcements of `keys` (cache keys) to `wait` too, subscribing their channels as needed. */
  add(wait: Wait, keys: readonly string[]): void {
    if (!this.#closed) this.#connection();
    const link = this.#link;
    const full = new Array<string>(keys.length);
    const channels = new Set<string>();
    for (let i = 0; i < keys.length; i++) {
      const valueKey = link.valueKey(keys[i]!);
      full[i] = link.clientPrefix + valueKey;
      channels.add(this.#sharded ? this.#shardChannel(hashSlot(full[i]!)) : this.#standaloneChannel);
    }
    const now = Date.now();
    for (const name of channels) {
      const channel = this.#channels.get(name);
      if (channel === undefined || (channel.state === 'failed' && now - channel.since >= RETRY_AFTER_MS))
        this.#subscribe(name);
    }
    wait.track(full, channels);
    for (const key of full) {
      const set = this.#waits.get(key);
      if (set === undefined) this.#waits.set(key, new Set([wait]));
      else set.add(wait);
    }
  }

  /** Whether announcements on every one of `channels` reach this process now. */
  hears(channels: ReadonlySet<string>): boolean {
    if (!this.#listening) return false;
    for (const name of channels) if (this.#channels.get(name)?.state !== 'active') return false;
    return true;
  }

  fullKey(key: string): string {
    return this.#link.clientPrefix + this.#link.valueKey(key);
  }

  forget(wait: Wait, keys: readonly string[]): void {
    for (const key of keys) {
      const set = this.#waits.get(key);
      if (set === undefined) continue;
      set.delete(wait);
      if (set.size === 0) this.#waits.delete(key);
    }
  }

  /** Stops listening; closes the connection if it is ours, else leaves it open (it is the user's). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#listening = false;
    for (const off of this.#unlisten.splice(0)) off();
    const subscriber = this.#subscriber;
    if (subscriber === undefined) return;
    if (this.#owned) {
      // Ours: nothing to unsubscribe one by one, the connection goes (and its listeners with it).
      disconnectSettled(subscriber);
      this.#channels.clear();
      return;
    }
    const names = [...this.#channels.keys()];
    this.#channels.clear();
    if (names.length === 0 || subscriber.status !== 'ready') return;
    const connection = subscriber as Redis;
    void (this.#sharded ? connection.sunsubscribe(...names) : connection.unsubscribe(...names)).catch(() => undefined);
  }

  #shardChannel(slot: number): string {
    return shardChannel(this.#link, slot) + this.#id;
  }

  #subscribe(name: string): void {
    const connection = this.#subscriber as Redis | undefined;
    if (this.#closed || connection === undefined) return;
    const previous = this.#channels.get(name);
    const channel = { state: 'subscribing' as ChannelState, since: Date.now(), attempt: (previous?.attempt ?? 0) + 1 };
    this.#channels.set(name, channel);
    const attempt = channel.attempt;
    (this.#sharded ? connection.ssubscribe(name) : connection.subscribe(name)).then(
      () => {
        if (this.#closed || this.#channels.get(name)?.attempt !== attempt) return;
        channel.state = 'active';
        // Whatever was announced before this took effect was not heard: every wait re-checks once.
        for (const waits of this.#waits.values()) for (const wait of waits) wait.announce();
      },
      (error: unknown) => {
        warnIfDenied(this.#sharded ? 'ssubscribe' : 'subscribe', error);
        if (this.#channels.get(name)?.attempt !== attempt) return;
        const message = error instanceof Error ? error.message : String(error);
        // A server before Redis 7 (or one that renamed the command away): polling only, for good.
        channel.state = /unknown command/i.test(message) ? 'unsupported' : 'failed';
        if (channel.state === 'unsupported') this.#unsupported = true;
        channel.since = Date.now();
      },
    );
  }
}

/**
 * A subscriber connection for `client`'s store: a client of its own (a subscribed connection can
 * run nothing else), of the same kind and keyPrefix (shard channels get the keyPrefix, as keys do),
 * and for a Cluster with ioredis's `shardedSubscribers`, which sends each SSUBSCRIBE to its slot's shard.
 */
export function checkSubscriber(
  name: string,
  subscriber: unknown,
  client: Redis | Cluster,
): asserts subscriber is Redis | Cluster {
  const sub = subscriber as Partial<Redis> | null | undefined;
  if (sub === null || typeof sub !== 'object' || typeof sub.subscribe !== 'function' || typeof sub.on !== 'function') {
    throw invalidOption(name, subscriber, 'an ioredis client of its own (client.duplicate())');
  }
  if (subscriber === client) {
    throw invalidOption(
      name,
      subscriber,
      'a connection of its own, not the store client (a subscribed connection can run nothing else): pass client.duplicate()',
    );
  }
  const cluster = client.isCluster === true;
  if ((sub.isCluster === true) !== cluster) {
    throw invalidOption(
      name,
      subscriber,
      cluster
        ? 'a Cluster client like the store client: client.duplicate([], { shardedSubscribers: true })'
        : 'a Redis client like the store client: client.duplicate()',
    );
  }
  if (cluster && (subscriber as Cluster).options?.shardedSubscribers !== true) {
    throw invalidOption(
      name,
      subscriber,
      'a Cluster client with sharded pub/sub: client.duplicate([], { shardedSubscribers: true })',
    );
  }
  if ((sub.options?.keyPrefix ?? '') !== (client.options?.keyPrefix ?? '')) {
    throw invalidOption(
      name,
      subscriber,
      `a client with the store client's keyPrefix "${client.options?.keyPrefix ?? ''}": client.duplicate()`,
    );
  }
}
