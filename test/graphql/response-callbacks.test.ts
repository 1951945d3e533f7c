/**
 * The response layer's callbacks (responseCache.sessionId, responseCache.vary) at request time: an
 * answer that cannot be used, or a throw, makes that request bypassed (never a failed request) and
 * is warned of once (process.emitWarning), naming the option and what it returned.
 */
import { buildSchema, parse } from 'graphql';
import { createCache } from '../../src/core/cache';
import { ResponseEngine, type ResponseCacheOptions, type ResponseRequest } from '../../src/graphql/response-cache';
import { captureWarnings } from '../helpers';

const schema = buildSchema(`
  directive @cacheControl(maxAge: Int, scope: CacheControlScope) on FIELD_DEFINITION | OBJECT
  enum CacheControlScope { PUBLIC PRIVATE }
  type Query { a: Int @cacheControl(maxAge: 60), me: Int @cacheControl(maxAge: 60, scope: PRIVATE) }
`);

const request = (source: string, context: unknown = {}): ResponseRequest => ({
  schema,
  document: parse(source),
  operationName: undefined,
  variables: {},
  context,
});

const warnings = captureWarnings();

const engineWith = (options: ResponseCacheOptions) => new ResponseEngine(createCache(), options, 'test');

describe('responseCache.vary', () => {
  it.each<[string, (context: unknown) => unknown, RegExp]>([
    [
      'an object',
      () => ({ l: 'fr' }),
      /returned object \[object Object\]: it must return a string, an array of strings/,
    ],
    ['a number', () => 42, /returned 42: it must return a string/],
    ['a Promise', async () => 'fr', /returned a Promise: it must return its parts synchronously/],
    ['an array holding a number', () => ['fr', 1], /returned array\(2\) holding 1: every part must be a string/],
    [
      'a throw',
      () => {
        throw new Error('no locale header');
      },
      /threw \(no locale header\)/,
    ],
  ])('%s: that request is bypassed (vary_failed), warned of once', (_label, vary, message) => {
    const engine = engineWith({ vary: vary as ResponseCacheOptions['vary'] });
    expect(engine.plan(request('{ a }'))).toBe('vary_failed');
    expect(engine.plan(request('{ a }'))).toBe('vary_failed');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.code).toBe('HERDCACHE_VARY');
    expect(warnings[0]!.message).toContain('"responseCache.vary"');
    expect(warnings[0]!.message).toMatch(message);
  });

  it('a string, an array or another iterable of strings, null and undefined are parts: silent', () => {
    const answers: unknown[] = ['fr', ['fr', 'ch'], new Set(['fr']), ['fr'], null, undefined];
    const keys = answers.map((answer) => {
      const plan = engineWith({ vary: () => answer as string }).plan(request('{ a }'));
      if (typeof plan === 'string') throw new Error(plan);
      return plan.key;
    });
    expect(keys[0]).not.toBe(keys[1]);
    expect(keys[2]).toBe(keys[3]); // a Set is read as the array of its strings
    expect(keys[4]).toBe(keys[5]); // null and undefined: no parts
    expect(warnings).toEqual([]);
  });
});

describe('responseCache.sessionId', () => {
  it('a throw: the request is bypassed (session_failed), PUBLIC too (its key says whether it is signed in), warned of once with the error', () => {
    const engine = engineWith({
      sessionId: () => {
        throw new Error('token expired');
      },
    });
    expect(engine.plan(request('{ me }'))).toBe('session_failed');
    expect(engine.plan(request('{ me }'))).toBe('session_failed');
    expect(engine.plan(request('{ a }'))).toBe('session_failed');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ code: 'HERDCACHE_SESSION_ID' });
    expect(warnings[0]!.message).toMatch(/option "responseCache.sessionId" threw \(token expired\)/);
  });

  it('PUBLIC: keyed by whether the request has a session (Apollo’s NoSession, AuthenticatedPublic), not by which', () => {
    const engine = engineWith({ sessionId: (ctx: { user?: string }) => ctx.user });
    const keyOf = (user?: string) => {
      const plan = engine.plan(request('{ a }', user === undefined ? {} : { user }));
      if (typeof plan === 'string') throw new Error(plan);
      return plan.key;
    };
    expect(keyOf('a')).toBe(keyOf('b'));
    expect(keyOf('a')).not.toBe(keyOf());
    const anonymous = engineWith({}).plan(request('{ a }', { user: 'a' }));
    if (typeof anonymous === 'string') throw new Error(anonymous);
    expect(anonymous.key).toBe(keyOf()); // without sessionId, every request is anonymous
    expect(warnings).toEqual([]);
  });

  it("async (Apollo's response cache signature): not known to be signed in or not, so bypassed (session_failed), PUBLIC too, warned of once", () => {
    const engine = engineWith({ sessionId: (async (ctx: { user: string }) => ctx.user) as never });
    expect(engine.plan(request('{ me }', { user: 'a' }))).toBe('session_failed');
    expect(engine.plan(request('{ a }', { user: 'b' }))).toBe('session_failed'); // never the anonymous key
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.code).toBe('HERDCACHE_SESSION_ID');
    expect(warnings[0]!.message).toMatch(
      /"responseCache.sessionId" returned a Promise: it must return the session id synchronously/,
    );
    expect(warnings[0]!.message).toMatch(/executed without the response cache \(bypassReason "session_failed"\)/);
  });

  it('an object, true, NaN: bypassed (session_failed), warned of once; null, undefined, "" and false: no session, silent', () => {
    const engine = engineWith({ sessionId: (ctx: { user: unknown }) => ctx.user as string });
    for (const none of [null, undefined, '', false]) {
      expect(engine.plan(request('{ me }', { user: none }))).toBe('no_session');
      expect(typeof engine.plan(request('{ a }', { user: none }))).toBe('object'); // anonymous
    }
    expect(warnings).toEqual([]);
    for (const unusable of [{ id: 'a' }, { id: 'b' }, true, NaN]) {
      expect(engine.plan(request('{ me }', { user: unusable }))).toBe('session_failed');
      expect(engine.plan(request('{ a }', { user: unusable }))).toBe('session_failed');
    }
    expect(warnings).toHaveLength(1); // once per kind of mistake: an object's warning (true, NaN: the same key)
    expect(warnings[0]!.message).toMatch(
      /"responseCache.sessionId" returned object \[object Object\]: a session id is/,
    );
    expect(typeof engine.plan(request('{ me }', { user: 'a' }))).toBe('object');
  });
});

describe('answers that throw when read, and answers spelling a reason', () => {
  it('a session id or vary parts that throw when read (a revoked Proxy, a throwing getter) bypass the request, never throw', () => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    const session = engineWith({ sessionId: () => proxy as never });
    expect(session.plan(request('{ me }'))).toBe('session_failed');
    const thenGetter = {
      get then(): unknown {
        throw new Error('boom');
      },
    };
    const vary = engineWith({ vary: () => thenGetter as never });
    expect(vary.plan(request('{ a }'))).toBe('vary_failed');
    expect(warnings.map((w) => w.code)).toEqual(['HERDCACHE_SESSION_ID', 'HERDCACHE_VARY']);
  });

  it('a session id "session_failed" and a vary part "vary_failed" are ordinary values, keyed apart', () => {
    const session = engineWith({ sessionId: () => 'session_failed' }).plan(request('{ me }'));
    const vary = engineWith({ vary: () => 'vary_failed' }).plan(request('{ a }'));
    expect(typeof session).toBe('object');
    expect(typeof vary).toBe('object');
    expect(warnings).toEqual([]);
  });
});
