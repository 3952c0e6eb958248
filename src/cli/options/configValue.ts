/**
 * Typed reading of a table's scalar keys from a parsed config document, with the gateway's
 * config readers (`config: KEY must be ...`). Bounds as the flag's: an int above A is at least
 * A + 1; a number above 0 is at least the least positive number. Lists and mappings are read
 * by their owners.
 */
import { configError, int, num, str } from '../../serving/configValues.ts';
import type { OptionRow, OptionTable, RowName, ValueOf } from './table.ts';

export type ConfigReader<T extends OptionTable> = <K extends RowName<T>>(
  name: K,
) => ValueOf<T[K]> | undefined;

/** A reader of `table`'s rows from `doc`, by each row's config key; absent keys read undefined. */
export function configReaderOf<T extends OptionTable>(
  table: T,
  doc: Record<string, unknown>,
): ConfigReader<T> {
  return (name) => {
    const row = table[name] as OptionRow;
    const key = row.config ?? name;
    return (doc[key] === undefined ? undefined : configValue(row, doc[key], key)) as never;
  };
}

export function configValue(row: OptionRow, v: unknown, key: string): unknown {
  const low = row.min ?? lowerOf(row);
  const high = row.max ?? Number.POSITIVE_INFINITY;
  switch (row.type) {
    case 'int':
      return int(v, key, low, high);
    case 'number':
      return num(v, key, low, high);
    case 'boolean':
      if (typeof v !== 'boolean') throw configError(key, 'must be true or false');
      return v;
    case 'enum': {
      const values = row.values ?? [];
      if (typeof v !== 'string' || !values.includes(v)) {
        throw configError(key, `must be one of ${values.join(', ')}`);
      }
      return v;
    }
    case 'string': {
      const s = str(v, key);
      if (row.nonEmpty && s.length === 0) throw configError(key, 'must not be empty');
      return s;
    }
    case 'list':
      throw configError(key, 'is a list its owner reads');
  }
}

function lowerOf(row: OptionRow): number {
  if (row.above === undefined) return Number.NEGATIVE_INFINITY;
  if (row.type === 'int') return Math.floor(row.above) + 1;
  return row.above === 0 ? Number.MIN_VALUE : row.above;
}
