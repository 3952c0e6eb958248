/**
 * `kvroute sim`'s client flags, as the benchmark harnesses send load: a rate ladder or a burst
 * over the workload's prompts (src/workload/shape.ts), the client's in-flight cap, its timeout,
 * and whose metric definitions the summary adds (src/results/harnessMetrics.ts).
 */
import { HARNESSES, type Harness } from '../results/harnessMetrics.ts';
import type { ArrivalShape, LadderStage } from '../workload/shape.ts';
import { type Flags, UsageError } from './args.ts';
import { readerOf } from './options/read.ts';
import { specOf } from './options/spec.ts';
import { int, num, oneOf, options, str } from './options/table.ts';

const LADDER_HELP =
  "stages of R req/s (Poisson) for S seconds, back to back (inference-perf's load.stages; a " +
  "sweep of vllm bench's request rate), over the workload's prompts in order; the run lasts " +
  "their sum; prints each stage's figures";
const DRAIN_HELP =
  'with --rate-ladder: each stage starts S seconds after every request before it has ended, ' +
  "as inference-perf runs its stages (2: its load.interval of 1 s and run_stage's 1 s lead); " +
  'absent, the stages run back to back';
const BURSTINESS_HELP =
  'gamma gaps between arrivals of --rate or of each --rate-ladder stage, shape F, mean 1/rate ' +
  '(vllm bench --burstiness): 1 Poisson, < 1 burstier, > 1 more even; with --rate, the ' +
  "workload's prompts in order at those times";

/**
 * The client's options, one row each, that `kvroute bench` takes too (read by
 * `readSimLoadFlags`); sim's flag spec, `--help` and docs come from here.
 */
// biome-ignore format: one option a line
export const CLIENT_LOAD_OPTIONS = options({
  'rate-ladder': str('RxS,...', LADDER_HELP, { section: 'client (as the benchmark harnesses send)' }),
  burst: int('N', "the workload's first N prompts all at t = 0 (vllm bench at an infinite request rate); the run lasts until they end", { above: 0 }),
  'max-concurrency': int('N', 'at most N requests in flight from the client; an arrival waits for one to end and is timed from its send (vllm bench --max-concurrency)', { above: 0 }),
  'client-timeout': num('S', 'a request not finished S seconds after its send is given up: counted as timeout, and its engine aborts it as a disconnect (its KV freed)', { above: 0, unit: 's' }),
  burstiness: num('F', BURSTINESS_HELP, { above: 0 }),
});

/** The client's options and whose metric definitions the summary adds (sim's). */
// biome-ignore format: one option a line
export const SIM_LOAD_OPTIONS = options({
  ...CLIENT_LOAD_OPTIONS,
  'metrics-as': oneOf(HARNESSES, 'H', '{values}: also print throughput, TTFT and TPOT as that harness defines them (docs/simulator.md)'),
  'drain-stages': num('S', DRAIN_HELP, { min: 0, unit: 's' }),
});

/** The client's flags that `kvroute bench` takes too. */
export const CLIENT_LOAD_FLAGS = specOf(CLIENT_LOAD_OPTIONS);

export interface SimLoadFlags {
  shape?: ArrivalShape;
  maxConcurrency?: number;
  clientTimeoutMs?: number;
  metricsAs?: Harness;
  /** `--drain-stages`: a ladder's stage starts this long after the requests before ended. */
  stageDrainGapMs?: number;
}

/** `R1xS1,R2xS2,...`: each stage a positive rate (req/s) and a positive duration (s). */
export function parseRateLadder(text: string): LadderStage[] {
  const bad = (why: string) =>
    new UsageError(
      `--rate-ladder takes stages RATExSECONDS separated by commas (e.g. 2x60,4x60,8x60); ${why}`,
    );
  const parts = text.split(',');
  return parts.map((part) => {
    const m = /^\s*([^x\s]+)\s*x\s*([^x\s]+)\s*$/.exec(part);
    if (m === null) throw bad(`got '${part}'`);
    const ratePerS = Number(m[1]);
    const durationS = Number(m[2]);
    if (!Number.isFinite(ratePerS) || ratePerS <= 0) throw bad(`rate '${m[1]}' is not > 0`);
    if (!Number.isFinite(durationS) || durationS <= 0) {
      throw bad(`duration '${m[2]}' is not > 0 seconds`);
    }
    return { ratePerS, durationS };
  });
}

