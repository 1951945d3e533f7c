/**
 * Option names: the names each function accepts, and the check that refuses any other (with the
 * known name it most likely meant), for every options object herdcache takes.
 */
import { HerdcacheError, describe as describeValue, invalidArgument, invalidOption } from './errors';

/**
 * The option names a function accepts, written as an object with one `true` per name of `T`, so
 * the compiler keeps the list and the options interface in step (a name missing or extra fails).
 */
export function optionNames<T extends object>(names: { readonly [K in keyof Required<T>]: true }): ReadonlySet<string> {
  return new Set(Object.keys(names));
}

/**
 * Refuses an option name `where` (e.g. "createCache()") does not know: a misspelt `ttl` would
 * otherwise silently mean coalesce-only. Allocation-free when every name is known (a `for…in`
 * over a few keys), so it may run on a call's options; the error is built only on failure.
 *
 * Refuses too what is not an options object of its own names: an array (`[]` for options read as
 * no option at all), and a name inherited through the prototype (`Object.create({ ttl })`): the
 * options read it, but a spread or a JSON copy of the same object drops it. Refused rather than
 * ignored: ignoring needs every read of every option to be an own-property read, and a dropped
 * `ttl` is the silent coalesce-only this check exists to prevent. (`for…in` sees enumerable names
 * only: an accessor on a class's prototype is read as it always was.)
 */
export function checkKnownKeys(where: string, options: object, known: ReadonlySet<string>, path = ''): void {
  if (Array.isArray(options)) throw notAnOptionsObject(options, path);
  for (const name in options) {
    if (!known.has(name)) throw unknownOption(where, name, known, path);
    if (!hasOwn.call(options, name)) throw inheritedOption(where, name, path);
    checkGetter(where, options, name, path);
  }
}

/** Reads the option's getter, if it has one: one that throws would surface where the option is used, unnamed. */
export function checkGetter(where: string, options: object, name: string, path = ''): void {
  const descriptor = Object.getOwnPropertyDescriptor(options, name);
  if (descriptor?.get === undefined) return;
  try {
    descriptor.get.call(options);
  } catch (error) {
    throw getterThrew(where, path + name, error);
  }
}

/** The error for an option whose getter threw `error` when read. */
export function getterThrew(where: string, name: string, error: unknown): HerdcacheError {
  return new HerdcacheError(
    'E_INVALID_OPTION',
    `herdcache: ${where}: option ${JSON.stringify(name)} could not be read: its getter threw ${error instanceof Error ? error.message : describeValue(error)}`,
    { cause: error },
  );
}

const hasOwn = Object.prototype.hasOwnProperty;

/** The error for an array given as options: the call's options, or the option at `path` ("hooks."). */
export function notAnOptionsObject(value: unknown, path: string): HerdcacheError {
  return path === ''
    ? invalidArgument('options', value, 'an options object')
    : invalidOption(path.slice(0, -1), value, 'an options object');
}

export function inheritedOption(where: string, name: string, path: string): HerdcacheError {
  return new HerdcacheError(
    'E_INVALID_OPTION',
    `herdcache: ${where}: option ${JSON.stringify(path + name)} is inherited through the options object's prototype; options must be its own properties (copy them: { ...options })`,
  );
}

/**
 * checkKnownKeys for an option whose value is itself an options object (`breaker: { … }`,
 * `hooks: { … }`): the names are shown with their path ("breaker.treshold"), so a typo one level
 * down is refused as clearly as one at the top.
 */
export function checkNestedKeys(where: string, option: string, value: object, known: ReadonlySet<string>): void {
  checkKnownKeys(where, value, known, `${option}.`);
}

export function unknownOption(where: string, name: string, known: ReadonlySet<string>, path: string): HerdcacheError {
  const close = [...known].filter((candidate) => isCloseName(name, candidate));
  const hint = close.length === 1 ? `\nDid you mean "${path}${close[0]}"?` : '';
  const names = [...known].map((candidate) => path + candidate).join(', ');
  return new HerdcacheError(
    'E_INVALID_OPTION',
    `herdcache: ${where}: unknown option ${JSON.stringify(path + name)}.${hint}\nKnown options: ${names}.`,
  );
}

/** A likely typo: same name ignoring case, or at most one edit (two for longer names) away. */
function isCloseName(name: string, candidate: string): boolean {
  if (name.toLowerCase() === candidate.toLowerCase()) return true;
  const limit = candidate.length > 6 ? 2 : 1;
  if (Math.abs(name.length - candidate.length) > limit) return false;
  // Edit distance with swaps of neighbours as one edit (optimal string alignment); names are short.
  const d: number[][] = Array.from({ length: name.length + 1 }, (_, i) => [i]);
  for (let j = 1; j <= candidate.length; j++) d[0]![j] = j;
  for (let i = 1; i <= name.length; i++) {
    for (let j = 1; j <= candidate.length; j++) {
      const cost = name[i - 1] === candidate[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && name[i - 1] === candidate[j - 2] && name[i - 2] === candidate[j - 1])
        best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[name.length]![candidate.length]! <= limit;
}
