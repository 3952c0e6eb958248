/**
 * A backend's speed for the router (`src/router/replicaSpeed.ts`) from its `gpu`, `tp` and
 * `profile` keys: the catalog's cost model for the backend's model (its `model` when that is a
 * catalog name, else the engine's default, Llama 3.3 70B) at the engine's default budget and
 * sequence limit, the seed replica's GPU and TP where a key is left out. A backend with none of
 * the keys has no speed: the pool's replicas are then taken as alike. In a mixed pool, give
 * every backend its hardware.
 */
import { readProfile } from '../calibrate/profileFile.ts';
import { ENGINE_DEFAULTS } from '../engine/options.ts';
import { MODELS } from '../model/catalog.ts';
import { replicaSpecProblem } from '../model/cost.ts';
import { speedFigures } from '../model/replicaSpeed.ts';
import { makeReplicaSpec } from '../model/spec.ts';
import type { ReplicaSpeed } from '../router/replicaSpeed.ts';
import type { BackendConfig } from './backendConfig.ts';
import { configError } from './configValues.ts';

/** The backend's speed, or undefined when it names no hardware; throws a config error naming `key`. */
export function backendSpeed(b: BackendConfig, key = 'backend'): ReplicaSpeed | undefined {
  if (b.gpu === undefined && b.tp === undefined && b.profile === undefined) return undefined;
  const named = b.model?.toLowerCase();
  const model = named !== undefined && Object.hasOwn(MODELS, named) ? named : ENGINE_DEFAULTS.model;
  const tp = b.tp ?? ENGINE_DEFAULTS.tp;
  let profile: ReturnType<typeof readProfile> | undefined;
  if (b.profile !== undefined) {
    try {
      profile = readProfile(b.profile);
    } catch (err) {
      throw configError(`${key} profile`, (err as Error).message);
    }
    const tps = profile.curves.map((c) => c.tp);
    if (!tps.includes(tp)) {
      throw configError(
        `${key} profile`,
        `${b.profile} has curves for TP ${tps.join(', ')}; none for TP ${tp}`,
      );
    }
  }
  const spec = makeReplicaSpec({
    model,
    gpu: b.gpu ?? ENGINE_DEFAULTS.gpu,
    tp,
    ...(profile && { profile }),
  });
  const problem = replicaSpecProblem(spec);
  if (problem) throw configError(`${key} tp`, problem.replace(/^--tp \d+ /, `TP ${tp} `));
  return speedFigures(spec, ENGINE_DEFAULTS.budgetTokens, ENGINE_DEFAULTS.maxSeqs);
}
