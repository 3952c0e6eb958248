/**
 * A measured table of step times, for engines whose steps do not follow the roofline (llama.cpp
 * on a CPU: no compute/memory max, and a decode token costs far more than a prompt token, since
 * it computes the vocabulary's logits and samples). A step of p prompt tokens, d decodes and
 * `pairs` attention (token, context token) pairs takes
 *
 *   stepMs = overheadMs + P(p) + D(d) + msPerContextPair x pairs
 *
 * P and D are piecewise linear through measured knots (P(0) = D(0) = 0; past the last knot the
 * last segment goes on). `pairs` is what attention adds over a chunk computed from position 0:
 * a prompt chunk of n tokens after c cached or computed ones reads n x c pairs more (the n^2 / 2
 * inside the chunk is in P); a decode at context c reads c + 1. The table is fitted by
 * `fitStepTable` to the same observations the roofline curve is (src/calibrate/live.ts): every
 * point is linear in the knot values, the overheads and the pair rate, so it is one weighted
 * least-squares solve; the knots are then made non-decreasing. Pure: no I/O.
 */
import { Matrix, SingularValueDecomposition, solve } from 'ml-matrix';

export interface StepTable {
  /** Prompt tokens per step at the knots, ascending, > 0. */
  prefillTokens: number[];
  /** P at those knots, ms. */
  prefillMs: number[];
  /** Decode sequences per step at the knots, ascending, > 0. */
  decodeSeqs: number[];
  /** D at those knots, ms. */
  decodeMs: number[];
  /** ms per attention (token, context token) pair beyond a chunk's own. */
  msPerContextPair: number;
  /** Fixed cost of every step that computes anything, ms. */
  overheadMs: number;
  /**
   * The engine runs each sequence of a step as a forward pass of its own (llama.cpp with a KV
   * stream per sequence: `llama_decode` splits a batch into micro-batches of consecutive
   * sequence ids), so a step's prompt chunks cost P of each chunk, summed, not P of their total.
   * Absent: false (one pass per step, as vLLM runs it).
   */
  perSequencePasses?: boolean;
  /**
   * Contexts (tokens before a chunk) the pair rate was measured at, ascending, > 0; with
   * `msPerContextPairAt` of the same length. A CPU's attention per pair grows with the context
   * (llama.cpp on the tiny model: about 0.4, 1.2 and 2 ms per thousand pairs at 512, 768 and 1,024
   * tokens), so a chunk after c tokens is charged its pairs at the rate interpolated at c
   * (linear between these, the nearest one's outside). Absent: `msPerContextPair` everywhere.
   */
  pairRateContextTokens?: number[];
  /** ms per pair at `pairRateContextTokens`. */
  msPerContextPairAt?: number[];
  /**
   * What a prompt chunk that ends its prompt adds, ms: it computes its last token's logits and
   * samples the first output token, as a decode does, where a chunk in the middle of a prompt
   * computes no logits (llama.cpp on the tiny model: such chunks ran 1.3 to 1.8x the table
   * without it). Absent: 0 (every chunk costs P alone).
   */
  msPerPromptSample?: number;
  /**
   * A prompt chunk's attention over its context is computed in tiles of this many query rows, a
   * partial tile at the cost of a whole one (llama.cpp's CPU flash-attention kernel tiles 64
   * rows): a chunk of n >= tile tokens is charged its context pairs for ceil(n / tile) x tile
   * rows (on the tiny model a 65-token chunk after 1,024 tokens read as 128 rows, a 129-token one
   * as 192). Absent: n rows, as a GPU's kernels nearly are.
   */
  attentionRowTile?: number;
  /**
   * With `attentionRowTile`: a chunk under one tile takes a per-row path instead (llama.cpp's
   * vector kernel), each of its pairs this many times the tiled rate (the tiny model: about
   * 3.7). Absent: 1.
   */
  shortChunkPairFactor?: number;
}

