/**
 * The workload's flags, declared once for every command that replays a workload (`kvroute sim`,
 * `kvroute bench`, `npm run demo`): the same flags and seed give the same arrivals in each.
 * Durations and warm-ups are returned as given; each command applies its own defaults.
 */
import type { WorkloadSpec } from '../workload/spec.ts';
import { DEFAULT_LORA_ADAPTERS, DEFAULT_LORA_ZIPF } from '../workload/lora.ts';
import { WORKLOAD_NAMES } from '../workload/workloads.ts';
import { SHARED_PREFIX_DEFAULTS } from '../workload/sharedPrefixGroups.ts';
import type { SharedPrefixShape } from '../workload/types.ts';

/** inference-perf's shared_prefix parameters: flag and shape key. */
const SHARED_PREFIX_FLAGS: [string, keyof SharedPrefixShape][] = [
  ['num-groups', 'numGroups'],
  ['num-prompts-per-group', 'numPromptsPerGroup'],
  ['system-prompt-len', 'systemPromptLen'],
  ['question-len', 'questionLen'],
  ['output-len', 'outputLen'],
];
import { type Flags, flagSpec, UsageError } from './args.ts';

export const WORKLOAD_FLAGS = flagSpec({
  string:
    'workload trace rate rate-scale duration warmup seed adapters zipf num-groups ' +
    'num-prompts-per-group system-prompt-len question-len output-len',
});

/** Help lines; `duration`, `warmup` and `rate` give the command's own defaults. */
export function workloadHelp(o: {
  duration: string;
  warmup: string;
  rate?: string;
  seed?: string;
}): string {
  const d = SHARED_PREFIX_DEFAULTS;
  return `  --workload NAME       ${WORKLOAD_NAMES.join(', ')} (default seed)
                        seed: 40 req/s Poisson, 200 customers x 6,000-token prefix + 2,000
                        own tokens, 300 out; hot: one customer at 10 %; low-shared: 15 % shared;
                        groups: 64 x 16 prompts, 2,048 system + 128 question, 256 out;
                        multiturn: every turn extends the conversation so far; lora: the
                        seed's load over LoRA adapters lora-0.. (customer c uses c mod K),
                        adapters drawn by a Zipf law
                        shared-prefix: inference-perf's shared_prefix shape (10 req/s Poisson)
                        chat: multi-turn, ShareGPT-like log-normal lengths (161 in, 338 out per
                        turn on average, 3.51 turns), each prompt the history so far
  --num-groups N  --num-prompts-per-group N  --system-prompt-len N  --question-len N
  --output-len N        shared-prefix: inference-perf's parameters (defaults ${d.numGroups}, ${d.numPromptsPerGroup}, ${d.systemPromptLen}, ${d.questionLen}, ${d.outputLen})
  --adapters K          lora: adapters (default ${DEFAULT_LORA_ADAPTERS})
  --zipf S              lora: Zipf exponent of adapter popularity, 0 = uniform (default ${DEFAULT_LORA_ZIPF})
  --trace FILE          Mooncake JSONL trace instead (timestamp, input_length, output_length,
                        hash_ids of 512-token blocks; text per hash id)
  --rate R              requests/s of a synthetic workload (default ${o.rate ?? "the workload's"})
  --rate-scale X        speeds a trace up (default 1)
  --duration S          workload seconds of arrivals (default ${o.duration})
  --warmup S            seconds of arrivals not measured (default ${o.warmup})
  --seed N              ${o.seed ?? 'workload seed'} (default 1)
`;
}

export interface WorkloadFlags {
  workload: WorkloadSpec;
  seed: number;
  /** --duration, --warmup in seconds; undefined when not given. */
  durationS: number | undefined;
  warmupS: number | undefined;
}

/** `ratePerS`: the command's rate when --rate is absent (default: the workload's own). */
export function readWorkloadFlags(
  flags: Flags,
  defaults: { ratePerS?: number; workload?: (typeof WORKLOAD_NAMES)[number] } = {},
): WorkloadFlags {
  const tracePath = flags.string('trace');
  if (tracePath !== undefined && flags.has('workload')) {
    throw new UsageError('--trace and --workload are exclusive; give one');
  }
  if (tracePath === undefined && flags.has('rate-scale')) {
    throw new UsageError('--rate-scale applies to --trace; use --rate for a synthetic workload');
  }
  if (tracePath !== undefined && flags.has('rate')) {
    throw new UsageError('--rate applies to synthetic workloads; use --rate-scale with --trace');
  }
  const ratePerS = flags.positive('rate') ?? defaults.ratePerS;
  const name = flags.oneOf('workload', WORKLOAD_NAMES) ?? defaults.workload ?? 'seed';
  for (const flag of ['adapters', 'zipf']) {
    if (flags.has(flag) && (tracePath !== undefined || name !== 'lora')) {
      throw new UsageError(`--${flag} applies to --workload lora`);
    }
  }
  const shapeFlags = SHARED_PREFIX_FLAGS.filter(([flag]) => flags.has(flag));
  if (shapeFlags.length > 0 && (tracePath !== undefined || name !== 'shared-prefix')) {
    throw new UsageError(`--${shapeFlags[0]![0]} applies to --workload shared-prefix`);
  }
  const sharedPrefix: SharedPrefixShape | undefined =
    shapeFlags.length === 0
      ? undefined
      : (Object.fromEntries(
          SHARED_PREFIX_FLAGS.map(([flag, key]) => [
            key,
            flags.positive(flag, true) ?? SHARED_PREFIX_DEFAULTS[key],
          ]),
        ) as unknown as SharedPrefixShape);
  const adapters = flags.number('adapters', { min: 1, max: 200, integer: true });
  const zipfS = flags.number('zipf', { min: 0 });
  const workload: WorkloadSpec =
    tracePath !== undefined
      ? { kind: 'trace', path: tracePath, rateScale: flags.positive('rate-scale') ?? 1 }
      : {
          kind: 'synthetic',
          name,
          ...(ratePerS !== undefined && { ratePerS }),
          ...(adapters !== undefined && { adapters }),
          ...(zipfS !== undefined && { zipfS }),
          ...(sharedPrefix !== undefined && { sharedPrefix }),
        };
  return {
    workload,
    seed: flags.number('seed', { min: 0, integer: true }) ?? 1,
    durationS: flags.positive('duration'),
    warmupS: flags.number('warmup', { min: 0 }),
  };
}
