/**
 * What an executed result holds, read in one pass when it is stored (a miss's cost, so it is kept
 * small): its entities as tags `Type:id` (every object whose type is known, from its field or its
 * `__typename`, and whose `id` is selected; a mutation's result entities are invalidated by the same
 * tags); a bound of its JSON's size in UTF-8 bytes (a result well under maxBytes is stored without
 * serializing it a second time); the memory store's estimate of its heap; and its copy in ordinary
 * objects. graphql-js builds results of dictionary-mode objects (Object.create(null)), slow to
 * enumerate: each walk of one cost about as much as JSON.stringify (a 20-item page: ~60 µs).
 *
 * The walk follows the operation's selections, compiled once per operation (not per result, not
 * per object): a `Shape` is the fields one selection collects under their response keys (type
 * conditions are not read, so it does not depend on the object's type), and, per type an object
 * turns out to have, which keys are ids and which lead to objects (with their own shape).
 */
import type {
  DocumentNode,
  FieldNode,
  FragmentDefinitionNode,
  GraphQLNamedType,
  GraphQLObjectType,
  GraphQLSchema,
  OperationDefinitionNode,
  SelectionSetNode,
} from 'graphql';
import { HEAP_HEADER, HEAP_SLOT, leaf } from './response-bounds';
import { fragmentsOf, operationOfDocument } from './response-policy';
import { commonTarget, isAbstract, namedType, possibleTypes, tagOf } from './schema-hints';
import { type Make, copyOf, maker } from './response-copy';
import { type TagReading, type TypeTag, keepTag, possibleTags, tagsOf } from './response-tag-table';

export interface ResultFacts {
  /** `Type:id` of each entity, in the order met (each once when `distinct`; else the registry dedupes them). */
  readonly tags: string[];
  /** Most bytes the result's JSON can have (UTF-8). */
  readonly maxBytes: number;
  /** The memory store's estimate of its heap (core/sizes' rules): the store does not walk it again (Entry.valueBytes). */
  readonly heapBytes: number;
  /** False when a value was met that the bound does not judge (a toJSON, a class, a deep custom scalar): serialize to know. */
  readonly bounded: boolean;
  /**
   * The result again, in ordinary (fast-property) objects, the same JSON: what is stored (graphql-js's
   * dictionary-mode objects cost ~3x the heap, serialize slower on each hit, and are its request's).
   * Undefined: not made (a key the copy cannot hold, an order it cannot vouch for, a toJSON).
   */
  readonly compact: unknown;
  /** Whether `tags` holds each tag once (see entityTag): true unless a type's table of tags is full. */
  readonly distinct: boolean;
  /**
   * An object with an `id` whose type could not be told (no `__typename`, and the types it may be
   * return different types for one of its fields, or are more than possibleTags tags): its
   * entities are not all tagged, so the result must not be stored (an invalidation would miss it).
   */
  readonly untagged: boolean;
}

/** The facts of `data`, a result of the operation (its `compact` copy made when asked); undefined for an operation it cannot walk. */
export function resultFacts(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  data: unknown,
  compact = false,
): ResultFacts | undefined {
  const operation = operationOfDocument(document, operationName);
  if (operation === undefined || data === null || typeof data !== 'object') return undefined;
  const root =
    operation.operation === 'mutation'
      ? schema.getMutationType()
      : operation.operation === 'query'
        ? schema.getQueryType()
        : undefined;
  if (root === null || root === undefined) return undefined;
  const walk = new Walk(schema);
  walk.copying = compact;
  const copy = visitObject(walk, data as Record<string, unknown>, root, true, rootShape(document, operation), 0);
  if (walk.copying) walk.compact = copy;
  return walk;
}

/** The entities a result holds, as tags `Type:id` (each once). */
export function entityTags(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  data: unknown,
): string[] {
  const facts = resultFacts(schema, document, operationName, data);
  return facts === undefined ? [] : tagsOnce(facts);
}

/** The facts' tags, each once (a mutation's result: what it invalidates). */
export function tagsOnce(facts: ResultFacts): string[] {
  return facts.distinct ? facts.tags : [...new Set(facts.tags)];
}

const NONE: readonly TagReading[] = [];

let walks = 0;

