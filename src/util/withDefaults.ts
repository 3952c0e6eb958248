/**
 * A table of defaults with each field that `options` gives taken from there instead (`??`:
 * an absent, undefined or null field keeps its default). Only the table's fields are read, so
 * `options` may be a larger bag. Returns a fresh object; neither argument changes.
 */
export function withDefaults<T extends object>(
  defaults: T,
  options: { readonly [K in keyof T]?: T[K] | null },
): T {
  const out = { ...defaults };
  for (const key of Object.keys(defaults) as (keyof T)[]) {
    out[key] = options[key] ?? defaults[key];
  }
  return out;
}
