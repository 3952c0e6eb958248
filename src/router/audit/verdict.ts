/**
 * The router grades itself: per replica, a sliding window of (predicted cached tokens, reported
 * cached tokens) pairs, one per routed request, judged `ok`, `over-predicts` (the index holds
 * blocks the engine does not) or `under-predicts` (the engine holds blocks the index missed).
 * Pure and clockless: the shells (gateway, endpoint picker, simulator) feed it what each
 * response said, in order.
 *
 * One request misses when |predicted - reported| > max(toleranceBlocks x blockSize,
 * toleranceFraction x promptTokens): an engine recomputes a fully cached prompt's last token
 * (one block less reported than held), and a sub-tolerance difference changes no routing
 * decision. The verdict is the direction with at least `threshold` misses among the last
 * `windowRequests` (the larger count when both have); see bound.ts for the false-alarm bound.
 */
import { auditBound, thresholdFor, type AuditBound } from './bound.ts';
import {
  clampReported,
  exceedsPool,
  type SpeedEvidence,
  smallPool,
  testClaimSpeed,
  windowForPool,
} from './claims.ts';

export type AuditVerdict = 'ok' | 'over-predicts' | 'under-predicts';

/** One routed request, as its response reported it. */
export interface AuditSample {
  /** What the router predicted cached on the replica it chose. */
  predictedTokens: number;
  /** What the engine said it reused (`usage.prompt_tokens_details.cached_tokens`). */
  reportedTokens: number;
  promptTokens: number;
  /** What the shell knows beside the count, to check it against (`claims.ts`). */
  evidence?: AuditEvidence;
}

/** Figures a lying engine cannot fake, when the shell has them. */
export interface AuditEvidence {
  /** The replica's KV pool in blocks (`num_gpu_blocks`). */
  poolBlocks?: number;
  /** Blocks the index holds for the replica now (stored minus removed). */
  indexedBlocks?: number;
  /** The response's speed against the replica's prefill times (`testClaimSpeed`). */
  speed?: SpeedEvidence;
}

export interface AuditOptions {
  blockSize: number;
  /**
   * Requests judged together; default: `windowForPool` of the replica's pool when its first
   * sample gives it, else DEFAULT_AUDIT_WINDOW.
   */
  windowRequests?: number;
  /** Assumed per-request miss rate of a healthy replica, p0 (default 0.05). */
  healthyMismatchRate?: number;
  /** Per-judgment false-alarm budget alpha (default 1e-8); picks the threshold. */
  falseAlarmRate?: number;
  /** Misses of one direction that flag a replica; default: thresholdFor(window, p0, alpha). */
  threshold?: number;
  toleranceBlocks?: number;
  toleranceFraction?: number;
}

export const DEFAULT_AUDIT_WINDOW = 32;
export const DEFAULT_HEALTHY_MISMATCH_RATE = 0.05;
export const DEFAULT_FALSE_ALARM_RATE = 1e-8;
export const DEFAULT_TOLERANCE_BLOCKS = 1;
export const DEFAULT_TOLERANCE_FRACTION = 0.1;

/** A replica's audit as `/router/replicas` shows it. */
export interface AuditState {
  verdict: AuditVerdict;
  /** Sums over the window. */
  predictedTokens: number;
  reportedTokens: number;
  promptTokens: number;
  window: { requests: number; size: number; over: number; under: number; threshold: number };
  /** |predicted - reported| / prompt tokens over the window (hit-rate points, 0..1); null: empty. */
  hitRateError: number | null;
  /** Requests judged since the replica was added (or last reset). */
  judged: number;
  /** What the checks of `claims.ts` found since then. */
  evidence: {
    /** Responses whose speed refuted their claimed hit; those whose speed was tested. */
    refuted: number;
    speedTested: number;
    /** Reported counts above the prompt (or below 0), clamped; non-finite ones, ignored. */
    clamped: number;
    malformed: number;
    /** The index held more blocks than the pool can (`exceedsPool`): removals never sent. */
    poolOverflow: boolean;
    poolBlocks: number | null;
  };
}

/** What one `record` changed. */
export interface AuditChange {
  replica: string;
  verdict: AuditVerdict;
  previous: AuditVerdict;
  changed: boolean;
  miss: -1 | 0 | 1;
  /** What flagged it: the window's counts, or the index overflowing the pool. */
  cause?: 'counts' | 'pool-overflow' | null;
}

