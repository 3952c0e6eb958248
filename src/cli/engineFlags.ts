/**
 * The engine's flags, declared once for every command that starts or simulates engines
 * (`kvroute engine`, `kvroute sim`, `npm run demo`): the flag spec, the help lines and the
 * reader into the one engine options type, with the engine's own defaults.
 */
import { readProfile } from '../calibrate/profileFile.ts';
import { ENGINE_DEFAULTS, type EngineOptions } from '../engine/options.ts';
import type { CostProfile } from '../model/calibration.ts';
import { GPUS, MODELS } from '../model/catalog.ts';
import { replicaSpecProblem } from '../model/cost.ts';
import { makeReplicaSpec } from '../model/spec.ts';
import { KV_POLICY_NAMES } from '../scheduler/types.ts';
import { type Flags, flagSpec, UsageError } from './args.ts';

export const ENGINE_FLAGS = flagSpec({
  string: 'model gpu tp budget max-seqs kv-policy block-size kv-blocks profile',
});

const D = ENGINE_DEFAULTS;
export const ENGINE_HELP = `engine (the same flags for kvroute engine, kvroute sim and npm run demo)
  --model NAME          ${Object.keys(MODELS).join(', ')} (default ${D.model})
  --gpu NAME            ${Object.keys(GPUS).join(', ')} (default ${D.gpu})
  --tp N                GPUs per replica (default ${D.tp})
  --budget N            tokens per step (default ${D.budgetTokens})
  --max-seqs N          running sequences at most (default ${D.maxSeqs})
  --kv-policy P         ${KV_POLICY_NAMES.join(' | ')} (default ${D.kvPolicy}: vLLM's; reserve: the
                        scheduler seed's reserve-at-admission)
  --block-size N        tokens per KV block (default ${D.blockSize})
  --kv-blocks N         KV pool size in blocks (default: the cost model's pool)
  --profile FILE        calibrated step times from kvroute calibrate (default: roofline)
`;

export function readEngineFlags(flags: Flags): EngineOptions {
  const engine: EngineOptions = {
    model: flags.oneOf('model', Object.keys(MODELS)) ?? D.model,
    gpu: flags.oneOf('gpu', Object.keys(GPUS)) ?? D.gpu,
    tp: flags.positive('tp', true) ?? D.tp,
    budgetTokens: flags.positive('budget', true) ?? D.budgetTokens,
    maxSeqs: flags.positive('max-seqs', true) ?? D.maxSeqs,
    kvPolicy: flags.oneOf('kv-policy', KV_POLICY_NAMES) ?? D.kvPolicy,
    blockSize: flags.positive('block-size', true) ?? D.blockSize,
  };
  const kvBlocks = flags.positive('kv-blocks', true);
  if (kvBlocks !== undefined) engine.kvBlocks = kvBlocks;
  const profile = readProfileFlag(flags, engine.tp);
  if (profile) engine.profile = profile;
  const problem = replicaSpecProblem(
    makeReplicaSpec({ model: engine.model, gpu: engine.gpu, tp: engine.tp }),
  );
  if (problem) throw new UsageError(problem);
  return engine;
}

/**
 * `--profile FILE`, read and checked, with a curve for `tp`; a problem is one usage line naming
 * the flag. Shared by every command that takes the flag.
 */
export function readProfileFlag(flags: Flags, tp: number): CostProfile | undefined {
  const path = flags.string('profile');
  if (path === undefined) return undefined;
  let profile: CostProfile;
  try {
    profile = readProfile(path);
  } catch (err) {
    throw new UsageError(`--profile ${(err as Error).message}`);
  }
  const tps = profile.curves.map((c) => c.tp);
  if (!tps.includes(tp)) {
    throw new UsageError(
      `--profile ${path} has curves for TP ${tps.join(', ')}; none for --tp ${tp}`,
    );
  }
  return profile;
}
