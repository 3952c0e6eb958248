/**
 * `kvroute calibrate`: fits the cost model's coefficients to measurements, from a live server
 * (--url) or a Vidur profile folder (--vidur-profile), and writes the profile file (YAML) that
 * `--profile` on plan, sim and engine reads, plus an HTML report with --report.
 */
import { writeFileSync } from 'node:fs';
import { Agent } from 'undici';
import { liveProfile, measureLive } from '../calibrate/live.ts';
import { writeProfile } from '../calibrate/profileFile.ts';
import { renderCalibrationReport } from '../calibrate/report.ts';
import { calibrateFromVidur, guessFromVidurPath } from '../calibrate/vidur.ts';
import { ENGINE_DEFAULTS } from '../engine/options.ts';
import { discoverModelCard } from '../loadgen/run.ts';
import {
  type CostProfile,
  decodeCostTokensOf,
  type FitObjective,
  GPUS,
  MODELS,
  makeReplicaSpec,
  type ProfileCurve,
  type ReplicaSpec,
  SEED_REPLICA,
} from '../model/index.ts';
import { type Flags, printHelp, readFlags, UsageError } from './args.ts';
import {
  CALIBRATE_OPTIONS,
  DEFAULT_CALIBRATE_BUDGET_S,
  DEFAULT_CALIBRATE_MAX_BATCH,
  DEFAULT_CALIBRATE_OUT,
  DEFAULT_CALIBRATE_REPEATS,
} from './options/calibrate.ts';
import { helpOf } from './options/help.ts';
import { readerOf } from './options/read.ts';
import { specOf } from './options/spec.ts';
import { Progress } from './progress.ts';

const FLAGS = specOf(CALIBRATE_OPTIONS);

const HELP = `usage: kvroute calibrate (--url URL | --vidur-profile DIR) [flags]

Measures step times and fits the cost model's coefficients: MFU as a function of tokens per
step (MFU(n) = mfuMax x n / (n + halfTokens)), MBU, and a fixed per-step overhead. Writes a
profile file for --profile on kvroute plan, sim and engine.

${helpOf(CALIBRATE_OPTIONS)}`;

/** The typed reader of calibrate's flags. */
const optionsOf = (flags: Flags) => readerOf(CALIBRATE_OPTIONS, flags);

export async function run(argv: string[]): Promise<number> {
  const flags = readFlags(argv, FLAGS);
  if (flags === 'help') return printHelp(HELP);
  const option = optionsOf(flags);
  const url = option('url')?.replace(/\/+$/, '');
  const vidur = option('vidur-profile');
  if ((url === undefined) === (vidur === undefined)) {
    throw new UsageError('give one of --url URL or --vidur-profile DIR');
  }
  const fit = option('fit');
  const out = option('out') ?? DEFAULT_CALIBRATE_OUT;
  const profile =
    vidur !== undefined ? fromVidur(flags, vidur, fit) : await fromLive(flags, url!, fit);
  writeProfile(out, profile);
  const reportPath = option('report');
  const command = `kvroute calibrate ${argv.join(' ')}`;
  if (reportPath !== undefined)
    writeFileSync(reportPath, renderCalibrationReport(profile, command));
  if (option('json')) {
    process.stdout.write(`${JSON.stringify(profile, null, 2)}\n`);
    return 0;
  }
  const budgetTokens = option('budget') ?? ENGINE_DEFAULTS.budgetTokens;
  process.stdout.write(`${summary(profile, budgetTokens)}\nprofile: ${out}\n`);
  if (reportPath !== undefined) process.stdout.write(`report: ${reportPath}\n`);
  return 0;
}

function measuredSpec(flags: Flags, model: string, gpu: string, tp: number): ReplicaSpec {
  const option = optionsOf(flags);
  return makeReplicaSpec({
    model,
    gpu,
    tp,
    weightsDtype: option('weights-dtype') ?? (flags.has('vidur-profile') ? 'bf16' : undefined),
    kvDtype: option('kv-dtype'),
  });
}