/** -1 under-predicted, 0 within tolerance, 1 over-predicted. */
export function classify(
  sample: AuditSample,
  blockSize: number,
  toleranceBlocks = DEFAULT_TOLERANCE_BLOCKS,
  toleranceFraction = DEFAULT_TOLERANCE_FRACTION,
): -1 | 0 | 1 {
  const diff = sample.predictedTokens - sample.reportedTokens;
  const tolerance = Math.max(toleranceBlocks * blockSize, toleranceFraction * sample.promptTokens);
  if (diff > tolerance) return 1;
  if (-diff > tolerance) return -1;
  return 0;
}

class ReplicaWindow {
  readonly predicted: Float64Array;
  readonly reported: Float64Array;
  readonly prompt: Float64Array;
  readonly miss: Int8Array;
  next = 0;
  size = 0;
  over = 0;
  under = 0;
  sumPredicted = 0;
  sumReported = 0;
  sumPrompt = 0;
  judged = 0;
  verdict: AuditVerdict = 'ok';
  refuted = 0;
  speedTested = 0;
  clamped = 0;
  malformed = 0;
  poolOverflow = false;
  poolBlocks: number | null = null;
  readonly threshold: number;

  constructor(n: number, threshold: number) {
    this.threshold = threshold;
    this.predicted = new Float64Array(n);
    this.reported = new Float64Array(n);
    this.prompt = new Float64Array(n);
    this.miss = new Int8Array(n);
  }

  push(s: AuditSample, miss: -1 | 0 | 1): void {
    const n = this.miss.length;
    const at = this.next;
    if (this.size === n) {
      const old = this.miss[at]!;
      if (old === 1) this.over--;
      else if (old === -1) this.under--;
      this.sumPredicted -= this.predicted[at]!;
      this.sumReported -= this.reported[at]!;
      this.sumPrompt -= this.prompt[at]!;
    } else this.size++;
    this.predicted[at] = s.predictedTokens;
    this.reported[at] = s.reportedTokens;
    this.prompt[at] = s.promptTokens;
    this.miss[at] = miss;
    if (miss === 1) this.over++;
    else if (miss === -1) this.under++;
    this.sumPredicted += s.predictedTokens;
    this.sumReported += s.reportedTokens;
    this.sumPrompt += s.promptTokens;
    this.next = (at + 1) % n;
    this.judged++;
  }
}

export class CacheAudit {
  readonly blockSize: number;
  /** The window and threshold of a replica whose pool is unknown (or of every replica, when set). */
  readonly windowRequests: number;
  readonly threshold: number;
  readonly bound: AuditBound;
  readonly #fixedWindow: boolean;
  readonly #fixedThreshold: number | undefined;
  readonly #p0: number;
  readonly #alpha: number;
  readonly #toleranceBlocks: number;
  readonly #toleranceFraction: number;
  readonly #replicas = new Map<string, ReplicaWindow>();

