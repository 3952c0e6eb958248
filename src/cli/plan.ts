/**
 * `kvroute plan`: the router seed's capacity derivation (or, with --preset seed-scheduler, the
 * scheduler seed's budget table) from the catalog and cost model, every input a flag.
 */
import { ENGINE_DEFAULTS } from '../engine/options.ts';
import { curveMfu } from '../model/calibration.ts';
import { gpuByName, modelByName } from '../model/catalog.ts';
import { kvBytesPerToken, mbuOf, replicaSpecProblem, type ReplicaSpec } from '../model/cost.ts';
import {
  type LoadInput,
  planRouter,
  planScheduler,
  type RouterPlan,
  routerPlanJson,
  SEED_LOAD,
  SEED_SCHEDULER,
  type SchedulerPlan,
  schedulerPlanJson,
} from '../model/plan.ts';
import { type PdPlanInput, planPd, SEED_PD } from '../model/pdPlan.ts';
import { planTiers, type TierPlan } from '../model/tierPlan.ts';
import { DEFAULT_CPU_KV_GBPS } from '../engine/connector/offloading.ts';
import { makeReplicaSpec, SEED_REPLICA } from '../model/spec.ts';
import { pdPlanJson, pdPlanText } from './planPd.ts';
import { runPlanFleet } from './planFleet.ts';
import { type Flags, printHelp, readFlags, UsageError } from './args.ts';
import { helpOf } from './options/help.ts';
import { PLAN_OPTIONS, PLAN_PRESETS } from './options/plan.ts';
import { readerOf } from './options/read.ts';
import { specOf } from './options/spec.ts';
import { readProfileFlag } from './engineFlags.ts';

const FLAGS = specOf(PLAN_OPTIONS);

const HELP = `usage: kvroute plan [flags]

The router seed's capacity plan: prefill a hit saves, KV pool fit, fleet size with and without
affinity, the hot-customer load and the spill threshold. Defaults are the seed's.

${helpOf(PLAN_OPTIONS)}`;

/** The typed reader of plan's flags. */
const optionsOf = (flags: Flags) => readerOf(PLAN_OPTIONS, flags);

export async function run(argv: string[]): Promise<number> {
  if (argv.some((a) => /^--(search-fleet|merge-shards)(=|$)/.test(a))) return runPlanFleet(argv);
  const flags = readFlags(argv, FLAGS);
  if (flags === 'help') return printHelp(HELP);
  const option = optionsOf(flags);
  const preset = option('preset') ?? PLAN_PRESETS[0];
  const scheduler = preset === 'seed-scheduler';
  const spec = readSpec(flags, scheduler);
  const model = costModel(spec, option('profile'));
  if (scheduler) {
    const plan = planScheduler(spec, {
      budgets: readBudgets(flags) ?? SEED_SCHEDULER.budgets,
      promptTokens: option('prompt-tokens') ?? SEED_SCHEDULER.promptTokens,
      decodes: option('batch') ?? SEED_SCHEDULER.decodes,
    });
    write(
      option('json')
        ? json(withCostModel(schedulerPlanJson(plan), spec, model))
        : `${model.text}\n${schedulerText(spec, plan)}`,
    );
    return 0;
  }
  const load = readLoad(flags);
  const stepTokens = option('budget') ?? ENGINE_DEFAULTS.budgetTokens;
  if (option('pd')) {
    const pd: PdPlanInput = {
      budgetTokens: stepTokens,
      transferGbps: option('transfer-gbps') ?? SEED_PD.transferGbps,
      transferLatencyMs: option('transfer-latency-ms') ?? SEED_PD.transferLatencyMs,
      tpotSloMs: option('tpot-slo-ms') ?? SEED_PD.tpotSloMs,
    };
    const plan = planPd(spec, load, pd);
    write(option('json') ? json(pdPlanJson(plan)) : pdPlanText(spec, load, pd, plan));
    return 0;
  }
  const plan = planRouter(spec, load, stepTokens);
  const cpuKvGiB = option('cpu-kv-gib');
  const cpuKvGbps = option('cpu-kv-gbps');
  if (cpuKvGbps !== undefined && cpuKvGiB === undefined) {
    throw new UsageError('--cpu-kv-gbps needs --cpu-kv-gib G');
  }
  const tiers =
    cpuKvGiB === undefined
      ? null
      : planTiers(spec, load, plan, {
          cpuKvGiB,
          cpuKvGbps: cpuKvGbps ?? DEFAULT_CPU_KV_GBPS,
          blockSize: ENGINE_DEFAULTS.blockSize,
        });
  write(
    option('json')
      ? json({ ...withCostModel(routerPlanJson(plan), spec, model), ...(tiers && { tiers }) })
      : `${model.text}\n${routerText(spec, load, plan, stepTokens)}${tiers ? `\n\n${tierText(load, tiers)}` : ''}`,
  );
  return 0;
}

