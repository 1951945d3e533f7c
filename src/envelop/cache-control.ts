/**
 * The HTTP Cache-Control header of the response layer on GraphQL Yoga, as Apollo's cache-control
 * plugin writes it: `max-age=<seconds>, public|private` for a cacheable result (a stored one:
 * its stored policy, with `age`; an executed one: the static policy restricted by the runtime
 * hints), `no-store` for anything else (a mutation, no hint, errors, incremental delivery, a
 * response whose status is not 2xx).
 *
 * Envelop's execution hooks have no HTTP response; Yoga's `onResponse` has it. So each operation
 * notes its policy under the HTTP request its context carries (Yoga's context has `request`), and
 * onResponse writes the header. A batch of operations in one request gets the strictest of them.
 * A header already set (by the application or another plugin) is left as it is. On an Envelop
 * server that is not Yoga, nothing is written: it never calls onResponse.
 */

/** What a request's operations allow: a policy, or nothing cacheable. */
type Noted =
  { readonly maxAge: number; readonly scope: 'PUBLIC' | 'PRIVATE'; readonly age: number | undefined } | 'no-store';

/** Yoga's onResponse payload, as far as this module reads it (only types: Yoga is an optional peer). */
export interface YogaResponsePayload {
  readonly request: object;
  readonly response: {
    readonly status?: number;
    readonly headers: { has(name: string): boolean; set(name: string, value: string): void };
  };
}

export class CacheControlHeaders {
  readonly #byRequest = new WeakMap<object, Noted>();
  /** Operation contexts that noted a policy (see ended), and how many per HTTP request. */
  readonly #noted = new WeakSet<object>();
  readonly #operations = new WeakMap<object, number>();
  /** A batch's operations by request (see expect). */
  readonly #expected = new WeakMap<object, number>();

  /**
   * The request holds a batch of `n` operations (Yoga's parsed params): one Yoga turns away before
   * its handling (an entry that is no object) notes nothing, and the batch is then not cacheable.
   */
  expect(request: object, n: number): void {
    this.#expected.set(request, n);
  }

  /**
   * Notes one operation's policy (undefined: not cacheable) for the HTTP request of `context`;
   * `age` (seconds) for a stored response.
   */
  note(
    context: unknown,
    policy: { readonly maxAge: number; readonly scope: 'PUBLIC' | 'PRIVATE' } | undefined,
    age?: number,
  ): void {
    const request = requestOf(context);
    if (request === undefined) return;
    if (!this.#noted.has(context as object)) {
      this.#noted.add(context as object);
      this.#operations.set(request, (this.#operations.get(request) ?? 0) + 1);
    }
    const noted: Noted =
      policy === undefined || !(policy.maxAge > 0) ? 'no-store' : { maxAge: policy.maxAge, scope: policy.scope, age };
    const before = this.#byRequest.get(request);
    this.#byRequest.set(request, before === undefined ? noted : strictest(before, noted));
  }

  /**
   * One operation's handling ended (Yoga's params handler): one that noted nothing never reached
   * its execution (a syntax or validation error, an unknown operation name, a subscription, a
   * malformed entry of a batch), and its result is never cacheable: a batch holding it is not.
   */
  ended(context: unknown): void {
    if (context !== null && typeof context === 'object' && !this.#noted.has(context)) this.note(context, undefined);
  }

  /** Writes the header for the request's operations, unless one is set already. */
  write({ request, response }: YogaResponsePayload): void {
    const noted = this.#byRequest.get(request);
    if (noted === undefined) {
      // No operation got as far as this plugin's hooks: a plugin before it turned the request away
      // (APQ's PersistedQueryNotFound, 404). An error status is never cacheable.
      if (!isOk(response.status) && !response.headers.has('cache-control'))
        response.headers.set('cache-control', 'no-store');
      return;
    }
    this.#byRequest.delete(request);
    const short = (this.#operations.get(request) ?? 0) < (this.#expected.get(request) ?? 0);
    this.#operations.delete(request);
    this.#expected.delete(request);
    const headers = response.headers;
    if (headers.has('cache-control')) return;
    // A response that failed after its operations noted their policies (a plugin that threw
    // after the execution: Yoga answers 500) is never cacheable, whatever they allowed.
    if (noted === 'no-store' || short || !isOk(response.status)) {
      headers.set('cache-control', 'no-store');
      return;
    }
    headers.set('cache-control', `max-age=${noted.maxAge}, ${noted.scope === 'PRIVATE' ? 'private' : 'public'}`);
    if (noted.age !== undefined && !headers.has('age')) headers.set('age', String(noted.age));
  }
}

/** A 2xx status (or none said: Yoga's default, 200). */
function isOk(status: number | undefined): boolean {
  return status === undefined || (status >= 200 && status <= 299);
}

function strictest(a: Noted, b: Noted): Noted {
  if (a === 'no-store' || b === 'no-store') return 'no-store';
  return {
    maxAge: Math.min(a.maxAge, b.maxAge),
    scope: a.scope === 'PRIVATE' || b.scope === 'PRIVATE' ? 'PRIVATE' : 'PUBLIC',
    age: a.age === undefined ? b.age : b.age === undefined ? a.age : Math.max(a.age, b.age),
  };
}

/** The HTTP request a Yoga context carries. */
export function requestOf(context: unknown): object | undefined {
  if (context === null || typeof context !== 'object') return undefined;
  const request = (context as { request?: unknown }).request;
  return request !== null && typeof request === 'object' ? request : undefined;
}