  constructor(options: AuditOptions) {
    const n = options.windowRequests ?? DEFAULT_AUDIT_WINDOW;
    if (!Number.isInteger(n) || n < 1)
      throw new RangeError(`windowRequests must be an integer >= 1, got ${n}`);
    if (!Number.isInteger(options.blockSize) || options.blockSize < 1) {
      throw new RangeError(`blockSize must be an integer >= 1, got ${options.blockSize}`);
    }
    const p0 = options.healthyMismatchRate ?? DEFAULT_HEALTHY_MISMATCH_RATE;
    this.#p0 = p0;
    this.#alpha = options.falseAlarmRate ?? DEFAULT_FALSE_ALARM_RATE;
    this.#fixedWindow = options.windowRequests !== undefined;
    this.#fixedThreshold = options.threshold;
    this.blockSize = options.blockSize;
    this.windowRequests = n;
    this.threshold = options.threshold ?? thresholdFor(n, p0, this.#alpha);
    if (!Number.isInteger(this.threshold) || this.threshold < 1) {
      throw new RangeError(`threshold must be an integer >= 1, got ${this.threshold}`);
    }
    this.bound = auditBound(n, this.threshold, p0);
    this.#toleranceBlocks = options.toleranceBlocks ?? DEFAULT_TOLERANCE_BLOCKS;
    this.#toleranceFraction = options.toleranceFraction ?? DEFAULT_TOLERANCE_FRACTION;
  }

  /**
   * Judges one response; the verdict is recomputed over the replica's window. The reported count
   * is clamped to [0, prompt tokens] first; a non-finite one is counted as malformed and ignored.
   */
  record(replica: string, sample: AuditSample): AuditChange {
    const w = this.#window(replica, sample.evidence?.poolBlocks);
    const previous = w.verdict;
    const ev = sample.evidence;
    if (ev?.poolBlocks !== undefined && ev.poolBlocks >= 1) w.poolBlocks = ev.poolBlocks;
    const report = clampReported(sample.reportedTokens, sample.promptTokens);
    if (report === null) {
      w.malformed++;
      return { replica, verdict: previous, previous, changed: false, miss: 0, cause: null };
    }
    if (report.clamped) w.clamped++;
    const clean: AuditSample = {
      predictedTokens: Math.max(0, Math.min(sample.predictedTokens, sample.promptTokens)),
      reportedTokens: report.tokens,
      promptTokens: sample.promptTokens,
    };
    const miss = this.#judgeOne(w, clean, ev);
    w.push(clean, miss);
    if (
      w.poolBlocks !== null &&
      ev?.indexedBlocks !== undefined &&
      exceedsPool(ev.indexedBlocks, w.poolBlocks)
    ) {
      w.poolOverflow = true;
    }
    w.verdict = w.poolOverflow ? 'over-predicts' : judgeCounts(w.over, w.under, w.threshold);
    const cause =
      w.verdict === 'ok'
        ? null
        : w.poolOverflow && w.over < w.threshold
          ? 'pool-overflow'
          : 'counts';
    return { replica, verdict: w.verdict, previous, changed: w.verdict !== previous, miss, cause };
  }

  /**
   * One request's miss. A claim its speed refutes is read as no hit (the engine computed most
   * of the prompt); on a small pool (`smallPool`) an over-prediction the speed does not confirm
   * is no miss: such a pool churns between the route and the admission.
   */
  #judgeOne(w: ReplicaWindow, s: AuditSample, ev: AuditEvidence | undefined): -1 | 0 | 1 {
    const speed = ev?.speed === undefined ? 'untested' : testClaimSpeed(ev.speed);
    if (speed !== 'untested') w.speedTested++;
    const tol = [this.blockSize, this.#toleranceBlocks, this.#toleranceFraction] as const;
    if (speed === 'refuted') {
      w.refuted++;
      return classify({ ...s, reportedTokens: 0 }, ...tol);
    }
    const miss = classify(s, ...tol);
    if (miss === 1 && w.poolBlocks !== null) {
      if (smallPool(w.poolBlocks, s.promptTokens, this.blockSize)) return 0;
    }
    return miss;
  }

  verdict(replica: string): AuditVerdict {
    return this.#replicas.get(replica)?.verdict ?? 'ok';
  }

  state(replica: string): AuditState {
    const w = this.#replicas.get(replica) ?? new ReplicaWindow(1, this.threshold);
    return {
      verdict: w.verdict,
      predictedTokens: w.sumPredicted,
      reportedTokens: w.sumReported,
      promptTokens: w.sumPrompt,
      window: {
        requests: w.size,
        size: this.#replicas.has(replica) ? w.miss.length : this.windowRequests,
        over: w.over,
        under: w.under,
        threshold: w.threshold,
      },
      hitRateError: w.sumPrompt > 0 ? Math.abs(w.sumPredicted - w.sumReported) / w.sumPrompt : null,
      judged: w.judged,
      evidence: {
        refuted: w.refuted,
        speedTested: w.speedTested,
        clamped: w.clamped,
        malformed: w.malformed,
        poolOverflow: w.poolOverflow,
        poolBlocks: w.poolBlocks,
      },
    };
  }

  /** The replica's index was repaired: what the window held judged the old index. */
  reset(replica: string): void {
    this.#replicas.delete(replica);
  }

  remove(replica: string): void {
    this.#replicas.delete(replica);
  }

  #window(replica: string, poolBlocks: number | undefined): ReplicaWindow {
    let w = this.#replicas.get(replica);
    if (!w) {
      const n =
        this.#fixedWindow || poolBlocks === undefined || !(poolBlocks >= 1)
          ? this.windowRequests
          : windowForPool(poolBlocks);
      const k =
        n === this.windowRequests
          ? this.threshold
          : (this.#fixedThreshold ?? thresholdFor(n, this.#p0, this.#alpha));
      w = new ReplicaWindow(n, k);
      this.#replicas.set(replica, w);
    }
    return w;
  }
}

/** The verdict of a window's miss counts against the threshold. */
export function judgeCounts(over: number, under: number, threshold: number): AuditVerdict {
  if (over >= threshold && over >= under) return 'over-predicts';
  if (under >= threshold) return 'under-predicts';
  return 'ok';
}