/**
 * The flags as plain data; conflicts with the other workload and loop flags are refused.
 * `openLoopCap`: the command's own --concurrency caps an open loop (`kvroute bench`'s) rather
 * than running a closed one (`kvroute sim`'s), so it goes with any arrival shape and is only
 * refused beside --max-concurrency, its other name.
 */
export function readSimLoadFlags(flags: Flags, openLoopCap = false): SimLoadFlags {
  const option = readerOf(SIM_LOAD_OPTIONS, flags);
  const closedLoop = openLoopCap ? [] : ['concurrency'];
  const ladderText = option('rate-ladder');
  const burst = option('burst');
  if (ladderText !== undefined && burst !== undefined) {
    throw new UsageError('--rate-ladder and --burst both set the arrival times; give one');
  }
  const timesFlag = ladderText !== undefined ? '--rate-ladder' : '--burst';
  if (ladderText !== undefined || burst !== undefined) {
    for (const other of ['rate', 'rate-scale', 'duration', ...closedLoop, 'pd']) {
      if (flags.has(other))
        throw new UsageError(`${timesFlag} sets the arrival times; drop --${other}`);
    }
    if (burst !== undefined && (flags.number('warmup', { min: 0 }) ?? 0) > 0) {
      throw new UsageError('--burst sends everything at t = 0: a --warmup would measure nothing');
    }
  }
  const maxConcurrency = option('max-concurrency');
  const clientTimeoutS = option('client-timeout');
  for (const [flag, given] of [
    ['max-concurrency', maxConcurrency !== undefined],
    ['client-timeout', clientTimeoutS !== undefined],
  ] as const) {
    if (!given) continue;
    if (flags.has('pd'))
      throw new UsageError(`--${flag} applies to an aggregated fleet; drop --pd`);
    if (flag === 'max-concurrency' && flags.has('concurrency') && openLoopCap) {
      throw new UsageError('--max-concurrency is --concurrency by vllm bench’s name: give one');
    }
    if (flag === 'max-concurrency' && flags.has('concurrency')) {
      throw new UsageError(
        '--max-concurrency caps an open loop; --concurrency runs a closed one: give one',
      );
    }
  }
  const metricsAs = option('metrics-as');
  const drainGapS = option('drain-stages');
  if (drainGapS !== undefined && ladderText === undefined) {
    throw new UsageError('--drain-stages runs the stages of --rate-ladder one by one; give one');
  }
  const burstiness = readBurstiness(flags, burst !== undefined, closedLoop);
  const shape: ArrivalShape | undefined =
    ladderText !== undefined
      ? {
          kind: 'ladder',
          stages: parseRateLadder(ladderText),
          ...(burstiness !== undefined && { burstiness }),
        }
      : burst !== undefined
        ? { kind: 'burst', requests: burst }
        : burstiness !== undefined
          ? { kind: 'gamma', ratePerS: flags.positive('rate')!, burstiness }
          : undefined;
  return {
    ...(shape !== undefined && { shape }),
    ...(maxConcurrency !== undefined && { maxConcurrency }),
    ...(clientTimeoutS !== undefined && { clientTimeoutMs: clientTimeoutS * 1000 }),
    ...(metricsAs !== undefined && { metricsAs }),
    ...(drainGapS !== undefined && { stageDrainGapMs: drainGapS * 1000 }),
  };
}

/**
 * `--burstiness F` (> 0): it shapes the gaps of --rate or of --rate-ladder's stages, so it
 * needs one of them, and an open loop with gaps (no burst, closed loop or P/D run).
 */
function readBurstiness(
  flags: Flags,
  burst: boolean,
  closedLoop: readonly string[],
): number | undefined {
  const burstiness = readerOf(SIM_LOAD_OPTIONS, flags)('burstiness');
  if (burstiness === undefined) return undefined;
  if (burst) {
    throw new UsageError('--burst sends everything at t = 0: --burstiness has no gaps to shape');
  }
  for (const other of [...closedLoop, 'pd', 'rate-scale']) {
    if (flags.has(other))
      throw new UsageError(`--burstiness shapes open-loop gaps; drop --${other}`);
  }
  if (!flags.has('rate-ladder') && !flags.has('rate')) {
    throw new UsageError('--burstiness shapes the gaps of --rate R or --rate-ladder; give one');
  }
  return burstiness;
}
