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
 * One rule is stricter than Apollo's: a field of interface or union type that may return an object
 * type hinted PRIVATE makes the operation PRIVATE. Apollo reads only the abstract type's own hint,
 * so `{ item { ... on Secret { text } } }` with `type Secret @cacheControl(scope: PRIVATE)` would be
 * PUBLIC there: one viewer's answer stored for all.
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

export interface StaticPolicy {
  /** Seconds; 0: not cacheable. */
  readonly maxAge: number;
  readonly scope: 'PUBLIC' | 'PRIVATE';
  /** Seconds of stale-while-revalidate from @cached(swr:) (the smallest of the fields that set one). */
  readonly swr: number;
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

function privatePossibleType(schema: GraphQLSchema, type: GraphQLNamedType): string | undefined {
  return schema
    .getPossibleTypes(type as Parameters<GraphQLSchema['getPossibleTypes']>[0])
    .find((possible) => hintOf(possible.astNode?.directives).scope === 'PRIVATE')?.name;
}

/**
 * Where `@cacheControl` makes a field's value PRIVATE, as the response layer reads it: the field's
 * own hint, its type's, or (an interface or union) an object type it may return; undefined: not
 * PRIVATE by its hints. Named for messages (`field Query.me`, `type User`).
 */
export function privateByCacheControl(
  schema: GraphQLSchema,
  field: GraphQLField<unknown, unknown>,
  coordinate: string,
): string | undefined {
  if (hintOf(field.astNode?.directives).scope === 'PRIVATE') return `field ${coordinate}`;
  const target = namedType(field.type);
  if (isComposite(target) && hintOf(target.astNode?.directives).scope === 'PRIVATE') return `type ${target.name}`;
  if (isAbstract(target)) {
    const possible = privatePossibleType(schema, target);
    if (possible !== undefined) return `type ${possible}, which ${target.name} may return`;
  }
  return undefined;
}

/** Whether `@cacheControl` on an object type says PRIVATE (an entity type's own hint). */
export function privateTypeHint(type: GraphQLNamedType): boolean {
  return hintOf(type.astNode?.directives).scope === 'PRIVATE';
}

function isComposite(type: GraphQLNamedType): boolean {
  const tag = tagOf(type);
  return tag === 'GraphQLObjectType' || tag === 'GraphQLInterfaceType' || tag === 'GraphQLUnionType';
}

interface Hint {
  maxAge?: number;
  /** @cached(ttl:): restricts the field's maxAge, never grants one (as at run time, see hints). */
  ttl?: number;
  scope?: 'PUBLIC' | 'PRIVATE';
  inheritMaxAge?: boolean;
  swr?: number;
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
      else if (argName === 'scope' && value.kind === 'EnumValue' && value.value === 'PRIVATE') hint.scope = 'PRIVATE';
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

/**
 * Why an operation is not a cacheable query, by its static hints: no such operation in the document
 * (or several and no name), a mutation, a subscription, `@defer`/`@stream`, or a maxAge of 0 (no
 * hint, and no defaultMaxAge).
 */
export type NotCacheable = 'unknown_operation' | 'mutation' | 'subscription' | 'incremental' | 'no_cache_hint';

/** Memo per (schema, document, operation name, default): documents are reused by both servers' parse caches. */
const policies = new WeakMap<DocumentNode, Map<string, StaticPolicy | NotCacheable>>();

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
  let byName = policies.get(document);
  const memoKey = `${operationName ?? ''}\u0000${defaultMaxAge}`;
  const known = byName?.get(memoKey);
  if (known !== undefined) return known;
  const policy = computePolicy(schema, document, operationName, defaultMaxAge);
  if (byName === undefined) policies.set(document, (byName = new Map()));
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
  const walk = (
    set: SelectionSetNode,
    parent: GraphQLNamedType,
    parentMaxAge: number | undefined,
    isRoot: boolean,
    seen: Set<string>,
  ): void => {
    for (const selection of set.selections) {
      if (selection.directives?.some((d) => d.name.value === 'defer' || d.name.value === 'stream')) incremental = true;
      if ((selection.kind as string) === 'InlineFragment') {
        const condition = (selection as { typeCondition?: { name: { value: string } } }).typeCondition;
        const type = condition === undefined ? parent : (schema.getType(condition.name.value) ?? parent);
        walk((selection as { selectionSet: SelectionSetNode }).selectionSet, type, parentMaxAge, isRoot, seen);
        continue;
      }
      if ((selection.kind as string) === 'FragmentSpread') {
        const name = (selection as { name: { value: string } }).name.value;
        const fragment = fragments.get(name);
        if (fragment === undefined || seen.has(name)) continue;
        const type = schema.getType(fragment.typeCondition.name.value) ?? parent;
        walk(fragment.selectionSet, type, parentMaxAge, isRoot, new Set([...seen, name]));
        continue;
      }
      const node = selection as FieldNode;
      if (node.name.value.startsWith('__')) continue; // __typename, introspection: no hint
      const fields = (parent as GraphQLObjectType).getFields?.();
      const field = fields?.[node.name.value] as GraphQLField<unknown, unknown> | undefined;
      if (field === undefined) continue;
      const target = namedType(field.type);
      const own = hintOf(field.astNode?.directives);
      const composite = isComposite(target);
      let fieldMaxAge: number | undefined = own.maxAge;
      if (fieldMaxAge === undefined && composite) fieldMaxAge = hintOf(target.astNode?.directives).maxAge;
      if (fieldMaxAge === undefined && own.inheritMaxAge) fieldMaxAge = parentMaxAge;
      else if (fieldMaxAge === undefined && (composite || isRoot)) fieldMaxAge = defaultMaxAge;
      if (own.ttl !== undefined) fieldMaxAge = Math.min(fieldMaxAge ?? parentMaxAge ?? Infinity, own.ttl);
      if (own.scope === 'PRIVATE' || (composite && hintOf(target.astNode?.directives).scope === 'PRIVATE'))
        scope = 'PRIVATE';
      else if (scope === 'PUBLIC' && isAbstract(target) && mayBePrivate(schema, target)) scope = 'PRIVATE';
      if (own.swr !== undefined) swr = Math.min(swr, own.swr);
      if (fieldMaxAge !== undefined) maxAge = Math.min(maxAge, fieldMaxAge);
      if (node.selectionSet !== undefined) walk(node.selectionSet, target, fieldMaxAge ?? parentMaxAge, false, seen);
    }
  };
  walk(operation.selectionSet, root, undefined, true, new Set());
  if (incremental) return 'incremental';
  if (maxAge === Infinity || maxAge <= 0) return 'no_cache_hint';
  return { maxAge, scope, swr: swr === Infinity ? 0 : swr };
}