/** The two-tier fit, line by line. */
function tierText(load: LoadInput, t: TierPlan): string {
  const held = (n: number | null) =>
    n === null ? 'never' : `${fmt(n)} replica${n === 1 ? '' : 's'}`;
  return [
    `KV fit over two tiers (CPU tier ${fmt(t.cpuKvGiB)} GiB per replica, ${fmt(t.cpuKvGbps)} GB/s to the GPU)`,
    `  CPU tier          = ${fmt(t.cpuTierTokens)} tokens = ${fmt(t.cpuPrefixesPerReplica)} prefixes of ${fmt(load.sharedTokens)}`,
    `  per replica       = ${fmt(t.gpuPrefixesPerReplica)} on the GPU + ${fmt(t.cpuPrefixesPerReplica)} in the CPU tier = ${fmt(t.prefixesPerReplica)} prefixes; all ${fmt(load.prefixes)} ${t.prefixSetFitsOneReplica ? 'fit in one replica' : 'do not fit in one replica'}`,
    `  set held once by  : ${held(t.replicasToHoldSetGpu)} (GPU alone), ${held(t.replicasToHoldSet)} (both tiers)`,
    `  reload a prefix   = ${fmt(load.sharedTokens)} tokens over PCIe = ${fmt(t.reloadMs, 1)} ms, ${fmt(t.reloadShareOfMiss * 100, 1)}% of the ${fmt(t.hitSavesMs)} ms a hit saves: a CPU hit is nearly a GPU hit`,
    ...(t.prefixSetFitsOneReplica
      ? [
          `  every replica can hold the whole set: the seed's reversal condition (the set fits in every pool) holds but for the reload, so affinity saves ${fmt(t.reloadMs, 1)} ms a request, not ${fmt(t.hitSavesMs)}`,
        ]
      : []),
  ].join('\n');
}

/** Which cost model the figures come from, in words (and as JSON for a profile). */
function costModel(
  spec: ReplicaSpec,
  profilePath: string | undefined,
): { text: string; json: object | null } {
  const cal = spec.calibration;
  if (!cal || profilePath === undefined) {
    return {
      text: `Cost model: roofline defaults (${fmt(spec.mfu * 100)}% MFU prefill, ${fmt(spec.mbu * 100)}% MBU decode)`,
      json: null,
    };
  }
  const c = cal.curve;
  const on = cal.measuredOn;
  const lines = [
    `Cost model: profile ${profilePath} (${cal.source})`,
    `  TP=${c.tp} curve: MFU(n) = ${c.mfuMax.toFixed(3)} x n / (n + ${fmt(c.halfTokens, 1)}), MBU ${c.mbu.toFixed(3)}, ${fmt(c.overheadMs, 2)} ms overhead per step`,
  ];
  const here = `${spec.gpu.name} ${spec.weightsDtype}`;
  const there = `${on.gpu} ${on.weightsDtype}`;
  if (here !== there || on.model !== spec.model.name) {
    lines.push(
      `  note: measured on ${modelByName(on.model).displayName}, ${gpuByName(on.gpu).displayName}, ${on.weightsDtype.toUpperCase()} weights; applied here to ${spec.model.displayName}, ${spec.gpu.displayName}, ${spec.weightsDtype.toUpperCase()}`,
    );
  }
  return {
    text: lines.join('\n'),
    json: { profile: profilePath, source: cal.source, measuredOn: on, curve: c },
  };
}