/** The table's attention tiling: what `attentionRows` reads. */
export type RowTiling = Pick<StepTable, 'attentionRowTile' | 'shortChunkPairFactor'>;

/**
 * The query rows a prompt chunk of `tokens` tokens is charged its context pairs for: `tokens`,
 * or with `attentionRowTile` whole tiles (a chunk under one tile at `shortChunkPairFactor`).
 */
export function attentionRows(t: RowTiling, tokens: number): number {
  const tile = t.attentionRowTile;
  if (tile === undefined || !(tokens > 0)) return tokens;
  if (tokens < tile) return tokens * (t.shortChunkPairFactor ?? 1);
  return Math.ceil(tokens / tile) * tile;
}

/** What a step computes, as the cost model sees it (`StepWork`, optionally with its entries). */
export interface TableStepWork {
  prefillTokens: number;
  decodeTokens: number;
  kvTokensRead: number;
  /** The step's entries (a scheduler plan has them): tokens and context per request. */
  entries?: readonly { kind: 'decode' | 'prefill'; tokens: number; contextTokens: number }[];
  /** Prompt chunks of the step that end their prompt (each samples a first token). */
  promptSamples?: number;
}

/**
 * Attention pairs beyond each chunk's own: from the entries when given; otherwise a step of one
 * prompt chunk (tokens x its context) or of decodes only (their contexts, summed). A mixed step
 * without entries counts its KV read once per context token, as decodes do. A prompt chunk's
 * rows are `attentionRows` of the table's tiling (none given: its tokens).
 */
export function contextPairs(work: TableStepWork, tiling: RowTiling = {}): number {
  if (work.entries !== undefined) {
    let pairs = 0;
    for (const e of work.entries) pairs += entryPairs(tiling, e);
    return pairs;
  }
  if (work.decodeTokens === 0) {
    return attentionRows(tiling, work.prefillTokens) * work.kvTokensRead;
  }
  return work.kvTokensRead;
}

/** One entry's context pairs: a decode reads its context and itself, a chunk its context. */
function entryPairs(
  tiling: RowTiling,
  e: { kind: 'decode' | 'prefill'; tokens: number; contextTokens: number },
): number {
  return e.kind === 'decode'
    ? e.tokens * (e.contextTokens + e.tokens)
    : attentionRows(tiling, e.tokens) * e.contextTokens;
}

/** The pair rate at a context of `contextTokens` tokens, ms per pair. */
export function pairRateAt(
  t: Pick<StepTable, 'msPerContextPair' | 'pairRateContextTokens' | 'msPerContextPairAt'>,
  contextTokens: number,
): number {
  const cs = t.pairRateContextTokens;
  const rs = t.msPerContextPairAt;
  if (cs === undefined || rs === undefined || cs.length === 0) return t.msPerContextPair;
  if (contextTokens <= cs[0]!) return rs[0]!;
  for (let i = 1; i < cs.length; i++) {
    if (contextTokens <= cs[i]!) {
      const f = (contextTokens - cs[i - 1]!) / (cs[i]! - cs[i - 1]!);
      return rs[i - 1]! + f * (rs[i]! - rs[i - 1]!);
    }
  }
  return rs[rs.length - 1]!;
}

/**
 * What attention over the context adds to a step, ms: `msPerContextPair x contextPairs(work)`,
 * or, where the table holds the rate by context, each entry's pairs at the rate at its context
 * (without entries: a prompt-only step's at its context, decodes' at their mean context).
 */
export function contextPairMs(t: StepTable, work: TableStepWork): number {
  if (t.pairRateContextTokens === undefined || t.msPerContextPairAt === undefined) {
    return t.msPerContextPair * contextPairs(work, t);
  }
  if (work.entries !== undefined) {
    let ms = 0;
    for (const e of work.entries) ms += entryPairs(t, e) * pairRateAt(t, e.contextTokens);
    return ms;
  }
  const context =
    work.decodeTokens === 0 ? work.kvTokensRead : work.kvTokensRead / work.decodeTokens;
  return contextPairs(work, t) * pairRateAt(t, context);
}

