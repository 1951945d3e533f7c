/**
 * The payloads of an incremental result (@defer/@stream) merged back into one tree, as the
 * operation's selections read it: a mutation's entities are found in it by the same walk as a
 * single result's (its deferred fragments included). A copy: the payloads go to the client as
 * they are. Both payload shapes: `{ incremental: [{ data | items, path }] }` (graphql-js 17,
 * @graphql-tools/executor) and a payload of its own `{ data | items, path }` (graphql-js 16's
 * experimental one); streamed items' path is their first item's (the list's path, an index).
 */

interface Part {
  readonly data?: unknown;
  readonly items?: unknown;
  readonly path?: readonly (string | number)[];
}

export class MergedPayloads {
  /** The tree so far (undefined until the initial payload). */
  data: Record<string, unknown> | undefined = undefined;

  /** Merges a payload; true when it added data (the tree is worth reading again). */
  add(payload: unknown): boolean {
    if (payload === null || typeof payload !== 'object') return false;
    const { incremental, path } = payload as { incremental?: unknown; path?: unknown };
    if (Array.isArray(incremental)) {
      let added = false;
      for (const part of incremental) if (this.#merge(part as Part)) added = true;
      return added;
    }
    if (path === undefined) {
      const data = (payload as { data?: unknown }).data;
      if (data === null || typeof data !== 'object') return false;
      this.data = copy(data) as Record<string, unknown>; // the initial payload
      return true;
    }
    return this.#merge(payload as Part);
  }

  #merge(part: Part): boolean {
    const path = part.path ?? [];
    // Streamed items: their path is the first item's own (the list's path and an index).
    const items = Array.isArray(part.items) ? path.length : -1;
    let target: unknown = this.data;
    for (let i = 0; i < (items >= 0 ? path.length - 1 : path.length); i++) {
      if (target === null || typeof target !== 'object') return false;
      target = (target as Record<string | number, unknown>)[path[i]!];
    }
    if (target === null || typeof target !== 'object') return false;
    if (items >= 0) {
      const at = path[path.length - 1];
      if (!Array.isArray(target) || typeof at !== 'number') return false;
      const copied = copy(part.items) as unknown[];
      for (let i = 0; i < copied.length; i++) target[at + i] = copied[i];
      return copied.length > 0;
    }
    const data = copy(part.data);
    if (data === null || typeof data !== 'object') return false;
    // Own properties, as JSON reads them (an alias `__proto__` assigned would set the prototype).
    for (const [key, value] of Object.entries(data))
      Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
    return true;
  }
}

/** A JSON copy (what the client receives); a value JSON cannot hold is left out. */
function copy(value: unknown): unknown {
  try {
    return JSON.parse(JSON.stringify(value)) as unknown;
  } catch {
    return undefined;
  }
}
