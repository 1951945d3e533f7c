/**
 * The ONE list of the ways herdcache's scoped loader differs from DataLoader on purpose. Each
 * entry names a behaviour test of behaviours.test.ts: that test passes on DataLoader and is
 * expected to FAIL on herdcache (jest's `test.failing`), so the day herdcache starts to behave
 * like DataLoader there, the suite says so. README.md's "Migrating from DataLoader" section lists
 * exactly these (readme.test.ts checks both lists name the same behaviours).
 */
export const INTENDED_DIFFERENCES: Readonly<Record<string, string>> = {
  'concurrent requests loading the same key share one batch call':
    'cross-request single-flight: loaders of concurrent requests (each its own DataLoader before) share fills and batch calls; that is the point of herdcache',
  'load(k) after clear(k) while k is in flight joins nothing and loads again':
    'a load of a key already in flight in the process joins that fill (single-flight), also after clear(); clear() forgets the memo, cache.invalidate() abandons the fill',
  'keys 1 and "1" are different keys':
    'keys are compared by their string (the store key): the default key function maps finite numbers with String()',
  'object keys without cacheKeyFn are compared by identity':
    "keys must map to strings: an object key needs a key function (`key`, DataLoader's cacheKeyFn); load() throws a TypeError showing the fix",
  'a batch function must return a Promise':
    'a batch function may return the array itself (synchronously) as well as a promise of it',
  "a batch function that throws synchronously rejects each key with DataLoader's TypeError":
    'the error the batch function threw reaches each key as it is (a non-Error wrapped as E_FILL_NON_ERROR), as a rejected promise does',
  'an array-like batch result (not an Array) is accepted':
    'a batch result must be an Array (or a promise of one): anything else fails every key of the batch with E_BATCH_NOT_ARRAY',
  'name defaults to null': 'a loader has a name, always: it namespaces its keys in the store and labels its metrics',
  'a batch that rejects with a non-Error rejects each key with that value':
    'a thrown or rejected non-Error reaches each key wrapped in a HerdcacheError E_FILL_NON_ERROR (the value as its cause), so callers get a stack and a code',
  'a sparse batch result (its last slot empty) is refused with a TypeError':
    'an empty slot is a value like undefined: that key resolves to undefined (and is not cached), its batch is not failed',
  'NaN is a key like any other':
    'the default key function maps finite numbers only: NaN (and Infinity) throws a HerdcacheKeyError showing the `key:` to add',
};
