/**
 * The benchmarks' one flag reader: `readBenchArgs` parses the command line against a script's
 * options (node's `parseArgs`, strict), and `benchFlags` reads the values; an unknown flag or a
 * bad value is one line naming the flag, exit 2.
 */
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { POLICY_NAMES } from '../src/router/registry.ts';

type Options = NonNullable<ParseArgsConfig['options']>;

/** The flags given, by `options` (strings and booleans, as `parseArgs` gives them). */
export function readBenchArgs<const O extends Options>(bench: string, options: O) {
  try {
    return parseArgs({ args: process.argv.slice(2), options, strict: true }).values;
  } catch (err) {
    process.stderr.write(`${bench}: ${(err as Error).message}\n`);
    process.exit(2);
  }
}

export function benchFlags(bench: string) {
  const fail = (message: string): never => {
    process.stderr.write(`${bench}: ${message}\n`);
    process.exit(2);
  };
  return {
    fail,
    /** A positive integer, or `fallback` when the flag is absent. */
    positiveInt(flag: string, raw: string | undefined, fallback: number): number {
      if (raw === undefined) return fallback;
      const n = Number(raw);
      if (!Number.isInteger(n) || n < 1) fail(`--${flag} takes a positive integer, got '${raw}'`);
      return n;
    },
    /** A positive number, or `fallback` when the flag is absent. */
    positiveNumber(flag: string, raw: string | undefined, fallback: number): number {
      if (raw === undefined) return fallback;
      const n = Number(raw);
      if (!(n > 0) || !Number.isFinite(n)) fail(`--${flag} takes a positive number, got '${raw}'`);
      return n;
    },
    /** A comma-separated subset of `allowed` (in `allowed`'s order), or all of it when absent. */
    list<T extends string>(flag: string, raw: string | undefined, allowed: readonly T[]): T[] {
      if (raw === undefined) return [...allowed];
      const given = raw.split(',').map((s) => s.trim());
      for (const g of given) {
        if (!(allowed as readonly string[]).includes(g)) {
          fail(`--${flag} takes a list of ${allowed.join(', ')}, got '${g}'`);
        }
      }
      return allowed.filter((a) => given.includes(a));
    },
    /** `--policy LIST` or all (the default). */
    policies(raw: string | undefined): string[] {
      const list =
        raw === undefined || raw === 'all'
          ? [...POLICY_NAMES]
          : raw.split(',').map((s) => s.trim());
      for (const p of list) {
        if (!(POLICY_NAMES as readonly string[]).includes(p)) {
          fail(`--policy takes a list of ${POLICY_NAMES.join(', ')} or all, got '${p}'`);
        }
      }
      return list;
    },
  };
}