/**
 * Weights of the knots' values in a piecewise-linear function at x through (0, 0) and the
 * knots; past the last knot the last segment is extended. Sum of weights x values = f(x).
 */
export function knotWeights(knots: readonly number[], x: number): number[] {
  const w = new Array<number>(knots.length).fill(0);
  if (x <= 0 || knots.length === 0) return w;
  let i = 0;
  while (i < knots.length - 1 && knots[i]! < x) i++;
  // Segment (lo, hi] with hi = knots[i]; lo = the knot before it, or 0.
  if (x > knots[knots.length - 1]!) i = knots.length - 1;
  const hi = knots[i]!;
  const lo = i > 0 ? knots[i - 1]! : 0;
  const t = (x - lo) / (hi - lo);
  w[i] = t;
  if (i > 0) w[i - 1] = 1 - t;
  return w;
}

const pl = (knots: readonly number[], values: readonly number[], x: number): number =>
  knotWeights(knots, x).reduce((sum, w, i) => sum + w * values[i]!, 0);

/**
 * The prompt-chunk sizes P is charged at: the step's prompt tokens as one, or, with
 * `perSequencePasses` and the step's entries known, each prefill entry's own.
 */
export function prefillChunks(
  t: Pick<StepTable, 'perSequencePasses'>,
  work: TableStepWork,
): number[] {
  if (t.perSequencePasses === true && work.entries !== undefined) {
    const chunks: number[] = [];
    for (const e of work.entries) if (e.kind === 'prefill' && e.tokens > 0) chunks.push(e.tokens);
    return chunks;
  }
  return work.prefillTokens > 0 ? [work.prefillTokens] : [];
}

/** One step's time from the table, ms (0 for a step that computes nothing; never below 0). */
export function tableStepMs(t: StepTable, work: TableStepWork): number {
  if (work.prefillTokens + work.decodeTokens === 0) return 0;
  let prefillMs = 0;
  for (const tokens of prefillChunks(t, work))
    prefillMs += pl(t.prefillTokens, t.prefillMs, tokens);
  const ms =
    t.overheadMs +
    prefillMs +
    pl(t.decodeSeqs, t.decodeMs, work.decodeTokens) +
    contextPairMs(t, work) +
    (t.msPerPromptSample === undefined ? 0 : t.msPerPromptSample * (work.promptSamples ?? 0));
  return Math.max(0, ms);
}

/** A measurement the table is fitted to: one or more steps, maybe after a request overhead. */
export interface TableObservation {
  label: string;
  steps: TableStepWork[];
  /** A per-request overhead precedes the steps (a time to first token). */
  perRequest: boolean;
  measuredMs: number;
}

export interface TableFit {
  table: StepTable;
  /** Per-request overhead fitted alongside (TTFT points only), ms; not part of a step. */
  requestOverheadMs: number;
  /** Unknowns held at 0: the data could not tell them apart, or they came out negative. */
  fixed: string[];
  /** (table - measured) / measured per observation, percent, in the given order. */
  errorsPct: number[];
  maxErrorPct: number;
  rmsErrorPct: number;
}

export class TableFitError extends Error {
  readonly code = 'ERR_FIT';
}

/** `fitStepTable`'s options: what is measured apart and held, and which columns it fits. */
export interface TableFitOptions {
  errorFloorMs?: number;
  /**
   * The pair rate measured apart (a chunk after a cached prefix against the same chunk cold,
   * paired: `contextPairRate`), held at this value instead of fitted. A least-squares fit
   * over a few noisy times to first token cannot tell the pair rate from the knots and the
   * overheads well: on a busy host it came out a thousandth of the paired difference.
   */
  msPerContextPair?: number;
  /** The table's `perSequencePasses`: multi-chunk steps in the observations count so. */
  perSequencePasses?: boolean;
  /**
   * The pair rate measured at several contexts (`contextPairRates`), held like
   * `msPerContextPair` (which then stays the table's single rate for older readers).
   */
  pairRatesByContext?: { contextTokens: number[]; msPerPair: number[] };
  /**
   * Fit `msPerPromptSample` from the observations' `promptSamples` (a prompt's last chunk):
   * a multi-chunk prompt against one chunk of the same size separates it from the knots, a
   * mixed step (no request overhead) from the request overhead.
   */
  promptSamples?: boolean;
  /** The table's attention tiling, measured apart (src/calibrate/rowTile.ts), held. */
  tiling?: RowTiling;
  /**
   * The request overhead measured apart (src/calibrate/requestOverhead.ts: each TTFT less the
   * server's own prefill time), held: fitted, it trades against the prefill knots.
   */
  requestOverheadMs?: number;
}

