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
import { type Flags, flagSpec, UsageError } from './args.ts';

export const SIM_PLANNER_FLAGS = flagSpec({
  string:
    'planner-startup-s planner-window-s planner-interval-s planner-scale-down-s ' +
    'planner-max-replicas planner-fast-window-s',
  boolean: 'planner',
});

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

export const SIM_PLANNER_HELP = `planner in the loop
  --planner             replay the workload with the online planner in the loop (serve
                        --planner's core): every --planner-interval-s of simulated time it
                        searches the arrivals of the last --planner-window-s for the fewest
                        replicas meeting the run's SLO, and the fleet follows: replicas
                        added take requests --planner-startup-s later, removed ones take no new
                        request and leave once drained; starts at --replicas. Prints the
                        replica count over time, replica-hours, the first answer and the SLO
  --planner-startup-s S a replica added takes requests this long later (default ${DEFAULT_PLANNER_STARTUP_S})
  --planner-window-s S  the arrivals fitted (default ${DEFAULT_PLANNER_WINDOW_S})
  --planner-interval-s S  how often it answers (default ${DEFAULT_PLANNER_INTERVAL_S})
  --planner-scale-down-s S  a lower answer must hold this long before the count goes down
                        (default ${DEFAULT_PLANNER_SCALE_DOWN_S})
  --planner-max-replicas N  most replicas tried; the answer when none meets the SLO
                        (default ${DEFAULT_PLANNER_MAX_REPLICAS})
  --planner-fast-window-s S  also search the arrivals of the last S seconds alone and take
                        the larger answer: a rise in the rate is seen before it fills the
                        window (default 0: off, one window as serve --planner)
`;

function fastWindow(flags: Flags): { fastWindowMs: number } | Record<string, never> {
  const s = flags.number('planner-fast-window-s', { min: 0 });
  if (s === undefined || s === 0) return {};
  const windowS = flags.positive('planner-window-s') ?? DEFAULT_PLANNER_WINDOW_S;
  if (s >= windowS) {
    throw new UsageError(
      `--planner-fast-window-s must be shorter than --planner-window-s (${windowS}), got ${s}`,
    );
  }
  return { fastWindowMs: s * 1000 };
}

/** The planner's options, or null without `--planner` (its companions then are refused). */
export function readSimPlannerFlags(flags: Flags): PlannerLoopOptions | null {
  const companions = [
    'planner-startup-s',
    'planner-window-s',
    'planner-interval-s',
    'planner-scale-down-s',
    'planner-max-replicas',
    'planner-fast-window-s',
  ];
  if (!flags.bool('planner')) {
    const stray = companions.find((f) => flags.has(f));
    if (stray !== undefined) throw new UsageError(`--${stray} needs --planner`);
    return null;
  }
  const other = NOT_WITH_PLANNER.find((f) => flags.has(f));
  if (other !== undefined) {
    throw new UsageError(`--planner runs one fleet that the planner resizes; drop --${other}`);
  }
  const seconds = (name: string, fallback: number, min: 'zero' | 'positive') =>
    (min === 'zero' ? flags.number(name, { min: 0 }) : flags.positive(name)) ?? fallback;
  return {
    startupMs: seconds('planner-startup-s', DEFAULT_PLANNER_STARTUP_S, 'zero') * 1000,
    windowMs: seconds('planner-window-s', DEFAULT_PLANNER_WINDOW_S, 'positive') * 1000,
    intervalMs: seconds('planner-interval-s', DEFAULT_PLANNER_INTERVAL_S, 'positive') * 1000,
    scaleDownMs: seconds('planner-scale-down-s', DEFAULT_PLANNER_SCALE_DOWN_S, 'zero') * 1000,
    maxReplicas: flags.positive('planner-max-replicas', true) ?? DEFAULT_PLANNER_MAX_REPLICAS,
    ...fastWindow(flags),
  };
}
