/**
 * The contexts a response's runs apart may borrow (src/graphql/response-waiting.ts): each lent
 * once, and a key whose last waiter was lent leaves nothing behind (no empty entry per response
 * key, which include variables and sessions: that would grow without bound).
 */
import { WaitingContexts } from '../../src/graphql/response-waiting';

it('a lend that takes the last waiter leaves no entry; each context is lent once', () => {
  const waiting = new WaitingContexts();
  const a = {};
  const b = {};
  waiting.wait('k', a);
  waiting.wait('k', b);
  expect(waiting.size).toBe(1);
  const first = waiting.lend('k', undefined);
  const second = waiting.lend('k', undefined);
  expect(new Set([first, second])).toEqual(new Set([a, b]));
  expect(waiting.lend('k', undefined)).toBeUndefined();
  expect(waiting.size).toBe(0);
  waiting.end('k', a);
  waiting.end('k', b);
  expect(waiting.size).toBe(0);
  expect(waiting.lent(a) && waiting.lent(b)).toBe(true);
  // A lent context is not lent again, even as a stale-served request's own.
  expect(waiting.lend('k', a)).toBeUndefined();
});

it('waiters that end without being lent leave nothing', () => {
  const waiting = new WaitingContexts();
  const contexts = Array.from({ length: 5 }, () => ({}));
  contexts.forEach((context, i) => waiting.wait(`k${i % 2}`, context));
  expect(waiting.size).toBe(2);
  contexts.forEach((context, i) => waiting.end(`k${i % 2}`, context));
  expect(waiting.size).toBe(0);
});

it('one waiter is kept as is; a second makes a set; lends and ends take either form', () => {
  const waiting = new WaitingContexts();
  const [a, b, c] = [{}, {}, {}];
  waiting.wait('k', a);
  waiting.end('k', b); // not waiting: nothing ended
  expect(waiting.has('k')).toBe(true);
  expect(waiting.lend('k', undefined)).toBe(a);
  expect(waiting.has('k')).toBe(false);
  waiting.end('k', a); // lent already: nothing left to end
  waiting.wait('k', b);
  waiting.wait('k', b); // the same request again: one waiter
  waiting.wait('k', c);
  waiting.end('k', b);
  expect(waiting.lend('k', undefined)).toBe(c);
  expect(waiting.size).toBe(0);
  // An undefined context has nothing to lend: not noted.
  waiting.wait('u', undefined);
  expect(waiting.has('u')).toBe(false);
  // A context that is itself a Set is one waiter, not a list of them.
  const set = new Set([a]);
  waiting.wait('s', set);
  expect(waiting.lend('s', undefined)).toBe(set);
});