/**
 * The least-squares unknowns, in column order: the request overhead (0), the step overhead
 * (1), the pair rate (2), the prefill knots, the decode knots, then the prompt-sample cost.
 */
interface FitColumns {
  names: string[];
  prefillKnots: number[];
  decodeKnots: number[];
  /** Whether the prompt-sample cost is a column (the last). */
  sampleCol: boolean;
  sampleJ: number;
  /** One past the last knot's column. */
  knotsEnd: number;
}

type PairRates = Pick<
  StepTable,
  'msPerContextPair' | 'pairRateContextTokens' | 'msPerContextPairAt'
>;

/**
 * Fits a table to observations by weighted least squares over relative errors (a per-request
 * point's relative to max(measured, errorFloorMs), as the curve fit does). Knots are the
 * distinct prompt-chunk sizes and decode batch sizes the observations' steps have. The request
 * overhead, the step overhead and the pair rate are held at 0 when the data cannot separate
 * them (the step overhead needs a mixed step: a prompt chunk sharing a step with decodes) or
 * when they come out negative; the step overhead (then the sample cost) also where it would
 * push a knot below zero.
 */
export function fitStepTable(
  observations: readonly TableObservation[],
  options: TableFitOptions = {},
): TableFit {
  const tiling = options.tiling ?? {};
  const passes = { perSequencePasses: options.perSequencePasses === true };
  const good = observations.filter((o) => o.measuredMs > 0 && o.steps.length > 0);
  if (good.length < 2) {
    throw new TableFitError(`need at least 2 measured points, got ${good.length}`);
  }
  const cols = fitColumns(good, passes, options.promptSamples === true);
  const rows = good.map((o) => designRow(cols, o, passes, tiling));
  const floor = options.errorFloorMs ?? 0;
  const scales = good.map((o) => (o.perRequest ? Math.max(o.measuredMs, floor) : o.measuredMs));
  const held = initiallyHeld(cols, rows, options);
  const rates = heldPairRates(options);
  // What the held pair rate already accounts for, taken off each point before the solve.
  const pairMs = good.map((o) => heldPairMs(o, options, rates, tiling));
  const measuredOverhead = options.requestOverheadMs;
  const b = good.map(
    (o, i) =>
      (o.measuredMs - pairMs[i]! - (o.perRequest ? (measuredOverhead ?? 0) : 0)) / scales[i]!,
  );
  const x = solveHolding(cols, rows, scales, b, held, options);
  const table = tableOf(cols, x, passes, rates, options);
  const requestOverheadMs = x[0]!;
  const errorsPct = good.map((o) => {
    let ms = o.perRequest ? requestOverheadMs : 0;
    for (const s of o.steps) ms += tableStepMs(table, s);
    return ((ms - o.measuredMs) / o.measuredMs) * 100;
  });
  const pairRateGiven =
    options.msPerContextPair !== undefined || options.pairRatesByContext !== undefined;
  return {
    table,
    requestOverheadMs,
    fixed: [...held]
      .filter((j) => !(j === 2 && pairRateGiven))
      .filter((j) => !(j === 0 && measuredOverhead !== undefined))
      .sort()
      .map((j) => cols.names[j]!),
    errorsPct,
    maxErrorPct: Math.max(...errorsPct.map(Math.abs)),
    rmsErrorPct: Math.sqrt(errorsPct.reduce((s, e) => s + e * e, 0) / errorsPct.length),
  };
}

