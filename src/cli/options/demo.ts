/**
 * `npm run demo`'s options, one row each: its flag spec, the options of its `--help` and its
 * table in docs/configuration.md come from here. The workload flags (`../workloadFlags.ts`) and
 * the policy list (`../policyList.ts`) are carried as blocks of their modules' spec and help
 * text; the engine and real-engine rows are `../engineFlags.ts`'s and `../runtimeFlags.ts`'s.
 */
import { LLAMA_CPP_DEFAULT_MAX_SEQS } from '../../engine/runtime/llamaCpp/serve.ts';
import { flagSpec } from '../args.ts';
import { ENGINE_OPTIONS } from '../engineFlags.ts';
import { POLICY_LIST_HELP } from '../policyList.ts';
import { RUNTIME_OPTIONS } from '../runtimeFlags.ts';
import { WORKLOAD_FLAGS, workloadHelp } from '../workloadFlags.ts';
import { block, bool, int, num, options } from './table.ts';

/**
 * Defaults sized for a small machine: the router seed's workload at an eighth of its rate on
 * 4 replicas (cost policy: warm owners; random and round-robin: the pool churns), 2 minutes
 * of workload time per policy at speedup 1.
 */
export const DEMO_DEFAULTS = {
  rate: 5,
  replicas: 4,
  durationS: 120,
  speedup: 1,
  policies: ['cost', 'random', 'round-robin'],
} as const;

/**
 * Real engines on a 2-core machine: two of them, the shared-prefix workload sized like
 * `npm run bench:real`'s routing trace (6 groups of a 1,024-token system prompt, 128-token
 * questions, 8 tokens out) at 1 request/s for 40 s, and a KV pool of 256 blocks per engine:
 * room for the prefixes of about 3 of the 6 groups, so a policy that spreads every group over
 * both engines (round-robin) evicts what it will need next, and one that keeps a group on one
 * engine (delay-cost) does not. The context also holds the seed workload's 8,000-token prompts
 * when asked for (the tiny model was trained on none anyway).
 */
export const DEMO_REAL_DEFAULTS = {
  replicas: 2,
  workload: 'shared-prefix',
  sharedPrefix: {
    numGroups: 6,
    numPromptsPerGroup: 8,
    systemPromptLen: 1024,
    questionLen: 128,
    outputLen: 8,
  },
  rate: 1,
  durationS: 40,
  kvBlocks: 256,
  maxModelLen: 10_240,
  policies: ['delay-cost', 'round-robin'],
  /** Wall seconds of `kvroute calibrate` measurements on one engine. */
  calibrateS: 30,
} as const;

const D = DEMO_DEFAULTS;
const R = DEMO_REAL_DEFAULTS;
const P = R.sharedPrefix;

const WORKLOAD_HELP = `workload
${workloadHelp({ duration: `${D.durationS}`, warmup: 'min(60, duration/10)', rate: `${D.rate}` })}`;

/** What --runtime llama.cpp changes, said under --runtime. */
const REAL_ENGINES = `With --runtime llama.cpp: --policy defaults to ${R.policies.join(',')}, --replicas to ${R.replicas}, --workload to ${R.workload} (${P.numGroups} groups x ${P.numPromptsPerGroup}, ${P.systemPromptLen} system + ${P.questionLen} question tokens, ${P.outputLen} out), --rate to ${R.rate}, --duration to ${R.durationS}, --max-seqs to ${LLAMA_CPP_DEFAULT_MAX_SEQS}, --kv-blocks to ${R.kvBlocks}, the engines' context to ${R.maxModelLen}, and --speedup must be 1. Without --profile, a calibration step first measures one engine with kvroute calibrate and its step table (${R.calibrateS} s of measurements): the simulated side models that engine's measured step times, not the catalog GPU, and the gateway's delay-cost is told what a decode costs there (kvroute serve's decode cost option). With --profile FILE that file is used instead. About 5 minutes in all on 2 busy cores.`;

// biome-ignore format: one option a line
export const DEMO_OPTIONS = options({
  workload: block(WORKLOAD_FLAGS, WORKLOAD_HELP),
  policy: block(flagSpec({ string: 'policy' }), `fleet\n${POLICY_LIST_HELP} (default ${D.policies.join(',')})\n`),
  replicas: int('N', 'live engines and simulated replicas', { above: 0, default: D.replicas }),
  speedup: num('X', "engines' modeled time / wall time", { above: 0, default: D.speedup }),
  inprocess: bool('engines and gateway in this process instead of child processes'),
  ...ENGINE_OPTIONS,
  runtime: { ...RUNTIME_OPTIONS.runtime, help: `${RUNTIME_OPTIONS.runtime.help}. ${REAL_ENGINES}` },
  gguf: RUNTIME_OPTIONS.gguf,
  threads: RUNTIME_OPTIONS.threads,
  json: bool('the live results as kvroute bench --json writes them', { section: 'output' }),
  quiet: bool('no progress (a bar on a TTY, else a line to stderr every ~10 s)'),
});
