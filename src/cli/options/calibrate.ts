/**
 * `kvroute calibrate`'s options, one row each: its flag spec, the options of its `--help` and
 * its table in docs/configuration.md come from here.
 */
import { ENGINE_DEFAULTS } from '../../engine/options.ts';
import { DTYPES, FIT_OBJECTIVES, GPUS, MODELS, SEED_REPLICA } from '../../model/index.ts';
import { bool, int, num, oneOf, options, str } from './table.ts';

/** The profile file written when --out is not given. */
export const DEFAULT_CALIBRATE_OUT = 'kvroute-profile.yaml';
/** Wall-clock seconds for the live measurements when --budget-s is not given. */
export const DEFAULT_CALIBRATE_BUDGET_S = 120;
export const DEFAULT_CALIBRATE_MAX_BATCH = 64;
export const DEFAULT_CALIBRATE_REPEATS = 5;

// biome-ignore format: one option a line
export const CALIBRATE_OPTIONS = options({
  url: str('URL', 'an OpenAI-compatible server (vLLM, SGLang, kvroute engine): cold prompts of growing length (time to first token) and concurrent decodes of growing batch and context (inter-token gaps)', { section: 'source (one of)' }),
  'vidur-profile': str('DIR', 'a Vidur profile folder (mlp.csv, and attention.csv where present), e.g. data/profiling/compute/h100/meta-llama/Llama-2-70b-hf of microsoft/vidur'),
  'catalog-model': oneOf(Object.keys(MODELS), 'NAME', "{values} (default: the served model's name if the catalog has it; a Vidur folder's model)", { section: 'the replica measured (turns times into MFU and MBU)' }),
  gpu: oneOf(Object.keys(GPUS), 'NAME', `{values} (default ${SEED_REPLICA.gpu}; a Vidur folder's GPU)`),
  tp: int('N', 'GPUs per replica (live only; default {default})', { above: 0, default: SEED_REPLICA.tp }),
  'weights-dtype': oneOf(DTYPES, 'D', `{values} (default ${SEED_REPLICA.weightsDtype}; Vidur bf16)`),
  'kv-dtype': oneOf(DTYPES, 'D', '{values} (default bf16)'),
  model: str('NAME', 'model name to request (default: the first of /v1/models)', { section: 'live measurement' }),
  'api-key': str('KEY', 'bearer token'),
  budget: int('N', "the server's tokens per step (vLLM --max-num-batched-tokens; default {default}, kvroute engine's)", { above: 0, default: ENGINE_DEFAULTS.budgetTokens, unit: 'tokens' }),
  speedup: num('F', 'the server runs F x faster than modeled time (kvroute engine --speedup); measured times are multiplied by F', { above: 0, default: 1 }),
  'budget-s': num('S', 'wall-clock seconds for the measurements', { above: 0, default: DEFAULT_CALIBRATE_BUDGET_S }),
  'max-prompt-tokens': int('N', 'longest prompt (default 4 x --budget, within the context window)', { above: 0, unit: 'tokens' }),
  'max-batch': int('N', 'largest decode batch', { above: 0, default: DEFAULT_CALIBRATE_MAX_BATCH }),
  repeats: int('N', 'requests per prompt length, the fastest counts', { above: 0, default: DEFAULT_CALIBRATE_REPEATS }),
  seed: int('N', "seeds the prompts' token ids", { default: 0 }),
  'step-table': bool('also fit a measured table of step times (prefill tokens, decode sequences, context), with mixed-step probes; where present it times every step in place of the curve (an engine off the roofline, e.g. llama.cpp on a CPU)'),
  fit: oneOf(FIT_OBJECTIVES, 'F', "{values} over relative errors (default: minimax for Vidur's medians, least-squares for live timings)", { section: 'fit and output' }),
  out: str('FILE', 'profile file to write', { default: DEFAULT_CALIBRATE_OUT }),
  report: str('FILE.html', 'self-contained HTML report with the points and the fitted curves'),
  json: bool('print the profile as JSON instead of the summary'),
  quiet: bool('no progress (a bar on a TTY, else a line per measurement and a status line every ~10 s on stderr)'),
});