/** The unknowns the observations' steps call for: their distinct chunk and batch sizes. */
function fitColumns(
  good: readonly TableObservation[],
  passes: { perSequencePasses: boolean },
  sampleCol: boolean,
): FitColumns {
  const prefillKnots = distinct(
    good.flatMap((o) => o.steps.flatMap((s) => prefillChunks(passes, s))),
  );
  const decodeKnots = distinct(good.flatMap((o) => o.steps.map((s) => s.decodeTokens)));
  const names = [
    'requestOverheadMs',
    'overheadMs',
    'msPerContextPair',
    ...prefillKnots.map((k) => `prefill ${k}`),
    ...decodeKnots.map((k) => `decode ${k}`),
    ...(sampleCol ? ['msPerPromptSample'] : []),
  ];
  const sampleJ = names.length - 1;
  const knotsEnd = 3 + prefillKnots.length + decodeKnots.length;
  return { names, prefillKnots, decodeKnots, sampleCol, sampleJ, knotsEnd };
}

/** One observation's row: how much of each unknown its steps add up to. */
function designRow(
  cols: FitColumns,
  o: TableObservation,
  passes: { perSequencePasses: boolean },
  tiling: RowTiling,
): number[] {
  const { prefillKnots, decodeKnots, sampleCol, sampleJ } = cols;
  const r = new Array<number>(cols.names.length).fill(0);
  if (o.perRequest) r[0] = 1;
  for (const s of o.steps) {
    if (s.prefillTokens + s.decodeTokens === 0) continue;
    r[1]! += 1;
    r[2]! += contextPairs(s, tiling);
    for (const chunk of prefillChunks(passes, s)) {
      knotWeights(prefillKnots, chunk).forEach((w, i) => {
        r[3 + i]! += w;
      });
    }
    knotWeights(decodeKnots, s.decodeTokens).forEach((w, i) => {
      r[3 + prefillKnots.length + i]! += w;
    });
    if (sampleCol) r[sampleJ]! += s.promptSamples ?? 0;
  }
  return r;
}

/**
 * The columns held before the first solve: those nothing exercises (at 0), and the request
 * overhead and pair rate when they were measured apart (checked here).
 */
function initiallyHeld(
  cols: FitColumns,
  rows: readonly number[][],
  options: TableFitOptions,
): Set<number> {
  const held = new Set<number>();
  for (let j = 0; j < 3; j++) if (rows.every((r) => r[j] === 0)) held.add(j);
  if (cols.sampleCol && rows.every((r) => r[cols.sampleJ] === 0)) held.add(cols.sampleJ);
  const measuredOverhead = options.requestOverheadMs;
  if (measuredOverhead !== undefined) {
    if (!(measuredOverhead >= 0)) {
      throw new TableFitError(`requestOverheadMs must be >= 0, got ${measuredOverhead}`);
    }
    held.add(0);
  }
  const pairRate = options.msPerContextPair;
  if (pairRate !== undefined) {
    if (!(pairRate >= 0)) throw new TableFitError(`msPerContextPair must be >= 0, got ${pairRate}`);
    held.add(2);
  }
  const byContext = options.pairRatesByContext;
  if (byContext !== undefined) {
    const problem = pairRatesProblem(byContext.contextTokens, byContext.msPerPair);
    if (problem !== null) throw new TableFitError(problem);
    held.add(2);
  }
  return held;
}

/** The table's pair-rate fields from the rates measured apart (0 when none was). */
function heldPairRates(options: TableFitOptions): PairRates {
  const byContext = options.pairRatesByContext;
  return {
    msPerContextPair: options.msPerContextPair ?? 0,
    ...(byContext !== undefined && {
      pairRateContextTokens: [...byContext.contextTokens],
      msPerContextPairAt: [...byContext.msPerPair],
    }),
  };
}