function fromVidur(flags: Flags, dir: string, fit: FitObjective | undefined): CostProfile {
  const option = optionsOf(flags);
  const guess = guessFromVidurPath(dir);
  const model = option('catalog-model') ?? guess.model;
  const gpu = option('gpu') ?? guess.gpu;
  if (model === undefined) {
    throw new UsageError(
      `--catalog-model is needed: the folder does not name a catalog model (${Object.keys(MODELS).join(', ')})`,
    );
  }
  if (gpu === undefined) {
    throw new UsageError(
      `--gpu is needed: the folder does not name a catalog GPU (${Object.keys(GPUS).join(', ')})`,
    );
  }
  if (option('step-table')) {
    throw new UsageError('--step-table is for --url: it needs mixed steps measured live');
  }
  if (flags.has('tp')) {
    throw new UsageError('--tp is for --url: a Vidur profile has its own TP degrees');
  }
  return calibrateFromVidur({
    dir,
    spec: measuredSpec(flags, model, gpu, 1),
    objective: fit ?? 'minimax',
  });
}

async function fromLive(
  flags: Flags,
  url: string,
  fit: FitObjective | undefined,
): Promise<CostProfile> {
  if (!/^https?:\/\/[^/]+/.test(url)) {
    throw new UsageError(`--url must be http(s)://HOST[:PORT], got '${url}'`);
  }
  if (fit === 'minimax') {
    throw new UsageError(
      '--fit minimax is for Vidur profiles; live timings are fitted by least squares',
    );
  }
  const option = optionsOf(flags);
  const apiKey = option('api-key') ?? null;
  const served = option('model') ?? null;
  const budgetTokens = option('budget') ?? ENGINE_DEFAULTS.budgetTokens;
  const speedup = option('speedup') ?? 1;
  const tp = option('tp') ?? SEED_REPLICA.tp;
  const catalog = option('catalog-model') ?? (await catalogName(url, served, apiKey));
  const spec = measuredSpec(flags, catalog, option('gpu') ?? SEED_REPLICA.gpu, tp);
  const stepTable = option('step-table') === true;
  const progress = new Progress({ command: 'kvroute calibrate', quiet: option('quiet') === true });
  progress.phase('calibrate', { of: 'the probes' });
  const task = progress.task('measuring');
  const controller = new AbortController();
  const onSignal = () => controller.abort();
  process.once('SIGINT', onSignal);
  try {
    const maxPromptTokens = option('max-prompt-tokens');
    const m = await measureLive({
      url,
      model: served,
      apiKey,
      budgetTokens,
      speedup,
      budgetS: option('budget-s') ?? DEFAULT_CALIBRATE_BUDGET_S,
      ...(maxPromptTokens !== undefined && { maxPromptTokens }),
      maxBatch: option('max-batch') ?? DEFAULT_CALIBRATE_MAX_BATCH,
      repeats: option('repeats') ?? DEFAULT_CALIBRATE_REPEATS,
      stepTable,
      seed: option('seed') ?? 0,
      onProgress: (e) => {
        // Off a TTY, a line per measurement (a log of the run); on one, the bar's detail.
        if (e.result !== undefined) progress.record(`calibrate: ${e.label}: ${e.result}`);
        task.update(e.fraction, e.result === undefined ? e.label : `${e.label}: ${e.result}`);
      },
      signal: controller.signal,
    });
    progress.done();
    for (const s of m.skipped) process.stderr.write(`calibrate: skipped ${s}\n`);
    return liveProfile(m, spec, { url, budgetTokens, speedup, stepTable });
  } finally {
    task.end();
    progress.done();
    process.off('SIGINT', onSignal);
  }
}

/** The catalog model for a live server: its served name when the catalog has it. */
async function catalogName(
  url: string,
  served: string | null,
  apiKey: string | null,
): Promise<string> {
  let name = served;
  if (name === null) {
    const agent = new Agent({ connect: { timeout: 5_000 } });
    try {
      name = (await discoverModelCard(url, apiKey, agent)).id;
    } finally {
      await agent.close().catch(() => undefined);
    }
  }
  if (name !== null && name.toLowerCase() in MODELS) return name.toLowerCase();
  throw new UsageError(
    `--catalog-model is needed: ${name === null ? `${url} lists no model` : `'${name}' is not a catalog model`} (${Object.keys(MODELS).join(', ')})`,
  );
}

