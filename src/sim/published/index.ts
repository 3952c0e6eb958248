/** The published runs `kvroute sim --replay-published NAME` replays, one file each. */
import type { PublishedHarnessRun } from './harnessReplay.ts';
import { KUBEAI_PREFIX_HASH } from './kubeaiPrefixHash.ts';
import { LLMD_37_CAPACITY } from './llmd37Capacity.ts';
import { LLMD_KVCACHE_WINS } from './llmdKvcacheWins.ts';
import { SGLANG_V04 } from './sglangV04.ts';
import type { PublishedRun } from './types.ts';

export const PUBLISHED_RUNS: Readonly<Record<string, PublishedRun>> = {
  [SGLANG_V04.name]: SGLANG_V04,
};
/** Runs measured by a benchmark harness under load (harnessReplay.ts). */
export const PUBLISHED_HARNESS_RUNS: Readonly<Record<string, PublishedHarnessRun>> = {
  [LLMD_KVCACHE_WINS.name]: LLMD_KVCACHE_WINS,
  [LLMD_37_CAPACITY.name]: LLMD_37_CAPACITY,
  [KUBEAI_PREFIX_HASH.name]: KUBEAI_PREFIX_HASH,
};
export const PUBLISHED_NAMES = [
  ...Object.keys(PUBLISHED_RUNS),
  ...Object.keys(PUBLISHED_HARNESS_RUNS),
];
