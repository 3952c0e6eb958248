/**
 * What both replays of a published run (`replayPublished.ts`, `harnessReplay.ts`) print and
 * write about the run itself: the heading above their tables and the run's part of the JSON line.
 */

/** The run fields the heading and the JSON line name. */
export interface ReplayedRun {
  name: string;
  title: string;
  source: string;
  setup: string;
  simArgs: readonly string[];
}

/** Title, source, setup and the `kvroute sim` flags it ran as (`how`: said after the flags). */
export function replayHeading(run: ReplayedRun, how = ''): string[] {
  return [
    run.title,
    `source: ${run.source}`,
    `setup: ${run.setup}`,
    `as: kvroute sim ${run.simArgs.join(' ')}${how}`,
  ];
}

/** One JSON line: the run's name and source, then the replay's own figures. */
export function replayJsonLine(run: ReplayedRun, figures: Record<string, unknown>): string {
  return JSON.stringify({ name: run.name, source: run.source, ...figures });
}

/** A ratio less 1 as a signed percentage: simulated against published. */
export const signedPct = (x: number): string => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)} %`;