/** What a held pair rate costs an observation's steps, ms. */
function heldPairMs(
  o: TableObservation,
  options: TableFitOptions,
  rates: PairRates,
  tiling: RowTiling,
): number {
  if (options.pairRatesByContext === undefined) {
    return (options.msPerContextPair ?? 0) * rowsPairs(o, tiling);
  }
  return o.steps.reduce(
    (sum, s) =>
      s.prefillTokens + s.decodeTokens === 0
        ? sum
        : sum + contextPairMs({ ...emptyTable, ...rates, ...tiling }, s),
    0,
  );
}

/** The scaled system over the columns not held, and whether it is rank deficient. */
function fitSystem(
  rows: readonly number[][],
  scales: readonly number[],
  columns: number,
  heldNow: Set<number>,
) {
  const free = Array.from({ length: columns }, (_, j) => j).filter((j) => !heldNow.has(j));
  const colScale = free.map((j) => Math.hypot(...rows.map((r) => r[j]!)) || 1);
  const a = rows.map((r, i) => free.map((j, k) => r[j]! / colScale[k]! / scales[i]!));
  const m = new Matrix(a);
  const sv = new SingularValueDecomposition(m, { autoTranspose: true }).diagonal;
  const deficient = sv.length < free.length || sv[sv.length - 1]! < sv[0]! * 1e-9;
  return { free, colScale, m, deficient };
}

/**
 * Solves, holding one more unknown at 0 (adding it to `held`) while the system is rank
 * deficient, an unknown comes out negative, or a shared column pushes a knot below zero.
 * Returns every column's value, the held ones at their held values.
 */
function solveHolding(
  cols: FitColumns,
  rows: readonly number[][],
  scales: readonly number[],
  b: readonly number[],
  held: Set<number>,
  options: TableFitOptions,
): number[] {
  const { names, sampleCol, sampleJ, knotsEnd } = cols;
  // Dropped first when the system is rank deficient: the step overhead, the request overhead,
  // the pair rate.
  const dropOrder = sampleCol ? [1, sampleJ, 0, 2] : [1, 0, 2];
  for (;;) {
    const { free, colScale, m, deficient } = fitSystem(rows, scales, names.length, held);
    const droppable = dropOrder.filter((j) => !held.has(j));
    if (deficient) {
      if (droppable.length === 0) {
        throw new TableFitError(
          'the measurements do not determine the table: measure more prompt lengths and batch sizes',
        );
      }
      // The first unknown whose hold makes the rest determined (prompts of one chunk only
      // cannot tell the request overhead from the step overhead); else the first in order.
      const enough = droppable.find(
        (j) => !fitSystem(rows, scales, names.length, new Set([...held, j])).deficient,
      );
      held.add(enough ?? droppable[0]!);
      continue;
    }
    const solved = solve(m, Matrix.columnVector([...b]), true).to1DArray();
    const x = new Array<number>(names.length).fill(0);
    x[0] = options.requestOverheadMs ?? 0;
    x[2] = options.msPerContextPair ?? 0;
    free.forEach((j, k) => {
      x[j] = solved[k]! / colScale[k]!;
    });
    const negative = droppable.filter((j) => x[j]! < 0);
    if (negative.length === 0) {
      // A knot below zero: a column every step shares (the step overhead, then the sample
      // cost) took more than its share from a few noisy mixed steps; it is held at 0 instead
      // of the knots being clamped after the solve.
      const knotBelowZero = x.some((v, j) => j >= 3 && j < knotsEnd && v < -1e-9);
      const culprit = [1, ...(sampleCol ? [sampleJ] : [])].find((j) => !held.has(j) && x[j]! > 0);
      if (!knotBelowZero || culprit === undefined) return x;
      held.add(culprit);
      continue;
    }
    held.add(negative.reduce((worst, j) => (x[j]! < x[worst]! ? j : worst)));
  }
}

