/**
 * The schema's static cache hints, as the response layer reads them (./response-policy) and the
 * field layer checks them (./directive, ./entities): `@cacheControl` and `@cached` on fields and
 * types, from SDL nodes, `extend type` nodes and `extensions.directives`; and where they make a
 * value PRIVATE. Only types come from graphql (an optional peer): kinds are read from
 * Symbol.toStringTag.
 */
import type {
  DirectiveNode,
  GraphQLField,
  GraphQLInterfaceType,
  GraphQLNamedType,
  GraphQLObjectType,
  GraphQLSchema,
  GraphQLUnionType,
} from 'graphql';
import { type Annotated, findDirective } from './directive-nodes';

/** The graphql-js class of a type, read from Symbol.toStringTag (graphql is an optional peer: no instanceof). */
export const tagOf = (type: unknown): string => Object.prototype.toString.call(type).slice(8, -1);

export function namedType(type: unknown): GraphQLNamedType {
  let t = type as { ofType?: unknown };
  while (t.ofType !== undefined) t = t.ofType as { ofType?: unknown };
  return t as unknown as GraphQLNamedType;
}

export function isAbstract(type: GraphQLNamedType): boolean {
  const tag = tagOf(type);
  return tag === 'GraphQLInterfaceType' || tag === 'GraphQLUnionType';
}

/** Whether an interface or union may return an object type hinted PRIVATE (memoized per schema and type). */
export function mayBePrivate(schema: GraphQLSchema, type: GraphQLNamedType): boolean {
  let bySchema = privateAbstracts.get(schema);
  if (bySchema === undefined) privateAbstracts.set(schema, (bySchema = new Map()));
  let known = bySchema.get(type.name);
  if (known === undefined) {
    known = privatePossibleType(schema, type) !== undefined;
    bySchema.set(type.name, known);
  }
  return known;
}
const privateAbstracts = new WeakMap<GraphQLSchema, Map<string, boolean>>();

export function possibleTypes(schema: GraphQLSchema, type: GraphQLNamedType): readonly GraphQLObjectType[] {
  return schema.getPossibleTypes(type as Parameters<GraphQLSchema['getPossibleTypes']>[0]);
}

function privatePossibleType(schema: GraphQLSchema, type: GraphQLNamedType): string | undefined {
  return possibleTypes(schema, type).find((possible) => typeHint(possible).scope === 'PRIVATE')?.name;
}

/**
 * A field selected through an interface is resolved by the object type's own field: PRIVATE when
 * one of the types implementing it hints its field PRIVATE (Apollo reads that one at run time).
 */
export function privateImplementation(schema: GraphQLSchema, parent: GraphQLNamedType, name: string): boolean {
  return possibleTypes(schema, parent).some((possible) => fieldHint(possible.getFields()[name]).scope === 'PRIVATE');
}

/**
 * Where a value returned by a field of `type` holds a PRIVATE part: a field of the type (of each
 * type it may be) hinted PRIVATE, or one inside a field read from the value itself (no resolver of
 * its own: the default resolver reads it from the cached object). `seen` guards cycles.
 */
function privateInside(schema: GraphQLSchema, type: GraphQLNamedType, seen: Set<string>): string | undefined {
  if (seen.has(type.name) || !isComposite(type)) return undefined;
  seen.add(type.name);
  const objects = isAbstract(type) ? possibleTypes(schema, type) : [type as GraphQLObjectType];
  for (const object of objects) {
    // A type an interface or union inside the value may return, PRIVATE by its own hint.
    if (object !== type && typeHint(object).scope === 'PRIVATE')
      return `${CACHE_CONTROL_PRIVATE} on type ${object.name} (which ${type.name} may return)`;
    for (const field of Object.values(object.getFields()) as GraphQLField<unknown, unknown>[]) {
      const hint = fieldHint(field);
      // PRIVATE even with a resolver of its own (or @cached): it may read the cached object (a
      // trivial `(user) => user.email`, the default resolver under @cached), so the value is the viewer's.
      if (hint.scope === 'PRIVATE') return `${said(hint)} on field ${object.name}.${field.name}`;
      if (hint.scope === 'PUBLIC' || field.resolve !== undefined) continue;
      const target = namedType(field.type);
      if (isComposite(target) && typeHint(target).scope === 'PRIVATE')
        return `${CACHE_CONTROL_PRIVATE} on type ${target.name}`;
      const inside = privateInside(schema, target, seen);
      if (inside !== undefined) return inside;
    }
  }
  return undefined;
}

