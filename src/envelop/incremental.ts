/**
 * The payloads of an incremental result (@defer/@stream) as trees the operation's selections read
 * (a mutation's entities are found in them by the same walk as a single result's). Each payload's
 * entities are invalidated as it leaves, so a read between two payloads that stored the state in
 * between is reached by the next one: each part is given as a sparse tree holding the part at its
 * path, with the scalars (ids, `__typename`) of the objects along that path, so an entity a
 * deferred part changes again is invalidated again. Copies: the payloads go to the client as they
 * are. Both payload shapes: `{ incremental: [{ data | items, path }] }` (graphql-js 17,
 * @graphql-tools/executor) and a payload of its own `{ data | items, path }` (graphql-js 16's
 * experimental one); streamed items' path is their first item's (the list's path and an index).
 */

interface Part {
  readonly data?: unknown;
  readonly items?: unknown;
  readonly path?: readonly (string | number)[];
}

type Tree = Record<string | number, unknown>;

export class MergedPayloads {
  /** Every payload so far, merged (undefined until the initial payload): where a part's path leads. */
  data: Record<string, unknown> | undefined = undefined;

  /** Merges a payload; returns the trees of what it added (none: nothing to read). */
  add(payload: unknown): Record<string, unknown>[] {
    if (payload === null || typeof payload !== 'object') return [];
    const { incremental, path } = payload as { incremental?: unknown; path?: unknown };
    if (Array.isArray(incremental)) {
      const trees: Record<string, unknown>[] = [];
      for (const part of incremental) {
        const tree = this.#merge(part as Part);
        if (tree !== undefined) trees.push(tree);
      }
      return trees;
    }
    if (path === undefined) {
      const data = (payload as { data?: unknown }).data;
      if (data === null || typeof data !== 'object') return [];
      this.data = copy(data) as Record<string, unknown>; // the initial payload
      return [copy(data) as Record<string, unknown>];
    }
    const tree = this.#merge(payload as Part);
    return tree === undefined ? [] : [tree];
  }

  /** Merges one part into `data`; returns its sparse tree (see the header), undefined when it adds nothing. */
  #merge(part: Part): Record<string, unknown> | undefined {
    const path = part.path ?? [];
    const streamed = Array.isArray(part.items);
    const depth = streamed ? path.length - 1 : path.length;
    let target: unknown = this.data;
    const sparse: Tree = scalarsOf(target);
    let into: Tree = sparse;
    for (let i = 0; i < depth; i++) {
      if (target === null || typeof target !== 'object') return undefined;
      target = (target as Tree)[path[i]!];
      if (target === null || typeof target !== 'object') return undefined;
      const next: Tree = Array.isArray(target) ? ([] as unknown as Tree) : scalarsOf(target);
      setOwn(into, path[i]!, next);
      into = next;
    }
    if (streamed) {
      const at = path[path.length - 1];
      if (!Array.isArray(target) || !Array.isArray(into) || typeof at !== 'number') return undefined;
      const items = copy(part.items) as unknown[];
      for (let i = 0; i < items.length; i++) target[at + i] = into[at + i] = items[i];
      return items.length > 0 ? (sparse as Record<string, unknown>) : undefined;
    }
    const data = copy(part.data);
    if (data === null || typeof data !== 'object' || Array.isArray(into)) return undefined;
    for (const [key, value] of Object.entries(data)) {
      setOwn(target as Tree, key, value);
      setOwn(into, key, copy(value));
    }
    return sparse as Record<string, unknown>;
  }
}

/** An object's own scalar fields (its id, its `__typename`): what says which entity it is. */
function scalarsOf(value: unknown): Tree {
  const scalars: Tree = {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return scalars;
  for (const [key, field] of Object.entries(value))
    if (field === null || typeof field !== 'object') setOwn(scalars, key, field);
  return scalars;
}

/** An own property, as JSON reads it (an alias `__proto__` assigned would set the prototype). */
function setOwn(target: Tree, key: string | number, value: unknown): void {
  Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
}

/** A JSON copy (what the client receives); a value JSON cannot hold is left out. */
function copy(value: unknown): unknown {
  try {
    return JSON.parse(JSON.stringify(value)) as unknown;
  } catch {
    return undefined;
  }
}
