/**
 * Listeners on the user's connections, shared by every store on them. Each store used to add its
 * own (a guard's first `ready`, a default subscriber's `end` of the client, a subscriber's
 * `message`, `close`, `end` and `ready`), so the eleventh store on one ioredis client, or on one
 * subscriber connection, tripped Node's MaxListenersExceededWarning (10 per event) for no leak at
 * all. Here a connection gets one listener per event, whatever the number of stores, and a store
 * that goes away removes only its own handler (the connection's listener goes with the last one).
 */

import type { EventEmitter } from 'node:events';

/** The part of an ioredis connection (an EventEmitter) this needs. */
export type Emitter = Pick<EventEmitter, 'on' | 'off'>;

type Handler = (...args: unknown[]) => void;

interface Shared {
  readonly handlers: Set<Handler>;
  readonly dispatch: (...args: unknown[]) => void;
}

const byEmitter = new WeakMap<Emitter, Map<string, Shared>>();

/** Adds `handler` for `event` on `emitter`, through its one shared listener; returns its removal. */
export function listen<A extends unknown[]>(
  emitter: Emitter,
  event: string,
  handler: (...args: A) => void,
): () => void {
  let events = byEmitter.get(emitter);
  if (events === undefined) byEmitter.set(emitter, (events = new Map()));
  let shared = events.get(event);
  if (shared === undefined) {
    const handlers = new Set<Handler>();
    const dispatch = (...args: unknown[]): void => {
      // As an EventEmitter does: the handlers of the moment of the event, even if one removes another.
      if (handlers.size === 1) for (const one of handlers) one(...args);
      else for (const one of [...handlers]) one(...args);
    };
    shared = { handlers, dispatch };
    events.set(event, shared);
    emitter.on(event, dispatch);
  }
  const own = handler as unknown as Handler;
  const { handlers, dispatch } = shared;
  handlers.add(own);
  return () => {
    if (!handlers.delete(own) || handlers.size > 0) return;
    emitter.off(event, dispatch);
    if (events.get(event)?.handlers === handlers) events.delete(event);
  };
}

/** As `listen`, removed after its first call. */
export function listenOnce(emitter: Emitter, event: string, handler: () => void): () => void {
  const off = listen(emitter, event, () => {
    off();
    handler();
  });
  return off;
}

/** How long close() lets a connection that is mid-handshake finish it before cutting it anyway. */
const HANDSHAKE_GRACE_MS = 500;

/**
 * Disconnects a connection of the store's own. One caught in its handshake (status `connect`: the
 * socket is up, ioredis's ready check is in flight) is let finish it first: cut there, the ready
 * check fails afterwards and ioredis disconnects the closed socket again, which leaves a 2 s
 * destroy timer of its own holding the process open (a process that closes its cache right after
 * its first locked fill took 2 s to exit). Bounded: cut after HANDSHAKE_GRACE_MS whatever happens.
 */
export function disconnectSettled(connection: Emitter & { readonly status: string; disconnect(): void }): void {
  if (connection.status !== 'connect') {
    connection.disconnect();
    return;
  }
  const offs: (() => void)[] = [];
  const cut = (): void => {
    for (const off of offs.splice(0)) off();
    clearTimeout(timer);
    connection.disconnect();
  };
  const timer = setTimeout(cut, HANDSHAKE_GRACE_MS);
  timer.unref?.();
  for (const event of ['ready', 'close', 'end']) offs.push(listenOnce(connection, event, cut));
}
