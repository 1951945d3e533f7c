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
import {
  NO_HINT,
  fieldHint,
  isAbstract,
  isComposite,
  mayBePrivate,
  namedType,
  possibleTypes,
  privateByCacheControl,
  privateImplementation,
  typeHint,
} from './schema-hints';

export { namedType, tagOf } from './schema-hints';

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
  if (byName.size >= 64) return policy;
  byName.set(memoKey, policy);
  // A document's only operation runs whether or not the request names it (Yoga passes the name as
  // given): one policy object for both, so what is kept per operation (./response-admission) is one.
  const only = typeof policy === 'string' ? undefined : operationOfDocument(document, undefined);
  if (only !== undefined) {
    byName.set(`${only.name?.value ?? ''}\u0000${defaultMaxAge}`, policy);
    byName.set(`\u0000${defaultMaxAge}`, policy);
  }
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
      let fieldMaxAge = maxAgeOf(field, parentMaxAge, isRoot, defaultMaxAge);
      // The field's own scope wins over its type's (Apollo's rule); herdcache adds, where the field
      // says none: a PRIVATE type it may return, and an implementation's PRIVATE field.
      if (own.scope === 'PRIVATE') scope = 'PRIVATE';
      else if (own.scope === undefined && scope === 'PUBLIC') {
        const typeHints = isComposite(target) ? typeHint(target) : NO_HINT;
        if (
          typeHints.scope === 'PRIVATE' ||
          (isAbstract(target) && mayBePrivate(schema, target)) ||
          (isAbstract(parent) && privateImplementation(schema, parent, node.name.value)) ||
          // A @cached field whose value @cacheControl says is the viewer's (a PRIVATE field in it):
          // PRIVATE in the field layer, so a response holding it is too (Yoga has no run-time hint).
          (own.cached === true && privateByCacheControl(schema, field, node.name.value) !== undefined)
        )
          scope = 'PRIVATE';
      }
      if (own.swr !== undefined) swr = Math.min(swr, own.swr);
      // Selected through an interface, the field is resolved by the object type's own field, whose
      // hints Apollo reads at run time (its maxAge, its @cached ttl, its type's): the strictest of
      // the types the object may be, so Yoga (no run-time policy) agrees. Its selections are read
      // against each type that field returns (covariant: a narrower type, its own hints).
      let targets: GraphQLNamedType[] | undefined;
      if (isAbstract(parent)) {
        for (const possible of possibleTypes(schema, parent)) {
          const implementation = possible.getFields()[node.name.value];
          if (implementation === undefined || implementation === field) continue;
          const age = maxAgeOf(implementation, parentMaxAge, isRoot, defaultMaxAge);
          if (age !== undefined) fieldMaxAge = fieldMaxAge === undefined ? age : Math.min(fieldMaxAge, age);
          const hint = fieldHint(implementation);
          if (hint.swr !== undefined) swr = Math.min(swr, hint.swr);
          const narrower = namedType(implementation.type);
          // The implementation's field resolves it, its own hints win (Apollo reads them at run time),
          // whatever the interface's field says; left out, its type's, or what @cached reads.
          if (hint.scope === 'PRIVATE') scope = 'PRIVATE';
          else if (
            hint.scope === undefined &&
            ((isComposite(narrower) && typeHint(narrower).scope === 'PRIVATE') ||
              (hint.cached === true && privateByCacheControl(schema, implementation, node.name.value) !== undefined))
          )
            scope = 'PRIVATE';
          if (narrower !== target && node.selectionSet !== undefined && !(targets ??= []).includes(narrower))
            targets.push(narrower);
        }
      }
      if (fieldMaxAge !== undefined) maxAge = Math.min(maxAge, fieldMaxAge);
      if (node.selectionSet !== undefined) {
        walk(node.selectionSet, target, fieldMaxAge ?? parentMaxAge, false);
        for (const narrower of targets ?? []) {
          // Bounded: interfaces nested in interfaces, each implemented with narrower types, multiply.
          if (--narrowerWalks < 0) return;
          walk(node.selectionSet, narrower, fieldMaxAge ?? parentMaxAge, false);
        }
      }
    }
  };
  // Walks of a selection against an implementation's narrower type, at most (past it: not cached).
  let narrowerWalks = 256;
  walk(operation.selectionSet, root, undefined, true);
  if (incremental) return 'incremental';
  if (narrowerWalks < 0) return 'no_cache_hint'; // its hints not all read: not vouched for
  // Federation's entity fetch: its policy is per representation's type, known only while it runs
  // (docs/response-cache.md), and its stored answer would hold no entity tag (a gateway's fetch
  // selects no id): never cached whole, whatever defaultMaxAge says. @cached entities cache it.
  if (entities || maxAge === Infinity || maxAge <= 0) return 'no_cache_hint';
  const variables = (operation.variableDefinitions ?? []).map((definition) => definition.variable.name.value);
  return { maxAge, scope, swr: swr === Infinity ? 0 : swr, variables };
}

/**
 * A field's maxAge by Apollo's rules: its own hint, else (a composite type) its type's; else,
 * inheriting (its own `inheritMaxAge`, or its type's), its parent's; else `defaultMaxAge` for a root
 * field and a composite one that does not inherit. `@cached(ttl:)` caps it. Undefined: no limit
 * of its own (a leaf, or inheriting where the parent has none).
 */
function maxAgeOf(
  field: GraphQLField<unknown, unknown>,
  parentMaxAge: number | undefined,
  isRoot: boolean,
  defaultMaxAge: number,
): number | undefined {
  const own = fieldHint(field);
  const target = namedType(field.type);
  const composite = isComposite(target);
  const typeHints = composite ? typeHint(target) : NO_HINT;
  let maxAge = own.maxAge;
  if (maxAge === undefined && composite) maxAge = typeHints.maxAge;
  const inherits = own.inheritMaxAge === true || typeHints.inheritMaxAge === true;
  if (maxAge === undefined && inherits) maxAge = parentMaxAge;
  if (maxAge === undefined && (isRoot || (composite && !inherits))) maxAge = defaultMaxAge;
  if (own.ttl !== undefined) maxAge = Math.min(maxAge ?? parentMaxAge ?? Infinity, own.ttl);
  return maxAge;
}
