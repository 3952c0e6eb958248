/**
 * `--fleet GPU:tpN:COUNT[:profile=FILE],...`: a mixed fleet for `kvroute sim`, e.g.
 * `h200:tp2:8,h100-sxm:tp4:6`. Every group serves the run's --model; each replica's TP must fit
 * it, and a profile must have a curve for the group's TP. A problem is one line naming the flag.
 */
import { readProfile } from '../calibrate/profileFile.ts';
import type { CostProfile } from '../model/calibration.ts';
import { GPUS } from '../model/catalog.ts';
import { replicaSpecProblem } from '../model/cost.ts';
import { makeReplicaSpec } from '../model/spec.ts';
import type { ReplicaGroup } from '../sim/replicaGroups.ts';
import { UsageError } from './args.ts';
import { options, str } from './options/table.ts';

/** `--fleet`'s row (sim's table). */
export const FLEET_OPTIONS = options({
  fleet: str(
    'SPEC',
    'a mixed fleet instead of --replicas/--gpu/--tp: GPU:tpN:COUNT groups, comma-separated, ' +
      'each with :profile=FILE for a calibrated profile (e.g. h200:tp2:8,h100-sxm:tp4:6); ' +
      `GPUs: ${Object.keys(GPUS).join(', ')}`,
  ),
});

const FORMAT = 'GPU:tpN:COUNT[:profile=FILE]';

export function parseFleetFlag(value: string, model: string): ReplicaGroup[] {
  const parts = value.split(',').map((part) => part.trim());
  if (value.trim() === '') throw new UsageError(`--fleet: expected ${FORMAT},...; got '${value}'`);
  const groups = parts.map((part) => parseGroup(part, model));
  // One fleet serves one model: a profile measured on another model would time another model.
  const profiled = groups.flatMap((g, i) =>
    g.profile ? [{ part: parts[i]!, on: g.profile.measuredOn.model }] : [],
  );
  const other = profiled.find((p) => p.on !== model);
  if (other) {
    throw new UsageError(
      `--fleet: ${other.part} has a profile measured on ${other.on}, the fleet serves ${model} (--model): every replica serves one model`,
    );
  }
  return groups;
}

function parseGroup(part: string, model: string): ReplicaGroup {
  const [gpu, tpText, countText, ...options] = part.split(':');
  if (gpu === undefined || tpText === undefined || countText === undefined) {
    throw new UsageError(`--fleet: '${part}' is not ${FORMAT}`);
  }
  const name = gpu.toLowerCase();
  if (!Object.hasOwn(GPUS, name)) {
    throw new UsageError(
      `--fleet: unknown GPU '${gpu}'; accepted: ${Object.keys(GPUS).join(', ')}`,
    );
  }
  const tpMatch = /^tp(\d+)$/i.exec(tpText);
  const tp = tpMatch ? Number(tpMatch[1]) : Number.NaN;
  if (!Number.isInteger(tp) || tp < 1) {
    throw new UsageError(`--fleet: '${tpText}' in '${part}' is not tpN (tp1, tp2, tp4, tp8)`);
  }
  const count = /^\d+$/.test(countText) ? Number(countText) : Number.NaN;
  if (!Number.isInteger(count) || count < 1) {
    throw new UsageError(
      `--fleet: replica count '${countText}' in '${part}' is not a positive integer`,
    );
  }
  const problem = replicaSpecProblem(makeReplicaSpec({ model, gpu: name, tp }));
  if (problem)
    throw new UsageError(`--fleet ${part}: ${problem.replace(/^--tp \d+ /, `TP ${tp} `)}`);
  const group: ReplicaGroup = { gpu: name, tp, count };
  for (const option of options) {
    const [key, path] = option.split('=', 2);
    if (key !== 'profile' || !path) {
      throw new UsageError(
        `--fleet: unknown option '${option}' in '${part}'; accepted: profile=FILE`,
      );
    }
    group.profile = readGroupProfile(path, tp, part);
    group.profilePath = path;
  }
  return group;
}

function readGroupProfile(path: string, tp: number, part: string): CostProfile {
  let profile: CostProfile;
  try {
    profile = readProfile(path);
  } catch (err) {
    throw new UsageError(`--fleet ${part}: profile ${(err as Error).message}`);
  }
  const tps = profile.curves.map((c) => c.tp);
  if (!tps.includes(tp)) {
    throw new UsageError(
      `--fleet ${part}: profile ${path} has curves for TP ${tps.join(', ')}; none for TP ${tp}`,
    );
  }
  return profile;
}