/** The plan's JSON, with a `costModel` key when a profile replaced the roofline defaults. */
function withCostModel<T extends object>(
  planJson: T,
  spec: ReplicaSpec,
  model: { json: object | null },
): T | (T & { costModel: object }) {
  return model.json === null || !spec.calibration
    ? planJson
    : { ...planJson, costModel: model.json };
}

const write = (text: string): void => {
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
};
const json = (value: unknown): string => JSON.stringify(value, null, 2);

function readSpec(flags: Flags, scheduler: boolean): ReplicaSpec {
  const option = optionsOf(flags);
  const tp = option('tp') ?? (scheduler ? 4 : SEED_REPLICA.tp);
  const profile = readProfileFlag(flags, tp);
  if (profile && (flags.has('mfu') || flags.has('mbu'))) {
    throw new UsageError('--profile replaces --mfu and --mbu; give one or the other');
  }
  const spec = makeReplicaSpec({
    model: option('model'),
    gpu: option('gpu') ?? (scheduler ? 'h100-sxm' : undefined),
    tp,
    weightsDtype: option('weights-dtype'),
    kvDtype: option('kv-dtype'),
    mfu: option('mfu') ?? (scheduler ? 1 : undefined),
    mbu: option('mbu') ?? (scheduler ? 1 : undefined),
    profile,
  });
  const problem = replicaSpecProblem(spec);
  if (problem) throw new UsageError(problem);
  return spec;
}

function readLoad(flags: Flags): LoadInput {
  const option = optionsOf(flags);
  const load: LoadInput = {
    rate: option('rate') ?? SEED_LOAD.rate,
    promptTokens: option('prompt-tokens') ?? SEED_LOAD.promptTokens,
    sharedTokens: option('shared-tokens') ?? SEED_LOAD.sharedTokens,
    prefixes: option('prefixes') ?? SEED_LOAD.prefixes,
    outputTokens: option('output-tokens') ?? SEED_LOAD.outputTokens,
    utilization: option('utilization') ?? SEED_LOAD.utilization,
    // The row takes 0 (the scheduler's table); a router plan's decode batch is above 0.
    batch: flags.positive('batch', true) ?? SEED_LOAD.batch,
    hitRate: option('hit-rate') ?? SEED_LOAD.hitRate,
    hotShare: option('hot-share') ?? SEED_LOAD.hotShare,
  };
  if (load.sharedTokens > load.promptTokens) {
    throw new UsageError(
      `--shared-tokens (${load.sharedTokens}) must not exceed --prompt-tokens (${load.promptTokens})`,
    );
  }
  return load;
}

function readBudgets(flags: Flags): number[] | undefined {
  const raw = optionsOf(flags)('budgets');
  if (raw === undefined) return undefined;
  const budgets = raw.split(',').map((s) => Number(s.trim()));
  if (budgets.length === 0 || budgets.some((b) => !Number.isInteger(b) || b < 1)) {
    throw new UsageError(`--budgets must be a comma list of positive integers, got '${raw}'`);
  }
  return budgets;
}

const fmt = (x: number, digits = 0): string =>
  x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

function describe(spec: ReplicaSpec): string {
  const efficiency = spec.calibration
    ? 'calibrated MFU and MBU'
    : `${fmt(spec.mfu * 100)}% MFU prefill, ${fmt(spec.mbu * 100)}% MBU decode`;
  return `${spec.model.displayName}, ${spec.weightsDtype.toUpperCase()} weights, ${spec.kvDtype.toUpperCase()} KV, TP=${spec.tp} ${spec.gpu.displayName}, ${efficiency}`;
}

