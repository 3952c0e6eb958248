/**
 * `kvroute sim`'s SLO, search and admission options, one row each (sim's flag spec and `--help`
 * come from here), and their reading: the SLO a run is judged by, and the gateway's admission
 * bounds modelled in the simulation.
 */
import { DEFAULT_SLO, type SloTargets } from '../results/slo.ts';
import type { SimAdmission } from '../sim/admission.ts';
import { type Flags, UsageError } from './args.ts';
import { readerOf } from './options/read.ts';
import { bool, int, num, options } from './options/table.ts';

/** The search's replica limit when `--max-replicas` is not given. */
export const DEFAULT_SEARCH_MAX_REPLICAS = 256;

// biome-ignore format: one option a line
export const SIM_SLO_OPTIONS = options({
  'slo-ttft-p99-ms': num('MS', "(default {default}: a cold 8,000-token prefill, 143 ms warm + the 428 ms a hit saves: the cost rule's own promise)", { above: 0, default: DEFAULT_SLO.ttftP99Ms, section: 'SLO and search' }),
  'slo-ttft-slowdown': num('X', "instead: p99 over requests of TTFT / the request's own cold TTFT on an idle replica at most X (>= 1): a target that scales with each prompt, for traces whose prompts alone take longer than a fixed one", { min: 1 }),
  'slo-tpot-p99-ms': num('MS', '(default {default}: three 33.5 ms decode steps at batch 64)', { above: 0, default: DEFAULT_SLO.tpotP99Ms }),
  search: bool('fewest replicas meeting the SLO, per policy, by bisection'),
  'max-replicas': int('N', 'search limit', { above: 0, default: DEFAULT_SEARCH_MAX_REPLICAS }),
  threads: int('N', "worker threads for the runs and the search's probes (default: the machine's cores); 1 runs everything in this thread. Same output either way", { min: 1 }),
  'max-queue-ms': num('MS', "refuse arrivals while every live replica has more than MS of modelled prefill queued (the gateway's --max-queue-ms); each policy runs with and without the bound, and goodput (requests meeting the SLO per second) is shown for both", { above: 0, section: 'admission' }),
  'max-ttft-ms': num('MS', "refuse a request when, on the replica the router picked, the prefill queued ahead of it plus its own uncached prefill is modelled at more than MS (the gateway's --max-ttft-ms); with or without --max-queue-ms", { above: 0 }),
});

/** The SLO a run is judged by: a fixed TTFT p99 or a slowdown bound, and a TPOT p99. */
export function readSlo(flags: Flags): SloTargets {
  const option = readerOf(SIM_SLO_OPTIONS, flags);
  const tpotP99Ms = option('slo-tpot-p99-ms') ?? DEFAULT_SLO.tpotP99Ms;
  const slowdown = option('slo-ttft-slowdown');
  if (slowdown === undefined) {
    return { ttftP99Ms: option('slo-ttft-p99-ms') ?? DEFAULT_SLO.ttftP99Ms, tpotP99Ms };
  }
  if (flags.has('slo-ttft-p99-ms')) {
    throw new UsageError(
      '--slo-ttft-p99-ms and --slo-ttft-slowdown are alternative TTFT targets; give one',
    );
  }
  return { ttftSlowdown: slowdown, tpotP99Ms };
}

/** The admission bounds, undefined when neither is given (refused with `--search`). */
export function readAdmission(flags: Flags): SimAdmission | undefined {
  const option = readerOf(SIM_SLO_OPTIONS, flags);
  const maxQueueMs = option('max-queue-ms');
  const maxTtftMs = option('max-ttft-ms');
  if (maxQueueMs === undefined && maxTtftMs === undefined) return undefined;
  if (option('search')) {
    const flag = maxQueueMs !== undefined ? '--max-queue-ms' : '--max-ttft-ms';
    throw new UsageError(`${flag} compares runs at one replica count; drop --search`);
  }
  return { maxQueueMs: maxQueueMs ?? null, ...(maxTtftMs !== undefined && { maxTtftMs }) };
}