/** The fitted table: knots made non-decreasing and at least 0, the held fields carried over. */
function tableOf(
  cols: FitColumns,
  x: readonly number[],
  passes: { perSequencePasses: boolean },
  rates: PairRates,
  options: TableFitOptions,
): StepTable {
  const { prefillKnots, decodeKnots } = cols;
  const tiling = options.tiling ?? {};
  return {
    prefillTokens: prefillKnots,
    prefillMs: atLeastZero(nonDecreasing(prefillKnots.map((_, i) => x[3 + i]!))),
    decodeSeqs: decodeKnots,
    decodeMs: atLeastZero(
      nonDecreasing(decodeKnots.map((_, i) => x[3 + prefillKnots.length + i]!)),
    ),
    msPerContextPair: x[2]!,
    overheadMs: x[1]!,
    ...(passes.perSequencePasses && { perSequencePasses: true }),
    ...(options.pairRatesByContext !== undefined && {
      pairRateContextTokens: rates.pairRateContextTokens,
      msPerContextPairAt: rates.msPerContextPairAt,
    }),
    ...(cols.sampleCol && { msPerPromptSample: x[cols.sampleJ]! }),
    ...(tiling.attentionRowTile !== undefined && { attentionRowTile: tiling.attentionRowTile }),
    ...(tiling.shortChunkPairFactor !== undefined && {
      shortChunkPairFactor: tiling.shortChunkPairFactor,
    }),
  };
}

const emptyTable: StepTable = {
  prefillTokens: [],
  prefillMs: [],
  decodeSeqs: [],
  decodeMs: [],
  msPerContextPair: 0,
  overheadMs: 0,
};

/** Context pairs of an observation's computing steps, as the fit's pair column counts them. */
const rowsPairs = (o: TableObservation, tiling: RowTiling): number =>
  o.steps.reduce(
    (sum, s) => (s.prefillTokens + s.decodeTokens === 0 ? sum : sum + contextPairs(s, tiling)),
    0,
  );

/** Why a pair rate by context cannot be used, or null. */
export function pairRatesProblem(contexts: unknown, rates: unknown): string | null {
  if (!Array.isArray(contexts) || !Array.isArray(rates) || contexts.length !== rates.length) {
    return 'pairRateContextTokens and msPerContextPairAt must be lists of the same length';
  }
  if (contexts.length === 0) return 'pairRateContextTokens must not be empty';
  for (let i = 0; i < contexts.length; i++) {
    const c = contexts[i];
    if (typeof c !== 'number' || !(c > 0) || (i > 0 && !(c > contexts[i - 1]))) {
      return 'pairRateContextTokens must be ascending numbers > 0';
    }
    if (typeof rates[i] !== 'number' || !(rates[i] >= 0) || !Number.isFinite(rates[i])) {
      return 'msPerContextPairAt must be numbers >= 0';
    }
  }
  return null;
}

/**
 * The observations with each prompt's sampling chunk marked (`promptSamples`): a time to first
 * token ends with its prompt's last chunk; a step measured inside a stream that computes prompt
 * tokens is a one-chunk prompt arriving (calibrate's mixed probes), which samples too.
 */
export function markPromptSamples(observations: readonly TableObservation[]): TableObservation[] {
  return observations.map((o) => {
    let last = -1;
    o.steps.forEach((s, i) => {
      if (s.prefillTokens > 0) last = i;
    });
    return {
      ...o,
      steps: o.steps.map((s, i) =>
        s.prefillTokens > 0 && (!o.perRequest || i === last) ? { ...s, promptSamples: 1 } : s,
      ),
    };
  });
}

/**
 * The closest non-decreasing sequence in least squares (pool adjacent violators): a larger step
 * never costs less. Noise (a busy machine) can make a measured knot cost more than the next.
 */
