/**
 * Flag parsing shared by every command: node's parseArgs for the syntax, then typed readers
 * that reject bad values with a one-line error naming the flag (the CLI exits 2 on UsageError).
 */
import { parseArgs } from 'node:util';

export class UsageError extends Error {
  readonly code = 'ERR_USAGE';
}

export type FlagSpec = Record<
  string,
  { type: 'string' | 'boolean'; multiple?: boolean; short?: string }
>;

/**
 * A FlagSpec from space-separated flag names by kind: `string` flags take a value, `multiple`
 * ones take a value and may repeat, `boolean` ones take none.
 */
export function flagSpec(names: {
  string?: string;
  multiple?: string;
  boolean?: string;
}): FlagSpec {
  const spec: FlagSpec = {};
  const add = (list: string | undefined, flag: FlagSpec[string]) => {
    for (const name of (list ?? '').split(/\s+/).filter(Boolean)) spec[name] = flag;
  };
  add(names.string, { type: 'string' });
  add(names.multiple, { type: 'string', multiple: true });
  add(names.boolean, { type: 'boolean' });
  return spec;
}

/**
 * Parses a command's flags: its own spec and any shared groups (engine, workload), plus --help
 * (-h), which every command takes. 'help' when it was given.
 */
export function readFlags(argv: string[], ...specs: FlagSpec[]): Flags | 'help' {
  const spec: FlagSpec = Object.assign({ help: { type: 'boolean', short: 'h' } }, ...specs);
  const flags = new Flags(parseFlags(argv, spec));
  return flags.bool('help') ? 'help' : flags;
}

/** Prints a command's help; its exit status is 0. */
export function printHelp(text: string): number {
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  return 0;
}

export interface ParsedFlags {
  values: Record<string, string | boolean | string[] | boolean[] | undefined>;
  positionals: string[];
}

export function parseFlags(argv: string[], spec: FlagSpec, allowPositionals = false): ParsedFlags {
  try {
    const { values, positionals } = parseArgs({
      args: joinNegativeValues(argv, spec),
      options: spec,
      strict: true,
      allowPositionals,
    });
    return { values: values as ParsedFlags['values'], positionals };
  } catch (err) {
    const message = (err as Error).message.split('\n')[0] ?? 'bad arguments';
    throw new UsageError(message.replace(/\. To specify a positional argument.*$/, ''));
  }
}

/**
 * `--rate -1` would read as two flags to parseArgs; join a numeric-looking value to its flag so
 * the value check can name the flag and the bad value.
 */
function joinNegativeValues(argv: string[], spec: FlagSpec): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const next = argv[i + 1];
    const name = arg.startsWith('--') ? arg.slice(2) : undefined;
    if (name && spec[name]?.type === 'string' && next !== undefined && /^-[\d.]/.test(next)) {
      out.push(`${arg}=${next}`);
      i++;
    } else out.push(arg);
  }
  return out;
}

/** Typed accessors over parsed flags; each throws UsageError naming the flag. */
export class Flags {
  readonly #values: ParsedFlags['values'];
  constructor(parsed: ParsedFlags) {
    this.#values = parsed.values;
  }

  has(name: string): boolean {
    return this.#values[name] !== undefined;
  }

  bool(name: string): boolean {
    return this.#values[name] === true;
  }

  string(name: string): string | undefined {
    const v = this.#values[name];
    if (v === undefined) return undefined;
    if (typeof v !== 'string') throw new UsageError(`--${name} takes a value`);
    return v;
  }

  strings(name: string): string[] {
    const v = this.#values[name];
    if (v === undefined) return [];
    return (Array.isArray(v) ? v : [v]).map(String);
  }

  /** A finite number; `min`/`max` bound it, `exclusiveMin` makes the lower bound strict. */
  number(
    name: string,
    opts: { min?: number; max?: number; exclusiveMin?: boolean; integer?: boolean } = {},
  ): number | undefined {
    const raw = this.string(name);
    if (raw === undefined) return undefined;
    const n = raw.trim() === '' ? Number.NaN : Number(raw.replaceAll('_', ''));
    const kind = opts.integer ? 'an integer' : 'a number';
    if (!Number.isFinite(n) || (opts.integer && !Number.isInteger(n))) {
      throw new UsageError(`--${name} must be ${kind}, got '${raw}'`);
    }
    if (opts.min !== undefined) {
      if (opts.exclusiveMin ? n <= opts.min : n < opts.min) {
        const bound = opts.exclusiveMin ? `greater than ${opts.min}` : `at least ${opts.min}`;
        throw new UsageError(`--${name} must be ${bound}, got ${raw}`);
      }
    }
    if (opts.max !== undefined && n > opts.max) {
      throw new UsageError(`--${name} must be at most ${opts.max}, got ${raw}`);
    }
    return n;
  }

  /** A positive number (> 0). */
  positive(name: string, integer = false): number | undefined {
    return this.number(name, { min: 0, exclusiveMin: true, integer });
  }

  /** A fraction in (0, 1]. */
  fraction(name: string): number | undefined {
    return this.number(name, { min: 0, exclusiveMin: true, max: 1 });
  }

  oneOf<T extends string>(name: string, allowed: readonly T[]): T | undefined {
    const v = this.string(name);
    if (v === undefined) return undefined;
    if (!(allowed as readonly string[]).includes(v)) {
      throw new UsageError(`--${name} must be one of ${allowed.join(', ')}; got '${v}'`);
    }
    return v as T;
  }
}