class Walk implements ResultFacts {
  readonly tags: string[] = [];
  maxBytes = 0;
  heapBytes = 0;
  bounded = true;
  compact: unknown = undefined;
  /** Whether the copy is still being made (see ResultFacts.compact). */
  copying = true;
  distinct = true;
  untagged = false;
  /** This walk's stamp on the tags it met (see entityTag). */
  readonly stamp = ++walks;
  constructor(readonly schema: GraphQLSchema) {}
}

interface Shape {
  readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;
  readonly sets: readonly SelectionSetNode[];
  readonly byType: Map<GraphQLNamedType, Typed>;
  /** The last type read (most shapes meet one type only): no map lookup per object. */
  last: Typed | undefined;
}

/** A shape read against one type: its response keys, those selecting `id`, and those leading to objects. */
interface Typed {
  readonly type: GraphQLNamedType;
  /** `Type:`, the head of its entities' tags (one concatenation per entity). */
  readonly tagHead: string;
  /** The type's tags made so far, by id (see tagsOf). */
  readonly tagsById: Map<string, TypeTag>;
  readonly keys: readonly string[];
  /** The child of `keys[i]` (undefined: a leaf), so graphql-js's objects are walked by position. */
  readonly childAt: readonly (Child | undefined)[];
  readonly idKeys: readonly string[];
  /**
   * Its objects have an `id` (the type's, or a type it may be) that is not selected: an entity an
   * invalidation of `Type:id` could not reach (a gateway's fetch selects no id): see ResultFacts.untagged.
   */
  readonly missingId: boolean;
  /** The type (or a type it may be) has an `id` field: an object without one in the result was not tagged. */
  readonly idField: boolean;
  readonly children: Readonly<Record<string, Child | undefined>>;
  /**
   * Each response key is selected once (and none is `__proto__`): graphql-js's objects then hold
   * their keys in `keys`' order (those present), so a copy made in that order has the same JSON.
   */
  readonly ordered: boolean;
  /** Makes the copy from its values, all present (see response-copy); undefined: not compiled. */
  readonly make: Make | undefined;
}

interface Child {
  readonly type: GraphQLNamedType;
  readonly isObject: boolean;
  readonly shape: Shape;
  /**
   * The parent's possible types return different types for this field (`... on A { x { id } } ...
   * on B { x { id } }`, A.x and B.x of two types): `type` is one of them, so an object without
   * `__typename` cannot be tagged (see ResultFacts.untagged).
   */
  readonly ambiguous: boolean;
}

const rootShapes = new WeakMap<OperationDefinitionNode, Shape>();

function rootShape(document: DocumentNode, operation: OperationDefinitionNode): Shape {
  let shape = rootShapes.get(operation);
  if (shape === undefined) {
    shape = { fragments: fragmentsOf(document), sets: [operation.selectionSet], byType: new Map(), last: undefined };
    rootShapes.set(operation, shape);
  }
  return shape;
}