/**
 * Where `@cacheControl` makes a @cached field's value PRIVATE: the field's own hint (its own
 * PUBLIC keeps it PUBLIC), its type's, an object type its interface or union may return, or a
 * field inside the value (privateInside); undefined: not PRIVATE by its hints. Named for messages
 * (`field Query.me`, `type User`).
 */
export function privateByCacheControl(
  schema: GraphQLSchema,
  field: GraphQLField<unknown, unknown>,
  coordinate: string,
): string | undefined {
  const hint = fieldHint(field);
  const own = hint.scope;
  if (own === 'PRIVATE') return `${said(hint)} on field ${coordinate}`;
  if (own === 'PUBLIC') return undefined; // @cacheControl(scope: PUBLIC) on the field: the author's word
  const target = namedType(field.type);
  if (isComposite(target) && typeHint(target).scope === 'PRIVATE')
    return `${CACHE_CONTROL_PRIVATE} on type ${target.name}`;
  if (isAbstract(target)) {
    const possible = privatePossibleType(schema, target);
    if (possible !== undefined) return `${CACHE_CONTROL_PRIVATE} on type ${possible} (which ${target.name} may return)`;
  }
  // The cached value is the object the resolver returned: the fields read from it are in it.
  return privateInside(schema, target, new Set());
}

/** Whether `@cacheControl` on an object type says PRIVATE (an entity type's own hint). */
export function privateTypeHint(type: GraphQLNamedType): boolean {
  return typeHint(type).scope === 'PRIVATE';
}

/**
 * Where `@cacheControl` makes a cached entity (a reference resolution's value) PRIVATE: the type's
 * own hint, or a field inside the value, as for a @cached field's value (privateInside); undefined:
 * not PRIVATE by its hints.
 */
export function privateEntityHint(schema: GraphQLSchema, type: GraphQLObjectType): string | undefined {
  if (typeHint(type).scope === 'PRIVATE') return `${CACHE_CONTROL_PRIVATE} on type ${type.name}`;
  return privateInside(schema, type, new Set());
}

export function isComposite(type: GraphQLNamedType): boolean {
  const tag = tagOf(type);
  return tag === 'GraphQLObjectType' || tag === 'GraphQLInterfaceType' || tag === 'GraphQLUnionType';
}

export const NO_HINT: Hint = {};

export interface Hint {
  maxAge?: number;
  /** @cached(ttl:): restricts the field's maxAge, never grants one (as at run time, see hints). */
  ttl?: number;
  scope?: 'PUBLIC' | 'PRIVATE';
  inheritMaxAge?: boolean;
  swr?: number;
  /** The field has @cached (its scope, left out, is read as the field layer reads it: privateByCacheControl). */
  cached?: boolean;
  /** Which directive said PRIVATE (for messages). */
  privateBy?: 'cacheControl' | 'cached';
}

const CACHE_CONTROL_PRIVATE = '@cacheControl(scope: PRIVATE)';

/** The directive that made `hint` PRIVATE, as a message names it. */
function said(hint: Hint): string {
  return hint.privateBy === 'cached' ? '@cached(scope: PRIVATE)' : CACHE_CONTROL_PRIVATE;
}

/**
 * A type's hint: its definition's directives and those of its `extend type` nodes (as Apollo reads
 * them), and those only in its `extensions.directives` (see withExtensions).
 */
