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
  const endA = waiting.wait('k', a);
  const endB = waiting.wait('k', b);
  expect(waiting.size).toBe(1);
  const first = waiting.lend('k', undefined);
  const second = waiting.lend('k', undefined);
  expect(new Set([first, second])).toEqual(new Set([a, b]));
  expect(waiting.lend('k', undefined)).toBeUndefined();
  expect(waiting.size).toBe(0);
  endA();
  endB();
  expect(waiting.size).toBe(0);
  expect(waiting.lent(a) && waiting.lent(b)).toBe(true);
  // A lent context is not lent again, even as a stale-served request's own.
  expect(waiting.lend('k', a)).toBeUndefined();
});

it('waiters that end without being lent leave nothing', () => {
  const waiting = new WaitingContexts();
  const ends = Array.from({ length: 5 }, (_, i) => waiting.wait(`k${i % 2}`, {}));
  expect(waiting.size).toBe(2);
  for (const end of ends) end();
  expect(waiting.size).toBe(0);
});
