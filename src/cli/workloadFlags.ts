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
import { type ArrivalShape, shapeDurationMs } from '../workload/shape.ts';

type SharedPrefixFlag =
  | 'num-groups'
  | 'num-prompts-per-group'
  | 'system-prompt-len'
  | 'question-len'
  | 'output-len';

/** inference-perf's shared_prefix parameters: flag and shape key. */
const SHARED_PREFIX_FLAGS: [SharedPrefixFlag, keyof SharedPrefixShape][] = [
  ['num-groups', 'numGroups'],
  ['num-prompts-per-group', 'numPromptsPerGroup'],
  ['system-prompt-len', 'systemPromptLen'],
  ['question-len', 'questionLen'],
  ['output-len', 'outputLen'],
];
import { type Flags, UsageError } from './args.ts';
import { helpOf } from './options/help.ts';
import { readerOf } from './options/read.ts';
import { specOf } from './options/spec.ts';
import { int, num, oneOf, options, str } from './options/table.ts';

const WORKLOAD_HELP =
  '{values} (default {default}). seed: 40 req/s Poisson, 200 customers x 6,000-token prefix + ' +
  '2,000 own tokens, 300 out; hot: one customer at 10 %; low-shared: 15 % shared; groups: 64 x ' +
  '16 prompts, 2,048 system + 128 question, 256 out; multiturn: every turn extends the ' +
  "conversation so far; lora: the seed's load over LoRA adapters lora-0.. (customer c uses c mod " +
  "K), adapters drawn by a Zipf law; shared-prefix: inference-perf's shared_prefix shape (10 " +
  'req/s Poisson); chat: multi-turn, ShareGPT-like log-normal lengths (161 in, 338 out per turn ' +
  'on average, 3.51 turns), each prompt the history so far';

/** What a command says of its own defaults, and the heading `--help` lists the rows under. */
export interface WorkloadDefaults {
  duration: string;
  warmup: string;
  rate?: string;
  seed?: string;
  section?: string;
}

/**
 * The workload's options, one row each, with the command's own defaults as `--help` shows them
 * (the flag spec and the reading are the same for every command).
 */
export function workloadOptions(o: WorkloadDefaults) {
  const d = SHARED_PREFIX_DEFAULTS;
  // biome-ignore format: one option a line
  return options({
    workload: oneOf(WORKLOAD_NAMES, 'NAME', WORKLOAD_HELP, { default: 'seed', ...(o.section !== undefined && { section: o.section }) }),
    'num-groups': int('N', "shared-prefix: groups, each with its own system prompt (inference-perf's num_groups)", { above: 0, default: d.numGroups }),
    'num-prompts-per-group': int('N', 'shared-prefix: questions per group', { above: 0, default: d.numPromptsPerGroup }),
    'system-prompt-len': int('N', "shared-prefix: the group's shared prompt, tokens", { above: 0, default: d.systemPromptLen, unit: 'tokens' }),
    'question-len': int('N', 'shared-prefix: each question, tokens', { above: 0, default: d.questionLen, unit: 'tokens' }),
    'output-len': int('N', 'shared-prefix: each answer, tokens', { above: 0, default: d.outputLen, unit: 'tokens' }),
    adapters: int('K', 'lora: adapters', { min: 1, max: 200, default: DEFAULT_LORA_ADAPTERS }),
    zipf: num('S', 'lora: Zipf exponent of adapter popularity, 0 = uniform', { min: 0, default: DEFAULT_LORA_ZIPF }),
    trace: str('FILE', 'Mooncake JSONL trace instead (timestamp, input_length, output_length, hash_ids of 512-token blocks; text per hash id)'),
    rate: num('R', 'requests/s of a synthetic workload', { above: 0, default: o.rate ?? "the workload's" }),
    'rate-scale': num('X', 'speeds a trace up', { above: 0, default: 1 }),
    duration: num('S', 'workload seconds of arrivals', { above: 0, default: o.duration, unit: 's' }),
    warmup: num('S', 'seconds of arrivals not measured', { min: 0, default: o.warmup, unit: 's' }),
    seed: int('N', o.seed ?? 'workload seed', { min: 0, default: 1 }),
  });
}

/** The rows as read (the defaults shown in `--help` do not change the reading). */
const READ = workloadOptions({ duration: '', warmup: '' });

export const WORKLOAD_FLAGS = specOf(READ);

/** Help lines; `duration`, `warmup` and `rate` give the command's own defaults. */
export function workloadHelp(o: WorkloadDefaults): string {
  return helpOf(workloadOptions(o));
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
  const option = readerOf(READ, flags);
  const tracePath = option('trace');
  if (tracePath !== undefined && flags.has('workload')) {
    throw new UsageError('--trace and --workload are exclusive; give one');
  }
  if (tracePath === undefined && flags.has('rate-scale')) {
    throw new UsageError('--rate-scale applies to --trace; use --rate for a synthetic workload');
  }
  if (tracePath !== undefined && flags.has('rate')) {
    throw new UsageError('--rate applies to synthetic workloads; use --rate-scale with --trace');
  }
  const ratePerS = option('rate') ?? defaults.ratePerS;
  const name = option('workload') ?? defaults.workload ?? 'seed';
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
            option(flag) ?? SHARED_PREFIX_DEFAULTS[key],
          ]),
        ) as unknown as SharedPrefixShape);
  const adapters = option('adapters');
  const zipfS = option('zipf');
  const workload: WorkloadSpec =
    tracePath !== undefined
      ? { kind: 'trace', path: tracePath, rateScale: option('rate-scale') ?? 1 }
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
    seed: option('seed') ?? 1,
    durationS: option('duration'),
    warmupS: option('warmup'),
  };
}

/**
 * The workload with the client's arrival shape (kvroute sim and bench alike): a ladder lasts its
 * stages; a burst, until its requests end; both default to no warm-up. A rate with burstiness
 * runs as --rate does, for `gammaDurationS` when no --duration is given.
 */
export function withArrivalShape(
  read: WorkloadFlags,
  shape: ArrivalShape | undefined,
  gammaDurationS: number | undefined,
): WorkloadFlags {
  if (shape === undefined) return read;
  return {
    ...read,
    workload: { ...read.workload, shape },
    durationS:
      shape.kind === 'ladder'
        ? shapeDurationMs(shape) / 1000
        : shape.kind === 'gamma'
          ? (read.durationS ?? gammaDurationS)
          : undefined,
    warmupS: read.warmupS ?? (shape.kind === 'gamma' ? undefined : 0),
  };
}