export function typeHint(type: GraphQLNamedType): Hint {
  const extensions = (type as { extensionASTNodes?: readonly { directives?: readonly DirectiveNode[] }[] })
    .extensionASTNodes;
  const own = type.astNode?.directives;
  const nodes =
    extensions === undefined || extensions.length === 0
      ? own
      : [...(own ?? []), ...extensions.flatMap((node) => node.directives ?? [])];
  return hintOf(withExtensions(nodes, type as Annotated, type.name));
}

/** A field's hint: its definition's directives, and those only in its `extensions.directives`. */
export function fieldHint(field: GraphQLField<unknown, unknown> | undefined): Hint {
  if (field === undefined) return NO_HINT;
  return hintOf(withExtensions(field.astNode?.directives, field as Annotated, field.name));
}

const HINT_DIRECTIVES = ['cacheControl', 'cached'] as const;

/**
 * `nodes` and, for @cacheControl and @cached when no node names them, their use in the element's
 * `extensions.directives` (a schema built in code: Pothos, graphql-tools), read as the field layer
 * reads @cached. One the transform would refuse (not an object of arguments) is no hint here: the
 * transform says so when the schema is built.
 */
function withExtensions(
  nodes: readonly DirectiveNode[] | undefined,
  element: Annotated,
  coordinate: string,
): readonly DirectiveNode[] | undefined {
  const extensions = element.extensions as { directives?: unknown } | null | undefined;
  if (extensions?.directives === undefined || extensions.directives === null) return nodes;
  let all = nodes;
  for (const name of HINT_DIRECTIVES) {
    if (nodes?.some((node) => node.name.value === name) === true) continue;
    let found: DirectiveNode | undefined;
    try {
      found = findDirective({ extensions }, name, coordinate);
    } catch {
      found = undefined;
    }
    if (found !== undefined) all = [...(all ?? []), found];
  }
  return all;
}

function hintOf(directives: readonly DirectiveNode[] | undefined): Hint {
  const hint: Hint = {};
  for (const directive of directives ?? []) {
    const name = directive.name.value;
    if (name !== 'cacheControl' && name !== 'cached') continue;
    if (name === 'cached') hint.cached = true;
    for (const arg of directive.arguments ?? []) {
      const value = arg.value as { kind: string; value?: string };
      const argName = arg.name.value;
      if (argName === 'maxAge' && value.kind === 'IntValue') hint.maxAge = Number(value.value);
      else if (argName === 'ttl' && value.kind === 'IntValue') hint.ttl = Number(value.value);
      else if (argName === 'swr' && value.kind === 'IntValue') hint.swr = Number(value.value);
      // An enum in SDL; a string in extensions.directives (its internal value: see directive-nodes).
      else if (argName === 'scope' && isName(value) && value.value === 'PRIVATE') {
        hint.privateBy ??= name;
        hint.scope = 'PRIVATE';
      } else if (argName === 'scope' && isName(value) && value.value === 'PUBLIC') hint.scope ??= 'PUBLIC';
      else if (
        argName === 'inheritMaxAge' &&
        value.kind === 'BooleanValue' &&
        (value as unknown as { value: boolean }).value
      )
        hint.inheritMaxAge = true;
    }
  }
  return hint;
}

function isName(value: { kind: string }): boolean {
  return value.kind === 'EnumValue' || value.kind === 'StringValue';
}

/**
 * The one type of `targets` every other is (itself, or a type it may be: an implementation's field
 * narrowing the interface's `author: Actor` to `author: User`); undefined when there is none.
 */
export function commonTarget(
  schema: GraphQLSchema,
  targets: ReadonlySet<GraphQLNamedType>,
): GraphQLNamedType | undefined {
  if (targets.size <= 1) return targets.values().next().value;
  for (const candidate of targets) {
    if (!isAbstract(candidate)) continue;
    const abstract = candidate as GraphQLInterfaceType | GraphQLUnionType;
    const covers = (type: GraphQLNamedType): boolean =>
      type === candidate ||
      (isAbstract(type)
        ? possibleTypes(schema, type).every((object) => schema.isSubType(abstract, object))
        : schema.isSubType(abstract, type as GraphQLObjectType));
    if ([...targets].every(covers)) return candidate;
  }
  return undefined;
}
