/**
 * What the schema says about a whole operation, read from its static hints before it runs, and
 * which entities its result holds, read after. Both walk the operation's selections against the
 * schema; only types come from graphql (an optional peer): kinds are read from Symbol.toStringTag.
 *
 * The policy follows Apollo's cache-control rules, so both servers agree: a field's maxAge is its
 * own `@cacheControl(maxAge:)`, else (for a field returning an object, interface or union) its
 * type's, else its parent's with `inheritMaxAge`, else `defaultMaxAge` for root fields and fields
 * of composite type; a leaf field without a hint inherits. `@cached(ttl:, swr:, scope:)` restricts
 * as it does at run time (see hints): its ttl caps the maxAge, it never makes a field cacheable. The smallest maxAge wins; any PRIVATE makes it PRIVATE.
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

function fragmentsOf(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if ((definition.kind as string) === 'FragmentDefinition')
      fragments.set((definition as FragmentDefinitionNode).name.value, definition as FragmentDefinitionNode);
  }
  return fragments;
}

const tagOf = (type: unknown): string => Object.prototype.toString.call(type).slice(8, -1);

function namedType(type: unknown): GraphQLNamedType {
  let t = type as { ofType?: unknown };
  while (t.ofType !== undefined) t = t.ofType as { ofType?: unknown };
  return t as unknown as GraphQLNamedType;
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

/** Memo per (schema, document, operation name, default): documents are reused by both servers' parse caches. */
const policies = new WeakMap<DocumentNode, Map<string, StaticPolicy | undefined>>();

/**
 * The operation's policy from static hints; undefined when it is not a cacheable query (a
 * mutation, a subscription, @defer/@stream, an unknown operation).
 */
export function staticPolicy(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  defaultMaxAge: number,
): StaticPolicy | undefined {
  let byName = policies.get(document);
  const memoKey = `${operationName ?? ''}\u0000${defaultMaxAge}`;
  if (byName?.has(memoKey)) return byName.get(memoKey);
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
): StaticPolicy | undefined {
  const operation = operationOfDocument(document, operationName);
  if (operation === undefined || operation.operation !== 'query') return undefined;
  const root = schema.getQueryType();
  if (root === null || root === undefined) return undefined;
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
      if (own.swr !== undefined) swr = Math.min(swr, own.swr);
      if (fieldMaxAge !== undefined) maxAge = Math.min(maxAge, fieldMaxAge);
      if (node.selectionSet !== undefined) walk(node.selectionSet, target, fieldMaxAge ?? parentMaxAge, false, seen);
    }
  };
  walk(operation.selectionSet, root, undefined, true, new Set());
  if (incremental || maxAge === Infinity || maxAge <= 0) return undefined;
  return { maxAge, scope, swr: swr === Infinity ? 0 : swr };
}

/**
 * The entities a result holds, as tags `Type:id`: every object whose type is known (its field's
 * object type, or its `__typename` when selected) and whose `id` is selected. A mutation's result
 * entities are invalidated by the same tags.
 */
export function entityTags(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  data: unknown,
): string[] {
  const operation = operationOfDocument(document, operationName);
  if (operation === undefined || data === null || typeof data !== 'object') return [];
  const root =
    operation.operation === 'mutation'
      ? schema.getMutationType()
      : operation.operation === 'query'
        ? schema.getQueryType()
        : undefined;
  if (root === null || root === undefined) return [];
  const walk: EntityWalk = { schema, fragments: documentFragments(document), tags: new Set<string>() };
  visitObject(walk, data as Record<string, unknown>, root, [operation.selectionSet], operation);
  return [...walk.tags];
}

interface EntityWalk {
  readonly schema: GraphQLSchema;
  readonly fragments: Map<string, FragmentDefinitionNode>;
  readonly tags: Set<string>;
}

/** One response key of a selection: the field's name, its sub-selections, and what owns them (for the memo). */
interface Collected {
  readonly responseKey: string;
  readonly name: string;
  readonly childSets: readonly SelectionSetNode[];
  readonly childOwner: FieldNode | undefined;
}

/**
 * The fields a selection collects, per node that owns it (the operation, or a field selected once
 * under its response key): every response of one document walks the same selections, so they
 * are collected once, not per object. Type conditions are not read here, so the list does not
 * depend on the object's type.
 */
const collectedBySelection = new WeakMap<object, readonly Collected[]>();
const fragmentsByDocument = new WeakMap<DocumentNode, Map<string, FragmentDefinitionNode>>();

function documentFragments(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  let fragments = fragmentsByDocument.get(document);
  if (fragments === undefined) fragmentsByDocument.set(document, (fragments = fragmentsOf(document)));
  return fragments;
}

function collected(
  walk: EntityWalk,
  sets: readonly SelectionSetNode[],
  owner: object | undefined,
): readonly Collected[] {
  const memo = owner === undefined ? undefined : collectedBySelection.get(owner);
  if (memo !== undefined) return memo;
  const fields = new Map<string, FieldNode[]>();
  const collect = (set: SelectionSetNode, seen: Set<string>): void => {
    for (const selection of set.selections) {
      if ((selection.kind as string) === 'Field') {
        const node = selection as FieldNode;
        const responseKey = node.alias?.value ?? node.name.value;
        const list = fields.get(responseKey);
        if (list === undefined) fields.set(responseKey, [node]);
        else list.push(node);
      } else if ((selection.kind as string) === 'InlineFragment') {
        collect((selection as { selectionSet: SelectionSetNode }).selectionSet, seen);
      } else {
        const name = (selection as { name: { value: string } }).name.value;
        const fragment = walk.fragments.get(name);
        if (fragment !== undefined && !seen.has(name)) collect(fragment.selectionSet, new Set([...seen, name]));
      }
    }
  };
  for (const set of sets) collect(set, new Set());
  const list: Collected[] = [];
  for (const [responseKey, nodes] of fields) {
    const childSets = nodes.flatMap((node) => (node.selectionSet === undefined ? [] : [node.selectionSet]));
    list.push({
      responseKey,
      name: nodes[0]!.name.value,
      childSets,
      childOwner: nodes.length === 1 ? nodes[0] : undefined,
    });
  }
  if (owner !== undefined) collectedBySelection.set(owner, list);
  return list;
}

function visitObject(
  walk: EntityWalk,
  value: Record<string, unknown>,
  declared: GraphQLNamedType,
  sets: readonly SelectionSetNode[],
  owner: object | undefined,
): void {
  const typename = value.__typename;
  const concrete =
    tagOf(declared) === 'GraphQLObjectType'
      ? declared
      : typeof typename === 'string'
        ? walk.schema.getType(typename)
        : undefined;
  for (const { responseKey, name, childSets, childOwner } of collected(walk, sets, owner)) {
    if (name === 'id' && concrete !== undefined) {
      const id = value[responseKey];
      if (typeof id === 'string' || typeof id === 'number') walk.tags.add(`${concrete.name}:${id}`);
      continue;
    }
    if (childSets.length === 0) continue;
    const field = ((concrete ?? declared) as GraphQLObjectType).getFields?.()[name];
    if (field === undefined) continue;
    visitValue(walk, value[responseKey], namedType(field.type), childSets, childOwner);
  }
}

function visitValue(
  walk: EntityWalk,
  value: unknown,
  declared: GraphQLNamedType,
  sets: readonly SelectionSetNode[],
  owner: object | undefined,
): void {
  if (Array.isArray(value)) for (const item of value) visitValue(walk, item, declared, sets, owner);
  else if (value !== null && typeof value === 'object')
    visitObject(walk, value as Record<string, unknown>, declared, sets, owner);
}
