/**
 * A published serving benchmark, as plain data: where it is from, the setup as `kvroute sim`
 * flags, and the figures its authors reported per routing policy.
 */
import type { GroupsBurst } from '../../workload/types.ts';
import type { HitCount } from './figures.ts';

export interface PublishedPolicyRun {
  /** The policy as the publication names it. */
  label: string;
  /** The kvroute policy that stands for it. */
  policy: string;
  /** Prompt tokens served from the prefix cache, 0..1. */
  hitRate: number;
  /** Input plus output tokens over the benchmark's duration (SGLang's bench_serving total). */
  tokensPerS: number;
}

export interface PublishedRun {
  name: string;
  title: string;
  /** The publication's address. */
  source: string;
  /** The setup in words, as published. */
  setup: string;
  /** The setup as `kvroute sim` flags (workload, fleet, engine); policies are set per run. */
  simArgs: readonly string[];
  /** All prompts at once (a benchmark with an infinite request rate). */
  burst: GroupsBurst;
  /** Output tokens of every request (the throughput counts them). */
  outputTokens: number;
  /** How the publication counted its hit rate (figures.ts). */
  hitCount: HitCount;
  /** The cache-blind baseline first, then the cache-aware run. */
  runs: readonly [PublishedPolicyRun, PublishedPolicyRun];
  /** What the replay cannot reproduce, or assumes. */
  notes: readonly string[];
}
