/**
 * @cached's arguments, read and validated once at schema build: what a field's or an entity's
 * directive says, in milliseconds. Errors name the coordinate and quote the value as written.
 */
import type { ConstArgumentNode, ConstValueNode } from 'graphql';
import { HerdcacheError } from '../core/errors';
import { MAX_DURATION } from '../core/options';
import { type Annotated, findDirective } from './directive-nodes';
import { type TagTemplate, type TemplateSite, templatesOf } from './tags';

/** Who shares a value, as `enum CacheScope` in the SDL. */
export type CacheScope = 'PUBLIC' | 'PRIVATE';

/** What one field's (or entity's) @cached says, validated, in milliseconds. */
export interface CachedPolicy {
  readonly ttlMs: number;
  readonly swrMs: number;
  readonly scope: CacheScope;
  /** Whether `scope:` was given (PUBLIC given is the schema author's word: see privateByCacheControl). */
  readonly scopeGiven: boolean;
  /** `tags:` templates; undefined when none. */
  readonly tags: readonly TagTemplate[] | undefined;
}

/**
 * Reads @cached from a field or an entity type (its AST or its extensions, see ./directive-nodes).
 * SDL validation checks argument names and required ones but
 * not their values (`ttl: 1.5` and `ttl: "60"` build fine), so every value is checked here.
 */
export function readCachedPolicy(element: Annotated, coordinate: string, site: TemplateSite): CachedPolicy | undefined {
  const node = findDirective(element, 'cached', coordinate);
  if (node === undefined) return undefined;
  let ttl: number | undefined;
  let swr = 0;
  let scope: CacheScope = 'PUBLIC';
  let scopeGiven = false;
  let tags: TagTemplate[] | undefined;
  for (const arg of node.arguments ?? []) {
    const name = arg.name.value;
    if (name === 'ttl') ttl = seconds(arg, coordinate, false);
    else if (name === 'swr') swr = (arg.value.kind as string) === 'NullValue' ? 0 : seconds(arg, coordinate, true);
    else if (name === 'scope') {
      scope = scopeValue(arg, coordinate);
      scopeGiven = (arg.value.kind as string) !== 'NullValue';
    } else if (name === 'tags') tags = templatesOf(arg.value, site, literal);
    else throw buildError(`@cached on ${coordinate} has an unknown argument "${name}" (known: ttl, swr, scope, tags)`);
  }
  if (ttl === undefined) throw buildError(`@cached on ${coordinate} needs ttl (seconds, a positive integer)`);
  return { ttlMs: ttl * 1000, swrMs: swr * 1000, scope, scopeGiven, tags: tags?.length === 0 ? undefined : tags };
}

/**
 * A policy's scope with `@cacheControl`'s: @cached without a `scope:` of its own on a value that
 * `@cacheControl(scope: PRIVATE)` says is per viewer (`privateBy`: where it says so) is PRIVATE,
 * as Apollo's and Envelop's response caches would treat it, never one viewer's value for all.
 * PRIVATE needs the sessionId option: without it, a build error naming where PRIVATE comes from.
 */
export function withHintedScope(
  policy: CachedPolicy,
  privateBy: string | undefined,
  where: string,
  hasSession: boolean,
): CachedPolicy {
  const hinted = privateBy !== undefined && policy.scope === 'PUBLIC' && !policy.scopeGiven;
  const scoped: CachedPolicy = hinted ? { ...policy, scope: 'PRIVATE' } : policy;
  if (scoped.scope === 'PRIVATE' && !hasSession) {
    throw buildError(
      hinted
        ? `@cached on ${where} is PRIVATE: ${privateBy} says its value is the viewer's. It needs the "sessionId" option (a function of the context returning the viewer's session id), or @cached(scope: PUBLIC) if the value is the same for every viewer`
        : `@cached(scope: PRIVATE) on ${where} needs the "sessionId" option (a function of the context returning the viewer's session id)`,
    );
  }
  return scoped;
}

function seconds(arg: ConstArgumentNode, coordinate: string, allowZero: boolean): number {
  const { value } = arg;
  const n = (value.kind as string) === 'IntValue' ? Number((value as { value: string }).value) : NaN;
  if (!Number.isSafeInteger(n) || n < 0 || (!allowZero && n === 0)) {
    const expected = allowZero ? 'an integer number of seconds >= 0' : 'a positive integer number of seconds';
    throw buildError(`@cached(${arg.name.value}:) on ${coordinate} must be ${expected}, got ${literal(arg)}`);
  }
  // In ms it must stay within what every store keeps (MAX_DURATION): refused at build, not per request.
  if (n * 1000 > MAX_DURATION) {
    throw buildError(
      `@cached(${arg.name.value}:) on ${coordinate} must be at most ${MAX_DURATION / 1000} seconds, got ${literal(arg)}`,
    );
  }
  return n;
}

function scopeValue(arg: ConstArgumentNode, coordinate: string): CacheScope {
  const { value } = arg;
  if ((value.kind as string) === 'NullValue') return 'PUBLIC';
  // StringValue: a code-first schema's extensions give the enum's internal value, a string.
  const kind = value.kind as string;
  const name = kind === 'EnumValue' || kind === 'StringValue' ? (value as { value: string }).value : undefined;
  if (name === 'PUBLIC' || name === 'PRIVATE') return name;
  throw buildError(`@cached(scope:) on ${coordinate} must be PUBLIC or PRIVATE, got ${literal(arg)}`);
}

/** A value as written in the SDL (`1.5`, `"60"`, `-1`). */
export function literal(node: ConstArgumentNode | ConstValueNode): string {
  const value = (node.kind as string) === 'Argument' ? (node as ConstArgumentNode).value : (node as ConstValueNode);
  const loc = value.loc;
  if (loc !== undefined) return loc.source.body.slice(loc.start, loc.end);
  return printed(value); // made in code (extensions.directives)
}

/** A value node as SDL shows it (`null`, `{a: 1}`, `[5]`, `"x"`), without loading graphql (a peer). */
function printed(node: ConstValueNode): string {
  const kind = node.kind as string;
  if (kind === 'NullValue') return 'null';
  if (kind === 'StringValue') return JSON.stringify((node as { value: string }).value);
  if (kind === 'ListValue')
    return `[${(node as { values: readonly ConstValueNode[] }).values.map(printed).join(', ')}]`;
  if (kind === 'ObjectValue') {
    const fields = (node as { fields: readonly { name: { value: string }; value: ConstValueNode }[] }).fields;
    return `{${fields.map((field) => `${field.name.value}: ${printed(field.value)}`).join(', ')}}`;
  }
  const raw = (node as { value?: unknown }).value;
  return raw === undefined ? kind : String(raw);
}

export function buildError(message: string): HerdcacheError {
  return new HerdcacheError('E_INVALID_ARGUMENT', `herdcache: ${message}`);
}
