/**
 * The profile file: YAML with a comment header, written by `kvroute calibrate` and read by
 * `--profile FILE` on plan, sim and engine. Reading checks every field (profileFromData).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { parse, stringify } from 'yaml';
import { type CostProfile, ProfileError, profileFromData } from '../model/calibration.ts';

const HEADER = `# kvroute cost profile: measured step-time coefficients for the cost model.
# A step of n computed tokens reading B bytes of HBM takes
#   overheadMs + max(2 x active params x n / (tp x peak FLOP/s x mfuMax x n / (n + halfTokens)),
#                    B / (tp x HBM bytes/s x mbu))
# Use it with: kvroute plan|sim|engine --profile FILE. Points record the fit's error per
# measurement (errorPct) and the roofline defaults' (rooflineErrorPct).
`;

export function writeProfile(path: string, profile: CostProfile): void {
  writeFileSync(path, HEADER + stringify(profile, { lineWidth: 0 }));
}

/** Reads and checks a profile; a problem is a ProfileError naming the file. */
export function readProfile(path: string): CostProfile {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as { code?: string }).code;
    throw new ProfileError(
      `${path}: ${code === 'ENOENT' ? 'no such file' : (err as Error).message}`,
    );
  }
  let data: unknown;
  try {
    data = parse(text);
  } catch (err) {
    throw new ProfileError(`${path}: not YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  try {
    return profileFromData(data);
  } catch (err) {
    throw new ProfileError(`${path}: ${(err as Error).message}`);
  }
}
