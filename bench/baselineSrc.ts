/**
 * The baseline tree's `src/` for the A/B benchmarks (`BASELINE_SRC`), checked. The tree's
 * `package.json` must sit beside it: without one the TypeScript loader takes the copy's modules
 * for CommonJS, and such a copy of this very tree measured 0.8x (`bench/routerAb.ts`, pick) and
 * 0.6x (`bench/routeWidth.ts` (removed: `git show de18719:bench/routeWidth.ts`)) of itself, which flatters every ratio against it.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

const LAYOUT =
  'git archive <commit> src package.json | tar -x -C /tmp/base; BASELINE_SRC=/tmp/base/src';

/** `BASELINE_SRC`, resolved; undefined when unset and not `required`. Exits 2 on a bad tree. */
export function baselineSrc(required: true): string;
export function baselineSrc(required: false): string | undefined;
export function baselineSrc(required: boolean): string | undefined {
  const src = process.env.BASELINE_SRC;
  const fail = (why: string): never => {
    console.error(`BASELINE_SRC: ${why} (${LAYOUT})`);
    process.exit(2);
  };
  if (!src) return required ? fail('the src/ folder of the baseline tree is required') : undefined;
  let type: unknown;
  try {
    type = JSON.parse(readFileSync(resolve(src, '..', 'package.json'), 'utf8')).type;
  } catch {
    fail(
      `no readable package.json beside ${src}: the loader would compile the baseline as CommonJS`,
    );
  }
  if (type !== 'module') fail(`the package.json beside ${src} does not say "type": "module"`);
  return resolve(src);
}
