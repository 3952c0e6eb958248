/**
 * The fields of `fields` whose value is not undefined, the others left out (absent, not present
 * as undefined), so that spreading the result over an object of defaults keeps the defaults.
 */
export function definedFields<T extends object>(
  fields: T,
): { [K in keyof T]?: Exclude<T[K], undefined> } {
  const out: { [K in keyof T]?: Exclude<T[K], undefined> } = {};
  for (const key of Object.keys(fields) as (keyof T)[]) {
    const value = fields[key];
    if (value !== undefined) out[key] = value as Exclude<T[keyof T], undefined>;
  }
  return out;
}