export function nonDecreasing(values: readonly number[]): number[] {
  const blocks: { sum: number; n: number }[] = [];
  for (const v of values) {
    blocks.push({ sum: v, n: 1 });
    while (blocks.length > 1) {
      const last = blocks[blocks.length - 1]!;
      const prev = blocks[blocks.length - 2]!;
      if (prev.sum / prev.n <= last.sum / last.n) break;
      prev.sum += last.sum;
      prev.n += last.n;
      blocks.pop();
    }
  }
  return blocks.flatMap((b) => new Array<number>(b.n).fill(b.sum / b.n));
}

/** No step part costs less than nothing (noise on a busy host can push a knot below 0). */
const atLeastZero = (xs: number[]): number[] => xs.map((v) => Math.max(0, v));

function distinct(xs: number[]): number[] {
  return [...new Set(xs.filter((x) => x > 0))].sort((a, b) => a - b);
}

/** Why a table read from a file cannot be used, or null. */
export function stepTableProblem(t: StepTable): string | null {
  const pairs: [string, number[], string, number[]][] = [
    ['prefillTokens', t.prefillTokens, 'prefillMs', t.prefillMs],
    ['decodeSeqs', t.decodeSeqs, 'decodeMs', t.decodeMs],
  ];
  for (const [kName, knots, vName, values] of pairs) {
    if (!Array.isArray(knots) || !Array.isArray(values) || knots.length !== values.length) {
      return `${kName} and ${vName} must be lists of the same length`;
    }
    for (let i = 0; i < knots.length; i++) {
      const k = knots[i];
      if (typeof k !== 'number' || !(k > 0) || (i > 0 && !(k > knots[i - 1]!))) {
        return `${kName} must be ascending numbers > 0`;
      }
      if (typeof values[i] !== 'number' || !Number.isFinite(values[i])) {
        return `${vName} must be numbers`;
      }
    }
  }
  if (t.prefillTokens.length === 0) return 'prefillTokens must not be empty';
  for (const f of ['msPerContextPair', 'overheadMs'] as const) {
    if (typeof t[f] !== 'number' || !(t[f] >= 0)) return `${f} must be a number >= 0`;
  }
  if (
    t.msPerPromptSample !== undefined &&
    (typeof t.msPerPromptSample !== 'number' || !(t.msPerPromptSample >= 0))
  ) {
    return 'msPerPromptSample must be a number >= 0';
  }
  if (
    t.attentionRowTile !== undefined &&
    (typeof t.attentionRowTile !== 'number' ||
      !Number.isInteger(t.attentionRowTile) ||
      !(t.attentionRowTile >= 1))
  ) {
    return 'attentionRowTile must be an integer >= 1';
  }
  if (
    t.shortChunkPairFactor !== undefined &&
    (typeof t.shortChunkPairFactor !== 'number' ||
      !(t.shortChunkPairFactor > 0) ||
      !Number.isFinite(t.shortChunkPairFactor))
  ) {
    return 'shortChunkPairFactor must be a number > 0';
  }
  if (t.pairRateContextTokens !== undefined || t.msPerContextPairAt !== undefined) {
    return pairRatesProblem(t.pairRateContextTokens, t.msPerContextPairAt);
  }
  return null;
}

/**
 * What one running decode adds to a step, in prompt tokens of the same table: the decode curve's
 * cost per sequence at its largest knot over a full prefill chunk's cost per token at
 * `budgetTokens`. It is the router's `decodeCostTokens` (src/router/policies/decodeWork.ts);
 * 0 when the table has no decode knots.
 */
export function decodeCostTokensOf(t: StepTable, budgetTokens: number): number {
  const last = t.decodeSeqs.length - 1;
  if (last < 0 || !(budgetTokens >= 1)) return 0;
  const decodeMsPerSeq = t.decodeMs[last]! / t.decodeSeqs[last]!;
  const prefillMsPerToken =
    tableStepMs(
      { ...t, overheadMs: 0 },
      { prefillTokens: budgetTokens, decodeTokens: 0, kvTokensRead: 0 },
    ) / budgetTokens;
  return prefillMsPerToken > 0 ? decodeMsPerSeq / prefillMsPerToken : 0;
}
