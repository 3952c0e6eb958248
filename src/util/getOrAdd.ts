/** `map`'s value for `key`, made by `make` and added on the first ask. */
export function getOrAdd<K, V>(map: Map<K, V>, key: K, make: (key: K) => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = make(key);
    map.set(key, value);
  }
  return value;
}
