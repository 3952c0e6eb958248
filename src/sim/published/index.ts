/** The published runs `kvroute sim --replay-published NAME` replays, one file each. */
import { SGLANG_V04 } from './sglangV04.ts';
import type { PublishedRun } from './types.ts';

export const PUBLISHED_RUNS: Readonly<Record<string, PublishedRun>> = {
  [SGLANG_V04.name]: SGLANG_V04,
};
export const PUBLISHED_NAMES = Object.keys(PUBLISHED_RUNS);
