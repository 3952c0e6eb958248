/** Flag readers the capacity and search benchmarks share: a bad value is one line, exit 2. */
import { POLICY_NAMES } from '../src/router/registry.ts';

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
