/**
 * A command's options as one declarative table: each row says an option's type, bounds, accepted
 * values, default, help line, unit and config-file key, once. The flag spec, the `--help` option
 * section, the typed reading, the config file's key check and the docs table are derived from it
 * (`spec.ts`, `help.ts`, `read.ts`, `configKeys.ts`, `docs.ts`). Pure: no I/O.
 *
 * A table is a record from flag name (without `--`) to a row, in the order `--help` lists them.
 */
import type { FlagSpec } from '../args.ts';

export type OptionType = 'string' | 'int' | 'number' | 'boolean' | 'enum' | 'list';

export interface OptionRow {
  readonly type: OptionType;
  /** Its value's placeholder in `--help` (N, FILE, MS); none for a boolean. */
  readonly arg?: string;
  /**
   * The help line, unwrapped. `{default}` is replaced by the default (without it a default is
   * appended as ` (default X)`), `{values}` by an enum's values.
   */
  readonly help: string;
  /** What it is when not given, as `--help` shows it; absent: nothing (or said in `help`). */
  readonly default?: string | number | boolean;
  /** Inclusive bounds of an int or number. */
  readonly min?: number;
  readonly max?: number;
  /** A strict lower bound (`> above`), for a positive value: `above: 0`. */
  readonly above?: number;
  /** An enum's accepted values. */
  readonly values?: readonly string[];
  /** Its unit, as the docs table shows it (ms, s, tokens, bytes, GiB). */
  readonly unit?: string;
  /** A string that must not be empty. */
  readonly nonEmpty?: boolean;
  /** Its key in the command's YAML config file (`serve --config`); absent: flag only. */
  readonly config?: string;
  /** False: a config-file key with no flag. */
  readonly flag?: false;
  /** What the config keys' table says of it, where not the flag (markdown). */
  readonly configDocs?: string;
  /** A `--help` heading printed before it (a group of options). */
  readonly section?: string;
  /** Markdown appended to its docs row (a link to its guide). */
  readonly docs?: string;
}

/**
 * Flags another module still declares as a flag spec and help text (a shared group not yet
 * turned into rows): the table carries them so the spec, help and docs stay whole.
 */
export interface FlagBlock {
  readonly block: true;
  readonly spec: FlagSpec;
  readonly help: string;
  /** Markdown appended to a flag's docs row, by flag name. */
  readonly docs?: Readonly<Record<string, string>>;
}

export type OptionEntry = OptionRow | FlagBlock;
export type OptionTable = Readonly<Record<string, OptionEntry>>;

export const isBlock = (e: OptionEntry): e is FlagBlock => 'block' in e;

/** The value a row reads to. */
export type ValueOf<R> = R extends { type: 'int' | 'number' }
  ? number
  : R extends { type: 'boolean' }
    ? boolean
    : R extends { type: 'list' }
      ? string[]
      : R extends { type: 'enum'; values: readonly (infer V)[] }
        ? V
        : string;

/** The names of a table's rows (not its blocks). */
export type RowName<T extends OptionTable> = {
  [K in keyof T & string]: T[K] extends FlagBlock ? never : K;
}[keyof T & string];

type More = Omit<OptionRow, 'type' | 'arg' | 'help' | 'values'>;

/** Row builders, one call a row: `port: int('N', 'listen port', { min: 0, default: 8080 })`. */
export const str = (arg: string, help: string, more: More = {}) =>
  ({ type: 'string', arg, help, ...more }) as const;
export const int = (arg: string, help: string, more: More = {}) =>
  ({ type: 'int', arg, help, ...more }) as const;
export const num = (arg: string, help: string, more: More = {}) =>
  ({ type: 'number', arg, help, ...more }) as const;
export const bool = (help: string, more: More = {}) =>
  ({ type: 'boolean', help, ...more }) as const;
export const list = (arg: string, help: string, more: More = {}) =>
  ({ type: 'list', arg, help, ...more }) as const;
export const oneOf = <const V extends readonly string[]>(
  values: V,
  arg: string,
  help: string,
  more: More = {},
) => ({ type: 'enum', values, arg, help, ...more }) as const;
/** A config-file key with no flag (a list or mapping the command line cannot spell). */
export const configOnly = (key: string, configDocs: string) =>
  ({ type: 'string', help: '', flag: false, config: key, configDocs }) as const;
/** A group of flags still declared as a spec and help text elsewhere. */
export const block = (spec: FlagSpec, help: string, docs?: Record<string, string>): FlagBlock => ({
  block: true,
  spec,
  help,
  ...(docs && { docs }),
});

/** The table, its literal types kept (so each row reads to its own type). */
export const options = <const T extends OptionTable>(table: T): T => table;

/** A row's help line with its default: `{default}` filled, else ` (default X)` appended. */
export function helpLine(row: OptionRow): string {
  const help = row.help.replaceAll('{values}', (row.values ?? []).join(', '));
  if (row.default === undefined) return help;
  const shown = String(row.default);
  if (help.includes('{default}')) return help.replaceAll('{default}', shown);
  return `${help} (default ${shown})`;
}
