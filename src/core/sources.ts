/**
 * Who computes values, by name: the loaders, getOrCompute and its labels. Each is a Source with its
 * own counters; names are unique per registry, and a loader's keys (`name:key`) never meet another
 * owner's (herdcache's own entries live in namespaces no loader key can spell: see ./namespaces).
 */
import { HerdcacheError, invalidOption } from './errors';
import type { CounterSet } from './metrics';
import { runFill } from './fill-call';
import { isNamespacedKey } from './namespaces';
import type { FillSignal } from './fill-run';
import type { Item, Source } from './item';

export const GET_OR_COMPUTE = 'getOrCompute';

export class Sources {
  readonly #counters: CounterSet;
  readonly #loaders = new Map<string, Source>();
  readonly #labels = new Map<string, Source>();
  /** getOrCompute without a label: one fill call per key. */
  readonly getOrCompute: Source;

  constructor(counters: CounterSet) {
    this.#counters = counters;
    this.getOrCompute = {
      name: GET_OR_COMPUTE,
      counters: counters.of(GET_OR_COMPUTE),
      groups: (items: Item[]) => items.map((item) => [item]),
      run: (items: Item[], run: FillSignal) => runFill(items[0]!, run),
    };
  }

  /** Checks a new loader's name; `create` makes it once the name is known to be free. */
  addLoader<L extends Source>(name: unknown, create: (name: string) => L): L {
    // No ':' in a name: store keys are `name:key`, so "a" and "a:b" could otherwise share keys.
    // No leading U+0000: keys starting with it are herdcache's own (see ./namespaces).
    if (
      typeof name !== 'string' ||
      name.length === 0 ||
      name.includes(':') ||
      isNamespacedKey(name) ||
      name === GET_OR_COMPUTE
    ) {
      throw invalidOption(
        'name',
        name,
        `a non-empty string without ":", not starting with U+0000, other than "${GET_OR_COMPUTE}"`,
      );
    }
    if (this.#loaders.has(name)) {
      throw new HerdcacheError(
        'E_DUPLICATE_LOADER',
        `herdcache: a loader named ${JSON.stringify(name)} already exists in this cache`,
      );
    }
    const loader = create(name);
    this.#loaders.set(name, loader);
    return loader;
  }

  /** getOrCompute under a label: its own counters, made once per label. */
  label(label: string): Source {
    let source = this.#labels.get(label);
    if (source === undefined) {
      if (typeof label !== 'string' || label.length === 0 || this.#loaders.has(label)) {
        throw invalidOption('label', label, 'a non-empty string that is not a loader name');
      }
      source = { ...this.getOrCompute, name: label, counters: this.#counters.of(label) };
      this.#labels.set(label, source);
    }
    return source;
  }

  /** The source a store key belongs to, for counting what the store reports about it. */
  nameOfKey(key: string): string {
    const head = key.slice(0, key.indexOf(':'));
    return this.#loaders.has(head) ? head : GET_OR_COMPUTE;
  }
}