/** The prefill-per-token line: the seed's formula, or the calibrated step's. */
function prefillLine(spec: ReplicaSpec, p: RouterPlan, stepTokens: number): string {
  const us = `${fmt(p.prefillUsPerToken, 1)} us`;
  const cal = spec.calibration;
  if (cal) {
    const mfu = curveMfu(cal.curve, stepTokens).toFixed(3);
    return `  prefill per token = a ${fmt(stepTokens)}-token step (MFU ${mfu}, ${fmt(cal.curve.overheadMs, 2)} ms overhead) / ${fmt(stepTokens)} = ${us}`;
  }
  const flops = spec.weightsDtype === 'fp8' ? spec.gpu.fp8Flops : spec.gpu.bf16Flops;
  return `  prefill per token = 2 x ${fmt(spec.model.activeParams / 1e9, 2)}e9 / (${spec.tp} x ${fmt((flops ?? spec.gpu.bf16Flops) / 1e12)}e12 x ${spec.mfu}) = ${us}`;
}

function routerText(spec: ReplicaSpec, load: LoadInput, p: RouterPlan, stepTokens: number): string {
  const gb = (bytes: number) => `${fmt(bytes / 1e9, 1)} GB`;
  const overhead = spec.calibration ? `${fmt(spec.calibration.curve.overheadMs, 2)} ms + ` : '';
  const unique = load.promptTokens - load.sharedTokens;
  const L: string[] = [
    describe(spec),
    `Load: ${fmt(load.rate)} req/s, ${fmt(load.promptTokens)}-token prompts, ${fmt(load.sharedTokens)} shared (${fmt(load.prefixes)} prefixes), ${fmt(load.outputTokens)} output tokens, ${fmt(load.utilization * 100)}% utilization target`,
    '',
    'Prefill',
    prefillLine(spec, p, stepTokens),
    `  saved by a hit    = ${fmt(load.sharedTokens)} x ${fmt(p.prefillUsPerToken, 1)} us = ${fmt(p.hitSavesMs)} ms of replica time`,
    `  TTFT compute      = ${fmt(load.promptTokens)} x ${fmt(p.prefillUsPerToken, 1)} us = ${fmt(p.ttftColdMs)} ms cold, ${fmt(unique)} x ${fmt(p.prefillUsPerToken, 1)} us = ${fmt(p.ttftWarmMs)} ms warm`,
    '',
    'KV fit',
    `  KV pool/replica   = (${spec.tp} x (${gb(spec.gpu.hbmBytes)} x ${spec.memoryUtilization} - ${gb(spec.activationReserveBytes)}) - ${gb(p.weightBytesPerGpu * spec.tp)}) / ${fmt(kvBytesPerToken(spec.model, spec.kvDtype))} B = ${fmt(p.kvPoolTokens)} tokens`,
    `  unshared KV       = ${fmt(load.batch)} x (${fmt(unique)} + ${fmt(load.outputTokens / 2)}) = ${fmt(p.unsharedTokens)} tokens`,
    `  room for prefixes = (${fmt(p.kvPoolTokens)} - ${fmt(p.unsharedTokens)}) / ${fmt(load.sharedTokens)} = ${fmt(p.prefixesPerReplica)} prefixes per replica`,
    `  all prefixes      = ${fmt(load.prefixes)} x ${fmt(load.sharedTokens)} = ${fmt(p.prefixSetTokens)} tokens, ${fmt(p.prefixSetPools, 1)}x one pool`,
    '',
    `Decode at batch ${fmt(load.batch)} and ${fmt(p.decodeContextTokens)} tokens of context`,
    `  step              = ${overhead}(${gb(p.weightBytesPerGpu)} + ${fmt(load.batch)} x ${fmt(p.decodeContextTokens)} x ${fmt(kvBytesPerToken(spec.model, spec.kvDtype) / spec.tp)} B) / (${fmt(spec.gpu.hbmBytesPerS / 1e12, 2)}e12 x ${spec.calibration ? mbuOf(spec).toFixed(3) : spec.mbu}) = ${fmt(p.decodeStepMs, 1)} ms`,
    `  replica tok/s     = ${fmt(load.batch)} / ${fmt(p.decodeStepMs, 1)} ms = ${fmt(Math.floor(p.replicaDecodeTokensPerS))}`,
    `  decode demand     = ${fmt(load.rate * load.outputTokens)} / ${fmt(Math.floor(p.replicaDecodeTokensPerS))} = ${fmt(p.decodeReplicaSeconds, 2)} replica-seconds per second`,
    '',
    'Fleet',
    `  no affinity       : prefill ${fmt(p.noAffinity.prefillReplicaSeconds, 2)} + ${fmt(p.decodeReplicaSeconds, 2)} = ${fmt(p.noAffinity.prefillReplicaSeconds + p.decodeReplicaSeconds, 2)} / ${load.utilization} -> ${p.noAffinity.replicas} replicas, ${p.noAffinity.gpus} GPUs`,
    `  affinity, ${fmt(p.affinity.hitRate * 100)}% warm : prefill ${fmt(p.affinity.prefillReplicaSeconds, 2)} + ${fmt(p.decodeReplicaSeconds, 2)} = ${fmt(p.affinity.prefillReplicaSeconds + p.decodeReplicaSeconds, 2)} / ${load.utilization} -> ${p.affinity.replicas} replicas, ${p.affinity.gpus} GPUs`,
    '',
    'Hot customer',
    `  per warm request  = ${fmt(unique)} x ${fmt(p.prefillUsPerToken, 1)} us + ${fmt(load.outputTokens)} / ${fmt(Math.floor(p.replicaDecodeTokensPerS))} = ${fmt(p.hotCustomer.replicaSecondsPerRequest, 2)} replica-seconds`,
    `  one replica at ${fmt(load.utilization * 100)}% serves ${fmt(p.hotCustomer.requestsPerReplica, 2)} req/s; a customer at ${fmt(load.hotShare * 100)}% (${fmt(p.hotCustomer.requestsPerS, 1)} req/s) needs ${fmt(p.hotCustomer.replicasNeeded, 1)} replicas`,
    '',
    'Spill threshold',
    `  the owner keeps a request while its extra queue is under ${fmt(p.spill.tokens)} tokens (${fmt(p.spill.ms)} ms of prefill); past that the request spills and warms a second owner`,
    '',
    `Verdict: ${verdictText(p)}`,
  ];
  return L.join('\n');
}

