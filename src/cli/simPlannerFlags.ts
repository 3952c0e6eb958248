/**
 * `kvroute sim --planner`'s flags: the online planner in the simulation's loop
 * (`src/sim/plannerLoop.ts`), with `serve --planner`'s window, interval, hysteresis and bound
 * (the same defaults) and the start-up delay of a replica it adds. The SLO is sim's own
 * (`--slo-ttft-p99-ms` or `--slo-ttft-slowdown`, `--slo-tpot-p99-ms`); the fleet starts at
 * `--replicas`.
 */
import {
  DEFAULT_PLANNER_INTERVAL_S,
  DEFAULT_PLANNER_MAX_REPLICAS,
  DEFAULT_PLANNER_SCALE_DOWN_S,
  DEFAULT_PLANNER_STARTUP_S,
  DEFAULT_PLANNER_WINDOW_S,
} from '../planner/online/defaults.ts';
import type { PlannerLoopOptions } from '../sim/plannerLoop.ts';
import { type Flags, UsageError } from './args.ts';
import { type OptionReader, readerOf } from './options/read.ts';
import { bool, int, num, options } from './options/table.ts';

const PLANNER_HELP =
  "replay the workload with the online planner in the loop (serve --planner's core): every " +
  '--planner-interval-s of simulated time it searches the arrivals of the last --planner-window-s ' +
  "for the fewest replicas meeting the run's SLO, and the fleet follows: replicas added take " +
  'requests --planner-startup-s later, removed ones take no new request and leave once drained; ' +
  'starts at --replicas. Prints the replica count over time, replica-hours, the first answer and ' +
  'the SLO';

/** The planner's options, one row each (sim's flag spec and `--help` come from here). */
// biome-ignore format: one option a line
export const SIM_PLANNER_OPTIONS = options({
  planner: bool(PLANNER_HELP, { section: 'planner in the loop' }),
  'planner-startup-s': num('S', 'a replica added takes requests this long later', { min: 0, default: DEFAULT_PLANNER_STARTUP_S }),
  'planner-window-s': num('S', 'the arrivals fitted', { above: 0, default: DEFAULT_PLANNER_WINDOW_S }),
  'planner-interval-s': num('S', 'how often it answers', { above: 0, default: DEFAULT_PLANNER_INTERVAL_S }),
  'planner-scale-down-s': num('S', 'a lower answer must hold this long before the count goes down', { min: 0, default: DEFAULT_PLANNER_SCALE_DOWN_S }),
  'planner-max-replicas': int('N', 'most replicas tried; the answer when none meets the SLO', { above: 0, default: DEFAULT_PLANNER_MAX_REPLICAS }),
  'planner-fast-window-s': num('S', 'also search the arrivals of the last S seconds alone and take the larger answer: a rise in the rate is seen before it fills the window (default 0: off, one window as serve --planner)', { min: 0 }),
});

type PlannerOption = OptionReader<typeof SIM_PLANNER_OPTIONS>;

/** Flags a run with the planner in the loop cannot take (each fixes or compares fleets). */
const NOT_WITH_PLANNER = [
  'search',
  'concurrency',
  'pd',
  'fleet',
  'kill',
  'revive',
  'routers',
  'sync-ms',
  'sync',
  'max-queue-ms',
  'max-ttft-ms',
  'fault-replicas',
  'fault-drop-events',
  'fault-lie',
  'fault-silent-reset-s',
  'report',
  'requests-out',
];

function fastWindow(option: PlannerOption): { fastWindowMs: number } | Record<string, never> {
  const s = option('planner-fast-window-s');
  if (s === undefined || s === 0) return {};
  const windowS = option('planner-window-s') ?? DEFAULT_PLANNER_WINDOW_S;
  if (s >= windowS) {
    throw new UsageError(
      `--planner-fast-window-s must be shorter than --planner-window-s (${windowS}), got ${s}`,
    );
  }
  return { fastWindowMs: s * 1000 };
}

/** The planner's options, or null without `--planner` (its companions then are refused). */
export function readSimPlannerFlags(flags: Flags): PlannerLoopOptions | null {
  const companions = Object.keys(SIM_PLANNER_OPTIONS).filter((f) => f !== 'planner');
  if (!flags.bool('planner')) {
    const stray = companions.find((f) => flags.has(f));
    if (stray !== undefined) throw new UsageError(`--${stray} needs --planner`);
    return null;
  }
  const other = NOT_WITH_PLANNER.find((f) => flags.has(f));
  if (other !== undefined) {
    throw new UsageError(`--planner runs one fleet that the planner resizes; drop --${other}`);
  }
  const option = readerOf(SIM_PLANNER_OPTIONS, flags);
  return {
    startupMs: (option('planner-startup-s') ?? DEFAULT_PLANNER_STARTUP_S) * 1000,
    windowMs: (option('planner-window-s') ?? DEFAULT_PLANNER_WINDOW_S) * 1000,
    intervalMs: (option('planner-interval-s') ?? DEFAULT_PLANNER_INTERVAL_S) * 1000,
    scaleDownMs: (option('planner-scale-down-s') ?? DEFAULT_PLANNER_SCALE_DOWN_S) * 1000,
    maxReplicas: option('planner-max-replicas') ?? DEFAULT_PLANNER_MAX_REPLICAS,
    ...fastWindow(option),
  };
}
