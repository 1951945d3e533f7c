/**
 * What the schema says about a whole operation, read from its static hints before it runs (which
 * entities its result holds is read after: see response-result). It walks the operation's
 * selections against the schema; only types come from graphql (an optional peer): kinds are read
 * from Symbol.toStringTag.
 *
 * The policy follows Apollo's cache-control rules, so both servers agree: a field's maxAge is its
 * own `@cacheControl(maxAge:)`, else (for a field returning an object, interface or union) its
 * type's, else its parent's with `inheritMaxAge`, else `defaultMaxAge` for root fields and fields
 * of composite type; a leaf field without a hint inherits. `@cached(ttl:, swr:, scope:)` restricts
 * as it does at run time (see hints): its ttl caps the maxAge, it never makes a field cacheable. The smallest maxAge wins; any PRIVATE makes it PRIVATE.
 *
 * Where a field says no scope of its own, herdcache reads PRIVATE where Apollo's static reading
 * would not: an object type its interface or union field may return (`{ item { ... on Secret {
 * text } } }` with `type Secret @cacheControl(scope: PRIVATE)` is PUBLIC to Apollo: one viewer's
 * answer stored for all), and an implementation's field selected through its interface. Type hints
 * are read from `extend type` nodes too, as Apollo does, and from `extensions.directives` (a schema
 * built in code, where the field layer reads @cached: see directive-nodes), so the response is
 * never more public or longer-lived than a @cached field it holds, however the schema was built.
 */
import type {
  DirectiveNode,
  DocumentNode,
  FieldNode,
  FragmentDefinitionNode,
  GraphQLField,
  GraphQLNamedType,
  GraphQLObjectType,
  GraphQLSchema,
  OperationDefinitionNode,
  SelectionSetNode,
} from 'graphql';
import { type Annotated, findDirective } from './directive-nodes';

export interface StaticPolicy {
  /** Seconds; 0: not cacheable. */
  readonly maxAge: number;
  readonly scope: 'PUBLIC' | 'PRIVATE';
  /** Seconds of stale-while-revalidate from @cached(swr:) (the smallest of the fields that set one). */
  readonly swr: number;
  /** The variables the operation declares: the only ones that can change its answer (and its key). */
  readonly variables: readonly string[];
}

export function operationOfDocument(
  document: DocumentNode,
  operationName: string | null | undefined,
): OperationDefinitionNode | undefined {
  let found: OperationDefinitionNode | undefined;
  for (const definition of document.definitions) {
    if ((definition.kind as string) !== 'OperationDefinition') continue;
    const operation = definition as OperationDefinitionNode;
    if (operationName ? operation.name?.value === operationName : found === undefined) found = operation;
    else if (!operationName) return undefined; // several operations and no name: graphql-js refuses it
  }
  return found;
}

export function fragmentsOf(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if ((definition.kind as string) === 'FragmentDefinition')
      fragments.set((definition as FragmentDefinitionNode).name.value, definition as FragmentDefinitionNode);
  }
  return fragments;
}

/** The graphql-js class of a type, read from Symbol.toStringTag (graphql is an optional peer: no instanceof). */
export const tagOf = (type: unknown): string => Object.prototype.toString.call(type).slice(8, -1);

export function namedType(type: unknown): GraphQLNamedType {
  let t = type as { ofType?: unknown };
  while (t.ofType !== undefined) t = t.ofType as { ofType?: unknown };
  return t as unknown as GraphQLNamedType;
}

function isAbstract(type: GraphQLNamedType): boolean {
  const tag = tagOf(type);
  return tag === 'GraphQLInterfaceType' || tag === 'GraphQLUnionType';
}