function verdictText(p: RouterPlan): string {
  const share = `${fmt(p.sharedFraction * 100)}%`;
  if (p.verdict === 'affinity') {
    return `affinity is worth having: ${share} of each prompt is shared (at least a fifth) and the prefix set is ${fmt(p.prefixSetPools, 1)}x one pool, so random routing churns the cache; it needs ${p.affinity.replicas} replicas instead of ${p.noAffinity.replicas}.`;
  }
  const why = p.prefixSetFitsEveryPool
    ? 'the whole prefix set fits in every replica’s pool, so a hit happens everywhere anyway'
    : `only ${share} of each prompt is shared (under about a fifth), so a hit saves little`;
  return `affinity is not worth its imbalance: ${why}; route by least queued tokens.`;
}

function schedulerText(spec: ReplicaSpec, p: SchedulerPlan): string {
  const L = [
    describe(spec),
    `Prompt of ${fmt(SEED_SCHEDULER.promptTokens)} tokens with decodes running; steps at the spec's FLOP rate`,
    '',
    '  budget   step ms   steps to first token',
    ...p.budgets.map(
      (b) =>
        `  ${fmt(b.budget).padStart(6)}   ${fmt(b.stepMs, 1).padStart(7)}   ${b.stepsToFirstToken === null ? 'never (decodes take the whole budget)' : fmt(b.stepsToFirstToken)}`,
    ),
    "  budget: tokens per step; step ms: a step that spends the whole budget; steps to first token: steps until the prompt's last chunk, each decode taking one token per step",
    '',
    `  decode-only step floor (weights only) = ${fmt(p.decodeFloorMs, 1)} ms`,
  ];
  return L.join('\n');
}