/** The shape read against `type`, built on first use. */
function typed(schema: GraphQLSchema, shape: Shape, type: GraphQLNamedType): Typed {
  const last = shape.last;
  if (last !== undefined && last.type === type) return last;
  let found = shape.byType.get(type);
  if (found !== undefined) return (shape.last = found);
  const fields = new Map<string, FieldNode[]>();
  // Each fragment collected once, as graphql-js does: followed per path, fragments each spreading the next twice cost 2^depth.
  const visited = new Set<string>();
  let repeated = false;
  // Keys first selected where it may be skipped (a fragment, a directive): graphql-js may order them later.
  const unsure = new Set<string>();
  const collect = (set: SelectionSetNode, conditional: boolean): void => {
    for (const selection of set.selections) {
      if ((selection.kind as string) === 'Field') {
        const node = selection as FieldNode;
        const responseKey = node.alias?.value ?? node.name.value;
        const list = fields.get(responseKey);
        if (list !== undefined) list.push(node);
        else fields.set(responseKey, [node]);
        if (list === undefined && (conditional || (node.directives?.length ?? 0) > 0)) unsure.add(responseKey);
      } else if ((selection.kind as string) === 'InlineFragment') {
        collect((selection as { selectionSet: SelectionSetNode }).selectionSet, true);
      } else {
        const name = (selection as { name: { value: string } }).name.value;
        const fragment = shape.fragments.get(name);
        if (fragment === undefined) continue;
        // Spread again: its fields not collected twice, so graphql-js's key order (the first spread
        // it does not skip: a type condition, @skip/@include, which are not read here) may differ.
        if (visited.has(name)) repeated = true;
        else {
          visited.add(name);
          collect(fragment.selectionSet, true);
        }
      }
    }
  };
  for (const set of shape.sets) collect(set, shape.sets.length > 1); // several: which apply is known at run time
  const keys = [...fields.keys()];
  let ordered = !repeated;
  for (const [responseKey, nodes] of fields)
    if ((nodes.length > 1 && unsure.has(responseKey)) || responseKey === '__proto__') ordered = false;
  const idKeys: string[] = [];
  const children: Record<string, Child | undefined> = Object.create(null) as Record<string, Child | undefined>;
  const definitions = (type as GraphQLObjectType).getFields?.();
  // An interface or union: fields selected under a type condition are its possible types' own.
  const possible = isAbstract(type) ? possibleTypes(schema, type) : undefined;
  for (const [responseKey, nodes] of fields) {
    const name = nodes[0]!.name.value;
    if (name === 'id') {
      // Only a response key that is `id` under every selection (an alias `id: authorId` under
      // another type condition would tag that type's objects with another field's value).
      if (nodes.every((node) => node.name.value === 'id')) idKeys.push(responseKey);
      continue;
    }
    const sets = nodes.flatMap((node) => (node.selectionSet === undefined ? [] : [node.selectionSet]));
    if (sets.length === 0) continue;
    // The types this response key may hold: each node's own field (an alias may name another field
    // under each type condition), on the type and, for an interface or union, on each type it may be.
    const targets = new Set<GraphQLNamedType>();
    for (const fieldName of new Set(nodes.map((node) => node.name.value))) {
      const definition = definitions?.[fieldName];
      if (definition !== undefined) targets.add(namedType(definition.type));
      for (const object of possible ?? []) {
        const field = object.getFields()[fieldName];
        if (field !== undefined) targets.add(namedType(field.type));
      }
    }
    const common = commonTarget(schema, targets);
    const target = common ?? targets.values().next().value;
    if (target === undefined) continue;
    const ambiguous = common === undefined;
    children[responseKey] = {
      type: target,
      isObject: !ambiguous && tagOf(target) === 'GraphQLObjectType',
      shape: { fragments: shape.fragments, sets, byType: new Map(), last: undefined },
      ambiguous,
    };
  }
  const childAt = keys.map((key) => children[key]);
  const make = ordered ? maker(keys) : undefined;
  const idField =
    definitions?.id !== undefined || (possible?.some((object) => object.getFields().id !== undefined) ?? false);
  const missingId = idKeys.length === 0 && idField;
  found = {
    type,
    tagHead: `${type.name}:`,
    tagsById: tagsOf(type),
    keys,
    childAt,
    idKeys,
    missingId,
    idField,
    children,
    ordered,
    make,
  };
  if (shape.byType.size < 64) shape.byType.set(type, found);
  return (shape.last = found);
}

/** Lists the entity's tag, unless this walk has (only a tag kept in the type's table is known to be new). */
function entityTag(walk: Walk, reading: TagReading, id: string): void {
  const tags = reading.tagsById;
  const known = tags.get(id);
  if (known !== undefined) {
    if (known.walk === walk.stamp) return;
    known.walk = walk.stamp;
    walk.tags.push(known.tag);
    return;
  }
  const tag = reading.tagHead + id;
  if (!keepTag(tags, id, tag, walk.stamp)) walk.distinct = false;
  walk.tags.push(tag);
}