function summary(profile: CostProfile, budgetTokens: number): string {
  const lines = [`source: ${profile.source}`, `method: ${profile.method}`, ''];
  for (const c of profile.curves) {
    lines.push(
      `TP=${c.tp}: MFU(n) = ${c.mfuMax.toFixed(3)} x n / (n + ${c.halfTokens.toFixed(1)}), MBU ${c.mbu.toFixed(3)}, overhead ${c.overheadMs.toFixed(2)} ms/step` +
        (c.requestOverheadMs > 0 ? `, request overhead ${c.requestOverheadMs.toFixed(2)} ms` : '') +
        (c.fixed.length > 0 ? ` (held at 0: ${c.fixed.join(', ')})` : ''),
      `  ${c.objective} fit: max error ${c.maxErrorPct.toFixed(1)} %, rms ${c.rmsErrorPct.toFixed(1)} %; roofline defaults: max error ${c.rooflineMaxErrorPct.toFixed(1)} %`,
      `  ${'point'.padEnd(52)} ${'measured'.padStart(9)} ${'fitted'.padStart(9)} ${'error'.padStart(8)} ${'roofline'.padStart(9)} ${'error'.padStart(8)}`,
    );
    for (const p of c.points) {
      lines.push(
        `  ${p.label.padEnd(52)} ${p.measuredMs.toFixed(2).padStart(9)} ${p.fittedMs.toFixed(2).padStart(9)} ${signed(p.errorPct).padStart(8)} ${p.rooflineMs.toFixed(2).padStart(9)} ${signed(p.rooflineErrorPct).padStart(8)}`,
      );
    }
    if (c.table) lines.push(...tableSummary(c.table, budgetTokens));
    lines.push('');
  }
  return lines.join('\n');
}

function tableSummary(t: NonNullable<ProfileCurve['table']>, budgetTokens: number): string[] {
  const knots = (xs: number[], ms: number[]) =>
    xs.map((x, i) => `${x}: ${ms[i]!.toFixed(2)}`).join(', ');
  return [
    `  step table (times every step in place of the curve): overhead ${t.overheadMs.toFixed(2)} ms/step, ` +
      `${(t.msPerContextPair * 1e6).toFixed(3)} ms per million context pairs, request overhead ${t.requestOverheadMs.toFixed(2)} ms` +
      (t.requestMsPerPromptToken !== undefined
        ? ` + ${(t.requestMsPerPromptToken * 1000).toFixed(2)} ms per thousand tokens of a text prompt`
        : '') +
      (t.fixed.length > 0 ? ` (held at 0: ${t.fixed.join(', ')})` : ''),
    `    prefill tokens -> ms: ${knots(t.prefillTokens, t.prefillMs)}`,
    `    decode sequences -> ms: ${knots(t.decodeSeqs, t.decodeMs)}`,
    ...(t.pairRateContextTokens !== undefined && t.msPerContextPairAt !== undefined
      ? [
          `    context tokens -> ms per million pairs: ${knots(
            t.pairRateContextTokens,
            t.msPerContextPairAt.map((r) => r * 1e6),
          )} (interpolated; the nearest outside)`,
        ]
      : []),
    ...(t.msPerPromptSample !== undefined
      ? [`    a prompt's last chunk (it samples) adds ${t.msPerPromptSample.toFixed(2)} ms`]
      : []),
    t.perSequencePasses === true
      ? '    one pass per sequence: a step of several prompt chunks costs each chunk alone, summed (the decodes did not batch)'
      : '    one pass per step: a step of several prompt chunks costs their total',
    `    fit: max error ${t.maxErrorPct.toFixed(1)} %, rms ${t.rmsErrorPct.toFixed(1)} %`,
    `    a decode costs ${decodeCostTokensOf(t, budgetTokens).toFixed(1)} prompt tokens of step time (kvroute serve --decode-cost-tokens)`,
  ];
}

const signed = (v: number): string => `${v >= 0 ? '+' : ''}${v.toFixed(1)}%`;
