/**
 * Typed reading of a table's flags with args.ts's readers: the type and bounds come from the row,
 * so a bad value is args.ts's one line naming the flag and what it accepts (UsageError, exit 2).
 * A flag not given reads as undefined (a list given no value, a boolean not set: undefined too).
 */
import { type Flags, UsageError } from '../args.ts';
import type { OptionRow, OptionTable, RowName, ValueOf } from './table.ts';

export type OptionReader<T extends OptionTable> = <K extends RowName<T>>(
  name: K,
) => ValueOf<T[K]> | undefined;

/** A reader of `table`'s rows over the parsed `flags`. */
export function readerOf<T extends OptionTable>(table: T, flags: Flags): OptionReader<T> {
  return (name) => readRow(flags, name, table[name] as OptionRow) as never;
}

export function readRow(flags: Flags, name: string, row: OptionRow): unknown {
  switch (row.type) {
    case 'boolean':
      return flags.bool(name) ? true : undefined;
    case 'list': {
      const values = flags.strings(name);
      return values.length > 0 ? values : undefined;
    }
    case 'enum':
      return flags.oneOf(name, row.values ?? []);
    case 'int':
    case 'number':
      return flags.number(name, {
        ...(row.above !== undefined && { min: row.above, exclusiveMin: true }),
        ...(row.min !== undefined && { min: row.min }),
        ...(row.max !== undefined && { max: row.max }),
        integer: row.type === 'int',
      });
    case 'string': {
      const v = flags.string(name);
      if (row.nonEmpty && v === '') throw new UsageError(`--${name} must not be empty`);
      return v;
    }
  }
}
