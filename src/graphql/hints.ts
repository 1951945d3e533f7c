/**
 * @cached in Apollo Server's cache-control: the HTTP `cache-control` header of a response must
 * never be more public or longer-lived than the values herdcache cached for it. So each call of a
 * @cached field restricts the field's cache hint: `maxAge` at most the field's ttl (seconds), and
 * PRIVATE when the field is. Restricting can only lower maxAge and make the scope private; a field
 * without a maxAge of its own still gets the server's default (restrict keeps the smaller one).
 *
 * `info.cacheControl` exists only while Apollo's cache-control plugin runs (the default in Apollo
 * Server 4 and 5); elsewhere this costs one property read.
 */
import type { GraphQLResolveInfo } from 'graphql';
import type { CacheScope } from './policy';

interface Hint {
  readonly maxAge?: number;
  readonly scope?: CacheScope;
}

/** A @cached field's hint, made once per field. */
export interface CachedFieldHint extends Hint {
  readonly maxAge: number;
  /** The scope part alone, for a field whose maxAge is decided when it ends. */
  readonly scopeOnly: Hint;
  /** Whether Apollo gives this field its defaultMaxAge: fixed per field, learnt on its first call. */
  getsDefaultMaxAge?: boolean;
}

/** Apollo's per-field CachePolicy (@apollo/server), as far as this module needs it. */
interface FieldPolicy {
  maxAge?: number;
  scope?: CacheScope;
  restrict?(hint: Hint): void;
  replace?(hint: Hint): void;
  [CAP]?: Cap;
}

/** What Apollo's `info.cacheControl` offers (@apollo/cache-control-types), as far as this module needs it. */
interface ResolveInfoCacheControl {
  readonly cacheHint?: FieldPolicy;
  setCacheHint?(hint: Hint): void;
}

/** A policy's restrict() before it was wrapped to cap the maxAge the field ends with, and that cap. */
interface Cap {
  readonly restrict: (hint: Hint) => void;
  maxAge: number;
}
/** Where a field policy keeps its Cap: a property of its own (one per field call; no WeakMap to grow). */
const CAP: unique symbol = Symbol('herdcache.cap');

export function cachedFieldHint(ttlMs: number, scope: CacheScope): CachedFieldHint {
  // One hint per field definition: its parent type (so whether it is a root field) and its return
  // type never change, which is what getsDefaultMaxAge reads.
  // PUBLIC says nothing: restrict() would only replace an unset scope by PUBLIC, which is the same.
  const scopeOnly: Hint = scope === 'PRIVATE' ? { scope: 'PRIVATE' } : {};
  return { maxAge: Math.floor(ttlMs / 1000), ...scopeOnly, scopeOnly };
}

/** Restricts the field's cache-control hint to what the cache allows (see the module comment). */
export function restrictCacheHint(info: GraphQLResolveInfo, hint: CachedFieldHint): void {
  const control = (info as { cacheControl?: ResolveInfoCacheControl }).cacheControl;
  if (control === undefined) return;
  const current = control.cacheHint;
  if (typeof current?.restrict === 'function') {
    if (current.maxAge !== undefined || !(hint.getsDefaultMaxAge ??= getsDefaultMaxAge(info))) {
      current.restrict(hint); // a maxAge of its own, or an inheriting field: its ttl counts now
      return;
    }
    // No maxAge yet, and Apollo gives this field the server's defaultMaxAge when it ends, through
    // restrict(): setting the ttl now would replace that default (0 unless configured) and make
    // the response cacheable. So the scope is set now and the ttl caps whatever the field ends with.
    // The cap applies only once a maxAge is set: restrict() is also called with hints that set
    // none (Federation's `_entities` restricts by each representation's type hint, maybe {}), and
    // the field may be called many times under one policy (`_entities`, once per representation):
    // wrapped once, capped at the smallest ttl of its calls.
    let cap = current[CAP];
    if (cap === undefined) {
      const { restrict, replace } = current;
      const made: Cap = { restrict, maxAge: hint.maxAge };
      cap = made;
      current[CAP] = made;
      current.restrict = function restrictThenCap(this: FieldPolicy, given: Hint) {
        restrict.call(this, given);
        if (this.maxAge !== undefined) restrict.call(this, { maxAge: made.maxAge });
      };
      // setCacheHint() replaces the policy: a maxAge it sets is capped the same way.
      if (typeof replace === 'function')
        current.replace = function replaceThenCap(this: FieldPolicy, given: Hint) {
          replace.call(this, given);
          if (this.maxAge !== undefined) restrict.call(this, { maxAge: made.maxAge });
        };
    } else if (hint.maxAge < cap.maxAge) cap.maxAge = hint.maxAge;
    cap.restrict.call(current, hint.scopeOnly);
    return;
  }
  // Without restrict(): set the smaller maxAge and the stricter scope ourselves (setCacheHint replaces).
  if (typeof control.setCacheHint === 'function') {
    const maxAge = current?.maxAge === undefined ? hint.maxAge : Math.min(current.maxAge, hint.maxAge);
    control.setCacheHint({ maxAge, scope: current?.scope === 'PRIVATE' ? 'PRIVATE' : (hint.scope ?? current?.scope) });
  }
}

/** Whether Apollo applies its defaultMaxAge to this field: root fields and fields of object, interface or union type. */
function getsDefaultMaxAge(info: GraphQLResolveInfo): boolean {
  if (info.path.prev === undefined) return true;
  let type: unknown = info.returnType;
  while (type !== null && typeof type === 'object' && 'ofType' in type) type = (type as { ofType: unknown }).ofType;
  const tag = Object.prototype.toString.call(type);
  return (
    tag === '[object GraphQLObjectType]' ||
    tag === '[object GraphQLInterfaceType]' ||
    tag === '[object GraphQLUnionType]'
  );
}