function visitObject(
  walk: Walk,
  value: Record<string, unknown>,
  declared: GraphQLNamedType,
  isObject: boolean,
  shape: Shape,
  depth: number,
  ambiguous = false,
): Record<string, unknown> | undefined {
  let concrete: GraphQLNamedType | undefined = declared;
  if (!isObject) {
    const typename = value.__typename;
    concrete = typeof typename === 'string' ? walk.schema.getType(typename) : undefined;
  }
  const reading = typed(walk.schema, shape, concrete ?? declared);
  if (reading.missingId) walk.untagged = true;
  const idKeys = reading.idKeys;
  if (idKeys.length > 0) {
    // reading.type is concrete here (its tagHead is `${concrete.name}:`); without a __typename the
    // object is tagged as each type the abstract one may return (a Relay `node(id)`), up to a few.
    const as = concrete !== undefined ? reading : ambiguous ? NONE : possibleTags(walk.schema, declared);
    if (as !== reading && (as as readonly TagReading[]).length === 0) walk.untagged = true; // an entity, of a type not told: not tagged
    let absent = 0;
    for (let i = 0; i < idKeys.length; i++) {
      const raw = value[idKeys[i]!];
      const id = typeof raw === 'string' ? raw : typeof raw === 'number' ? String(raw) : undefined;
      if (id === undefined) {
        if (raw === undefined) absent++;
        continue;
      }
      if (as === reading) entityTag(walk, reading, id);
      else for (const one of as as readonly TagReading[]) entityTag(walk, one, id);
    }
    // Selected, yet not in the result: left out at run time (`id @skip(if: true)`, a fragment
    // @include(if: false)) from an object of a type that has one: not tagged, as missingId. (An
    // object of an abstract type without __typename: its type, which may have no id, is not known.)
    if (absent === idKeys.length && concrete !== undefined && reading.idField) walk.untagged = true;
  }
  let count = 0;
  let copy: Record<string, unknown> | undefined;
  if (Object.getPrototypeOf(value) === null) {
    // graphql-js builds result objects with Object.create(null), holding the selected response keys
    // only, in dictionary mode (where for…in is slow: it sorts the keys each time): read those keys.
    const { keys, childAt } = reading;
    if (!reading.ordered) walk.copying = false;
    const values = walk.copying ? new Array<unknown>(keys.length) : undefined;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const item = value[key];
      if (item === undefined) continue; // not selected for this type (a fragment), or @skip
      count++;
      const copied = field(walk, key, item, childAt[i], depth);
      if (values !== undefined) values[i] = copied;
    }
    if (values !== undefined && walk.copying) copy = copyOf(reading.keys, reading.make, values, count);
  } else {
    // Another executor's objects: every enumerable key counted (an inherited one too: a bound),
    // copied as JSON reads them (own keys; a toJSON or a `__proto__` key: no copy, see toStored).
    if (typeof value.toJSON === 'function') walk.copying = false;
    const own: Record<string, unknown> | undefined = walk.copying ? {} : undefined;
    for (const key in value) {
      const item = value[key];
      if (item === undefined) continue; // left out of the JSON
      count++;
      const copied = field(walk, key, item, reading.children[key], depth);
      if (own === undefined || !walk.copying) continue;
      if (key === '__proto__') walk.copying = false;
      else if (Object.hasOwn(value, key)) own[key] = copied;
    }
    if (walk.copying) copy = own;
  }
  const braces = count === 0 ? 2 : count + 1; // braces and commas
  walk.maxBytes += braces;
  walk.heapBytes += HEAP_HEADER + count * (HEAP_SLOT + HEAP_HEADER);
  return copy;
}

/** One key of a result object and its value; returns the value's copy (a leaf: itself). */
function field(walk: Walk, key: string, item: unknown, child: Child | undefined, depth: number): unknown {
  walk.maxBytes += key.length * 6 + 3; // `"key":`
  walk.heapBytes += key.length;
  if (child !== undefined) return visitValue(walk, item, child, depth + 1);
  leaf(walk, item, depth + 1);
  return item; // a scalar, or a custom scalar's value: shared, as JSON reads it
}

function visitValue(walk: Walk, value: unknown, child: Child, depth: number): unknown {
  if (Array.isArray(value)) {
    const brackets = value.length === 0 ? 2 : value.length + 1;
    walk.maxBytes += brackets;
    walk.heapBytes += HEAP_HEADER + value.length * HEAP_SLOT;
    const copy: unknown[] | undefined = walk.copying ? new Array<unknown>(value.length) : undefined;
    for (let i = 0; i < value.length; i++) {
      const copied = visitValue(walk, value[i], child, depth + 1);
      if (copy !== undefined) copy[i] = copied;
    }
    return copy;
  } else if (value !== null && typeof value === 'object') {
    return visitObject(
      walk,
      value as Record<string, unknown>,
      child.type,
      child.isObject,
      child.shape,
      depth,
      child.ambiguous,
    );
  }
  leaf(walk, value, depth);
  return value;
}
