/**
 * A table's rows read into a config object's fields: `{ staleMs: 'stale-ms' }` names the row each
 * field takes its value from. The same field list serves the flags (`read.ts`'s reader) and the
 * config file (`configValue.ts`'s), both being `(row name) => value | undefined`.
 */
import type { OptionTable, RowName, ValueOf } from './table.ts';

/** A field -> row name list of `T`'s rows. */
export type FieldRows<T extends OptionTable> = Readonly<Record<string, RowName<T>>>;

/** The fields whose row was given, each with its row's value. */
export type FieldValues<T extends OptionTable, F extends FieldRows<T>> = {
  -readonly [K in keyof F]?: ValueOf<T[F[K]]>;
};

/**
 * The rows of `T` whose value fits a field of type `V`: the type of a field list checked against
 * the object it fills (`satisfies { [K in keyof C]?: RowsFor<T, C[K]> }`).
 */
export type RowsFor<T extends OptionTable, V> = {
  [N in RowName<T>]: ValueOf<T[N]> extends V ? N : never;
}[RowName<T>];

/** Each field whose row `read` finds given, with its value; the others are absent. */
export function readFields<T extends OptionTable, F extends FieldRows<T>>(
  read: <K extends RowName<T>>(name: K) => ValueOf<T[K]> | undefined,
  fields: F,
): FieldValues<T, F> {
  const out: Record<string, unknown> = {};
  for (const [field, row] of Object.entries(fields)) {
    const value = read(row as RowName<T>);
    if (value !== undefined) out[field] = value;
  }
  return out as FieldValues<T, F>;
}