/** Whether an interface or union may return an object type hinted PRIVATE (memoized per schema and type). */
function mayBePrivate(schema: GraphQLSchema, type: GraphQLNamedType): boolean {
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

function possibleTypes(schema: GraphQLSchema, type: GraphQLNamedType): readonly GraphQLObjectType[] {
  return schema.getPossibleTypes(type as Parameters<GraphQLSchema['getPossibleTypes']>[0]);
}

function privatePossibleType(schema: GraphQLSchema, type: GraphQLNamedType): string | undefined {
  return possibleTypes(schema, type).find((possible) => typeHint(possible).scope === 'PRIVATE')?.name;
}

/**
 * A field selected through an interface is resolved by the object type's own field: PRIVATE when
 * one of the types implementing it hints its field PRIVATE (Apollo reads that one at run time).
 */
function privateImplementation(schema: GraphQLSchema, parent: GraphQLNamedType, name: string): boolean {
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
      return `type ${object.name} (which ${type.name} may return)`;
    for (const field of Object.values(object.getFields()) as GraphQLField<unknown, unknown>[]) {
      const hint = fieldHint(field);
      if (hint.scope === 'PRIVATE') return `field ${object.name}.${field.name}`;
      if (hint.scope === 'PUBLIC' || field.resolve !== undefined) continue;
      const target = namedType(field.type);
      if (isComposite(target) && typeHint(target).scope === 'PRIVATE') return `type ${target.name}`;
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
  const own = fieldHint(field).scope;
  if (own === 'PRIVATE') return `field ${coordinate}`;
  if (own === 'PUBLIC') return undefined; // @cacheControl(scope: PUBLIC) on the field: the author's word
  const target = namedType(field.type);
  if (isComposite(target) && typeHint(target).scope === 'PRIVATE') return `type ${target.name}`;
  if (isAbstract(target)) {
    const possible = privatePossibleType(schema, target);
    if (possible !== undefined) return `type ${possible} (which ${target.name} may return)`;
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
  if (typeHint(type).scope === 'PRIVATE') return `type ${type.name}`;
  return privateInside(schema, type, new Set());
}

function isComposite(type: GraphQLNamedType): boolean {
  const tag = tagOf(type);
  return tag === 'GraphQLObjectType' || tag === 'GraphQLInterfaceType' || tag === 'GraphQLUnionType';
}

const NO_HINT: Hint = {};

interface Hint {
  maxAge?: number;
  /** @cached(ttl:): restricts the field's maxAge, never grants one (as at run time, see hints). */
  ttl?: number;
  scope?: 'PUBLIC' | 'PRIVATE';
  inheritMaxAge?: boolean;
  swr?: number;
}

/**
 * A type's hint: its definition's directives and those of its `extend type` nodes (as Apollo reads
 * them), and those only in its `extensions.directives` (see withExtensions).
 */
function typeHint(type: GraphQLNamedType): Hint {
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
function fieldHint(field: GraphQLField<unknown, unknown> | undefined): Hint {
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
    for (const arg of directive.arguments ?? []) {
      const value = arg.value as { kind: string; value?: string };
      const argName = arg.name.value;
      if (argName === 'maxAge' && value.kind === 'IntValue') hint.maxAge = Number(value.value);
      else if (argName === 'ttl' && value.kind === 'IntValue') hint.ttl = Number(value.value);
      else if (argName === 'swr' && value.kind === 'IntValue') hint.swr = Number(value.value);
      // An enum in SDL; a string in extensions.directives (its internal value: see directive-nodes).
      else if (argName === 'scope' && isName(value) && value.value === 'PRIVATE') hint.scope = 'PRIVATE';
      else if (argName === 'scope' && isName(value) && value.value === 'PUBLIC') hint.scope ??= 'PUBLIC';
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
 * Why an operation is not a cacheable query, by its static hints: no such operation in the document
 * (or several and no name), a mutation, a subscription, `@defer`/`@stream`, or a maxAge of 0 (no
 * hint, and no defaultMaxAge).
 */
export type NotCacheable = 'unknown_operation' | 'mutation' | 'subscription' | 'incremental' | 'no_cache_hint';

/** Memo per (schema, document, operation name, default): documents are reused by both servers' parse caches. */
const policies = new WeakMap<GraphQLSchema, WeakMap<DocumentNode, Map<string, StaticPolicy | NotCacheable>>>();

/** The operation's policy from static hints; undefined when it is not a cacheable query. */
export function staticPolicy(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  defaultMaxAge: number,
): StaticPolicy | undefined {
  const policy = operationPolicy(schema, document, operationName, defaultMaxAge);
  return typeof policy === 'string' ? undefined : policy;
}

/** The operation's policy from static hints, or why it is not a cacheable query. */
export function operationPolicy(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  defaultMaxAge: number,
): StaticPolicy | NotCacheable {
  let bySchema = policies.get(schema);
  if (bySchema === undefined) policies.set(schema, (bySchema = new WeakMap()));
  let byName = bySchema.get(document);
  const memoKey = `${operationName ?? ''}\u0000${defaultMaxAge}`;
  const known = byName?.get(memoKey);
  if (known !== undefined) return known;
  const policy = computePolicy(schema, document, operationName, defaultMaxAge);
  if (byName === undefined) bySchema.set(document, (byName = new Map()));
  if (byName.size < 64) byName.set(memoKey, policy);
  return policy;
}

function computePolicy(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  defaultMaxAge: number,
): StaticPolicy | NotCacheable {
  const operation = operationOfDocument(document, operationName);
  if (operation === undefined) return 'unknown_operation';
  if (operation.operation === 'mutation') return 'mutation';
  if (operation.operation !== 'query') return 'subscription';
  const root = schema.getQueryType();
  if (root === null || root === undefined) return 'unknown_operation';
  const fragments = fragmentsOf(document);
  let maxAge = Infinity;
  let swr = Infinity;
  let scope: 'PUBLIC' | 'PRIVATE' = 'PUBLIC';
  let incremental = false;
  let entities = false;
  // Fragments read, by the context they were read in: read again there, a fragment adds no hint
  // (the policy is a minimum, flags). Followed per path, a chain of fragments each spreading the
  // next twice cost 2^depth (a query under 1 KB: seconds); a cycle ends here too.
  const read = new Set<string>();
  const walk = (
    set: SelectionSetNode,
    parent: GraphQLNamedType,
    parentMaxAge: number | undefined,
    isRoot: boolean,
  ): void => {
    for (const selection of set.selections) {
      if (selection.directives?.some((d) => d.name.value === 'defer' || d.name.value === 'stream')) incremental = true;
      if ((selection.kind as string) === 'InlineFragment') {
        const condition = (selection as { typeCondition?: { name: { value: string } } }).typeCondition;
        const type = condition === undefined ? parent : (schema.getType(condition.name.value) ?? parent);
        walk((selection as { selectionSet: SelectionSetNode }).selectionSet, type, parentMaxAge, isRoot);
        continue;
      }
      if ((selection.kind as string) === 'FragmentSpread') {
        const name = (selection as { name: { value: string } }).name.value;
        const fragment = fragments.get(name);
        if (fragment === undefined) continue;
        const type = schema.getType(fragment.typeCondition.name.value) ?? parent;
        const context = `${name}\u0000${type.name}\u0000${parentMaxAge}\u0000${isRoot}`;
        if (read.has(context)) continue;
        read.add(context);
        walk(fragment.selectionSet, type, parentMaxAge, isRoot);
        continue;
      }
      const node = selection as FieldNode;
      if (node.name.value.startsWith('__')) continue; // __typename, introspection: no hint
      const fields = (parent as GraphQLObjectType).getFields?.();
      const field = fields?.[node.name.value] as GraphQLField<unknown, unknown> | undefined;
      if (field === undefined) continue;
      const target = namedType(field.type);
      if (isRoot && node.name.value === '_entities' && target.name === '_Entity') entities = true;
      const own = fieldHint(field);
      const composite = isComposite(target);
      const typeHints = composite ? typeHint(target) : NO_HINT;
      let fieldMaxAge: number | undefined = own.maxAge;
      if (fieldMaxAge === undefined && composite) fieldMaxAge = typeHints.maxAge;
      if (fieldMaxAge === undefined && own.inheritMaxAge) fieldMaxAge = parentMaxAge;
      else if (fieldMaxAge === undefined && (composite || isRoot)) fieldMaxAge = defaultMaxAge;
      if (own.ttl !== undefined) fieldMaxAge = Math.min(fieldMaxAge ?? parentMaxAge ?? Infinity, own.ttl);
      // The field's own scope wins over its type's (Apollo's rule); herdcache adds, where the field
      // says none: a PRIVATE type it may return, and an implementation's PRIVATE field.
      if (own.scope === 'PRIVATE') scope = 'PRIVATE';
      else if (own.scope === undefined && scope === 'PUBLIC') {
        if (
          typeHints.scope === 'PRIVATE' ||
          (isAbstract(target) && mayBePrivate(schema, target)) ||
          (isAbstract(parent) && privateImplementation(schema, parent, node.name.value))
        )
          scope = 'PRIVATE';
      }
      if (own.swr !== undefined) swr = Math.min(swr, own.swr);
      if (fieldMaxAge !== undefined) maxAge = Math.min(maxAge, fieldMaxAge);
      if (node.selectionSet !== undefined) walk(node.selectionSet, target, fieldMaxAge ?? parentMaxAge, false);
    }
  };
  walk(operation.selectionSet, root, undefined, true);
  if (incremental) return 'incremental';
  // Federation's entity fetch: its policy is per representation's type, known only while it runs
  // (docs/response-cache.md), and its stored answer would hold no entity tag (a gateway's fetch
  // selects no id): never cached whole, whatever defaultMaxAge says. @cached entities cache it.
  if (entities || maxAge === Infinity || maxAge <= 0) return 'no_cache_hint';
  const variables = (operation.variableDefinitions ?? []).map((definition) => definition.variable.name.value);
  return { maxAge, scope, swr: swr === Infinity ? 0 : swr, variables };
}
