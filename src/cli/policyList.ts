/** `--policy LIST`: routing policies to run side by side (`kvroute sim`, `npm run demo`). */
import { POLICY_NAMES } from '../router/registry.ts';
import { type Flags, UsageError } from './args.ts';

/** What `--policy LIST` takes (a row's help line). */
export const POLICY_LIST_TEXT = `comma-separated, or all: ${POLICY_NAMES.join(', ')}`;
export const POLICY_LIST_HELP = `  --policy LIST         ${POLICY_LIST_TEXT}`;

/** The listed policies, each once, in the order given; `fallback` when --policy is absent. */
export function readPolicyList(flags: Flags, fallback: readonly string[]): string[] {
  const raw = flags.string('policy');
  if (raw === undefined) return [...fallback];
  if (raw.trim() === 'all') return [...POLICY_NAMES];
  const names = raw.split(',').map((s) => s.trim());
  for (const name of names) {
    if (!(POLICY_NAMES as readonly string[]).includes(name)) {
      throw new UsageError(
        `--policy must be a list of ${POLICY_NAMES.join(', ')} or all; got '${name}'`,
      );
    }
  }
  return [...new Set(names)];
}
