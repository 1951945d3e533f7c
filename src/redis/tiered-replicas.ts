/**
 * The tiered store's side of the conversation with the other replicas: it publishes the changes
 * made here (after L2 confirmed them) and applies theirs to its L1 and its registry. The messages
 * and the subscription themselves: tiered-bus.ts; the copies they drop: tiered-l1.ts.
 */
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { HerdcacheError } from '../core/errors';
import type { StoreReporter } from '../core/store';
import type { RedisStore } from './redis-store';
import { Subscription, decodeMessage, encodeMessages, type Change } from './tiered-bus';
import type { L1Copies } from './tiered-l1';

export class Replicas {
  readonly #l1: L1Copies;
  readonly #l2: RedisStore;
  readonly #subscription: Subscription;
  readonly #channel: string;
  readonly #maxMessageBytes: number;
  /** Tells this replica's messages from the others' (and lets it ignore its own). */
  readonly #id = randomBytes(8).toString('hex');
  /** The registry, told of the others' invalidations (bound by the store). */
  reporter: StoreReporter | undefined;
  published = 0;
  publishFailures = 0;
  received = 0;

  constructor(l1: L1Copies, l2: RedisStore, subscriber: Redis | Cluster, channel: string, maxMessageBytes: number) {
    this.#l1 = l1;
    this.#l2 = l2;
    this.#channel = channel;
    this.#maxMessageBytes = maxMessageBytes;
    // Copies made while this replica was deaf may have missed a drop: L1 is emptied both when the
    // subscription is lost and when it is (re)confirmed.
    this.#subscription = new Subscription(subscriber, channel, {
      message: (raw) => this.#apply(raw),
      lost: () => l1.dropAll(),
      joined: () => l1.dropAll(),
    });
  }

  /** Whether this replica currently hears the others. */
  get subscribed(): boolean {
    return this.#subscription.active;
  }

  /** Sent after L2 confirmed the change: a replica that drops its copy and re-reads L2 sees it. */
  async publish(change: Change): Promise<void> {
    try {
      const messages = encodeMessages(this.#id, change, this.#maxMessageBytes);
      if (messages.length === 1) await this.#l2.publish(this.#channel, messages[0]!);
      else await Promise.all(messages.map((message) => this.#l2.publish(this.#channel, message)));
      this.published += messages.length;
    } catch (error) {
      this.publishFailures++;
      this.#l1.dropAll();
      throw new HerdcacheError(
        'E_STORE_ERROR',
        `herdcache: tiered store could not publish the ${change.op} to other replicas (their L1 copies live at most l1Ttl): ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      );
    }
  }

  /** Stops listening (unsubscribes); the connection stays open. */
  close(): Promise<void> {
    return this.#subscription.close();
  }

  #apply(raw: string): void {
    const message = decodeMessage(raw);
    if (message !== undefined && message.from === this.#id) return;
    this.received++;
    // Unreadable (another version of herdcache, a stranger on the channel): assume the worst.
    const change: Change = message?.change ?? { op: 'clear' };
    const l1 = this.#l1;
    switch (change.op) {
      case 'set':
        l1.dropKeys(change.keys);
        return;
      case 'delete':
        l1.dropKeys(change.keys);
        this.#tellRegistry(change.keys, [], false);
        return;
      case 'tags':
        l1.dropTags(change.tags);
        this.#tellRegistry([], change.tags, false);
        return;
      case 'clear':
        l1.dropAll();
        this.#tellRegistry([], [], true);
        return;
    }
  }

  #tellRegistry(keys: readonly string[], tags: readonly string[], all: boolean): void {
    try {
      this.reporter?.remoteInvalidation?.(keys, tags, all);
    } catch {
      // The registry's hook must not stop this replica from applying the next message.
    }
  }
}
