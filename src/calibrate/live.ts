/**
 * Live calibration against any OpenAI-compatible server (vLLM, SGLang, `kvroute engine`): times
 * cold prefills and concurrent decodes from the client, and turns them into fit observations.
 *
 * Method.
 * - Prompts are token ids drawn from a seeded PRNG in [1,000, 30,000), ordinary tokens in every
 *   common vocabulary, fresh for every request: no two prompts share a first block, so nothing
 *   is served from the prefix cache (a reported cache hit is subtracted), except where a warm
 *   probe reuses its own prefix. Token ids also spare the server the tokenizer's time, which
 *   would otherwise count as prefill.
 * - Every point is the median of its repeats, not the fastest: the simulator is to reproduce
 *   the typical request on this host, and on a shared host the fastest of a few runs is the one
 *   that happened to meet no contention (on a dedicated server the two agree).
 * - Prefill: isolated requests (one at a time, `max_tokens` 1) of 64, 128, ... tokens up to 4 x
 *   the server's token budget, `repeats` of each (with `stepTable`, of 1 token too: a knot for the
 *   fixed cost of a short chunk that ends its prompt, SAMPLE_PROBE_TOKENS). A prompt of n tokens runs as ceil(n / budget)
 *   chunks (the server's chunked prefill), each a step that also reads the KV of the chunks
 *   before it, so the point is modeled as a per-request overhead (HTTP, queueing) plus the sum
 *   of those steps. Prompts of 1, 2 and 4 chunks separate the per-request overhead from the
 *   per-step cost.
 * - Warm (with `stepTable`): a prompt of `context` tokens, then `repeats` prompts of it plus a
 *   fresh one-chunk tail: each computes one chunk after `context` cached tokens (what the server
 *   reports as cached). Against the cold chunk of the same length this times what attention over
 *   a long context adds (the cold chunk is timed again between the warm ones, so both see the
 *   same load), which cold prompts of a few chunks cannot tell from the per-step and
 *   per-request overheads; a CPU engine pays it in full (a 256-token chunk after 1,024 cached
 *   tokens takes about 1.6 x the cold chunk on llama.cpp), and a prefix-sharing workload runs
 *   mostly such chunks.
 * - Tile (with `stepTable`): after the longest warm context, a 65-token and a 32-token chunk,
 *   each beside the same chunk cold, tell whether the engine computes a chunk's attention in whole
 *   64-row query tiles (rowTile.ts: llama.cpp's CPU kernel does); kept as pairs only, not points.
 * - Decode: `batch` concurrent streams of `context`-token prompts, long enough that all of them
 *   decode together for a while. In the window from the last stream's first token to the first
 *   stream's last token every step is a pure decode of `batch` tokens; the step time is the
 *   slope of each stream's token times against token index in that window (least squares, so a
 *   stall at either end, or tokens that arrive together in one read, move it little), the
 *   median over the streams; the streams' mean context in the window gives the KV it reads.
 * - Mixed (with `stepTable`): one stream decodes while prompts of one chunk (a length the
 *   prefill probes time alone) arrive one at a time; each runs as one step with the decode, and the stream's gap that ends
 *   with the prompt's first token is that step's time (the median of several). It separates
 *   the per-step overhead from the prefill and decode costs, which only a step table needs.
 * - Times are wall times x `speedup` (the modeled time of `kvroute engine --speedup X`).
 * - Probes run cheapest first, prefill and decode alternating, until `budgetS` runs out; one
 *   still running then is cancelled and left out.
 */
import { type Agent, request } from 'undici';
import { discoverModelCard, openClient } from '../loadgen/run.ts';
import { builtinVocab } from '../loadgen/words.ts';
import { type StreamOutcome, streamCompletion } from '../loadgen/sse.ts';
import type { StepWork } from '../model/cost.ts';
import { fitCurve, type Observation } from '../model/fit.ts';
import {
  type CostProfile,
  fitStepTable,
  markPromptSamples,
  PROFILE_FORMAT,
  pairRateAt,
  type ProfileCurve,
  type ReplicaSpec,
} from '../model/index.ts';
import { Rng } from '../util/rng.ts';
import { contextPairRate, contextPairRates, type WarmColdPair } from './pairRate.ts';
import { rowTiling, TILE_PROBE_TOKENS, type TilePair } from './rowTile.ts';
import { perSequencePasses } from './passes.ts';
import {
  overheadOf,
  type PrefillTotals,
  prefillTotals,
  type TextOverhead,
  textMsPerPromptToken,
} from './requestOverhead.ts';

/** A probe's result when the time budget ran out under it. */
const CANCELLED = 'cancelled (time budget)';

export interface LiveOptions {
  url: string;
  /** Model name to send; null: the first one /v1/models lists. */
  model: string | null;
  apiKey: string | null;
  /** The server's tokens per step (vLLM's --max-num-batched-tokens). */
  budgetTokens: number;
  /** Modeled time / wall time (kvroute engine --speedup); 1 for a real server. */
  speedup: number;
  /** Wall-clock seconds the measurements may take. */
  budgetS: number;
  /** Longest prompt (default 4 x budget, within the server's context window). */
  maxPromptTokens?: number;
  /** Largest decode batch (default 64). */
  maxBatch?: number;
  /**
   * KV tokens a decode probe may hold (default 262,144): more than the server's pool would
   * preempt and spoil the measurement.
   */
  maxKvTokens?: number;
  /** Requests per prefill length (default 5). */
  repeats?: number;
  seed?: number;
  /** Also run the mixed probes a step table needs (fitStepTable). */
  stepTable?: boolean;
  /** Called before each probe and after it, with the fraction done. */
  onProgress?: (event: ProgressEvent) => void;
  signal?: AbortSignal;
}

export interface ProgressEvent {
  fraction: number;
  /** What runs now, or what was just measured. */
  label: string;
  /** Set after a probe: its result in words. */
  result?: string;
}

export type Probe =
  | { kind: 'prefill'; promptTokens: number }
  | { kind: 'warm'; chunkTokens: number; contextTokens: number }
  | { kind: 'tile'; chunkTokens: number; contextTokens: number }
  | { kind: 'decode'; batch: number; contextTokens: number; outputTokens: number }
  | { kind: 'mixed'; chunkTokens: number; contextTokens: number }
  | { kind: 'text'; promptTokens: number };

export interface LiveMeasurements {
  model: string | null;
  observations: Observation[];
  /**
   * Each warm run beside the cold run before it (with `stepTable`): the table's pair rate is
   * their median paired difference (pairRate.ts), not a fitted unknown.
   */
  warmColdPairs: WarmColdPair[];
  /** The attention-tile probes' runs beside their cold chunks (with `stepTable`; rowTile.ts). */
  tilePairs: TilePair[];
  /**
   * Each single-request probe's TTFT less the prefill time the server counted for it (ms,
   * requestOverhead.ts); empty from a server without `vllm:request_prefill_time_seconds`.
   */
  requestOverheadsMs: number[];
  /**
   * The same for prompts sent as text (with `stepTable`): the server tokenizes those before
   * their first step, which the token-id probes spare it. requestOverhead.ts.
   */
  textOverheads: TextOverhead[];
  /** Probes planned but not run (budget) or left out (too short a window...), in words. */
  skipped: string[];
  wallS: number;
}

export class LiveError extends Error {
  readonly code = 'ERR_CALIBRATE';
}

const TOKEN_ID_LO = 1000;
const TOKEN_ID_HI = 30000;
const MIN_PREFILL_TOKENS = 64;
/**
 * With a step table, a prompt of one token is timed too: what a chunk that ends a prompt costs
 * before its tokens' compute (one forward pass, the last token's logits and the draw). A table
 * interpolating from P(0) = 0 to the 64-token knot charged a short chunk almost none of it (on
 * llama.cpp with a 128k vocabulary a 6-token tail was charged 2 ms and took tens), and a
 * prefix-sharing workload ends many prompts with such a tail.
 */
export const SAMPLE_PROBE_TOKENS = 1;
/** Words of the text probe's prompts (one token each for the builtin tokenizer). */
const TEXT_PROBE_TOKENS = 1024;
const DECODE_BATCHES = [1, 4, 16, 64];
const DECODE_CONTEXTS = [256, 2048, 8192];
/** KV tokens a decode probe may hold at once (batch x (context + output)), by default. */
export const DEFAULT_MAX_KV_TOKENS = 262_144;
/** Decode steps wanted in the window where every stream decodes. */
const DECODE_WINDOW_STEPS = 64;
export const DEFAULT_REPEATS = 5;
const WARMUP_PROMPTS = [16, 64, 64, 512, 64];
/** Warm and cold runs per warm probe, at least (pairRate.ts takes the median of their pairs). */
const WARM_REPEATS = 8;

/** The probes, cheapest first, prefill and decode alternating. */
export function planProbes(
  budgetTokens: number,
  maxPromptTokens: number,
  maxBatch: number,
  maxKvTokens = DEFAULT_MAX_KV_TOKENS,
): Probe[] {
  const prefill: Probe[] = [];
  for (let n = MIN_PREFILL_TOKENS; n <= maxPromptTokens; n *= 2) {
    prefill.push({ kind: 'prefill', promptTokens: n });
  }
  const decode: Probe[] = [];
  const contexts = [...new Set(DECODE_CONTEXTS.map((c) => Math.min(c, maxPromptTokens)))];
  for (const batch of DECODE_BATCHES.filter((b) => b <= maxBatch)) {
    for (const contextTokens of contexts) {
      // Steps until every stream has its first token, with the decodes taking budget.
      const prefillSteps = Math.ceil((batch * contextTokens) / Math.max(1, budgetTokens - batch));
      const outputTokens = prefillSteps + DECODE_WINDOW_STEPS + 2;
      if (batch * (contextTokens + outputTokens) > maxKvTokens) continue;
      decode.push({ kind: 'decode', batch, contextTokens, outputTokens });
    }
  }
  const cost = (p: Probe) =>
    p.kind === 'decode' ? p.batch * (p.contextTokens + p.outputTokens) : 0;
  decode.sort((a, b) => cost(a) - cost(b));
  const out: Probe[] = [];
  for (let i = 0; i < Math.max(prefill.length, decode.length); i++) {
    if (prefill[i]) out.push(prefill[i]!);
    if (decode[i]) out.push(decode[i]!);
  }
  return out;
}

export const probeLabel = (p: Probe): string =>
  p.kind === 'prefill'
    ? `prefill ${p.promptTokens} tokens`
    : p.kind === 'warm' || p.kind === 'tile'
      ? `${p.kind} ${p.chunkTokens}-token chunk after ${p.contextTokens} cached tokens`
      : p.kind === 'mixed'
        ? `mixed ${p.chunkTokens}-token chunk + 1 decode at ${p.contextTokens} tokens`
        : p.kind === 'text'
          ? `text prompt of ${p.promptTokens} words (the server's tokenization)`
          : `decode batch ${p.batch} x ${p.contextTokens} tokens`;

/**
 * The mixed probes a step table needs: one decode with a prompt chunk of a length the prefill
 * probes also time alone (the largest 64 x 2^k under the budget), at two contexts.
 */
export function mixedProbes(budgetTokens: number, maxPromptTokens: number): Probe[] {
  let chunkTokens = MIN_PREFILL_TOKENS;
  while (chunkTokens * 2 <= Math.min(budgetTokens - 1, maxPromptTokens)) chunkTokens *= 2;
  const contexts = [...new Set([64, Math.min(1024, maxPromptTokens)])];
  return contexts.map((contextTokens) => ({ kind: 'mixed', chunkTokens, contextTokens }));
}

/**
 * The warm probes a step table needs: one chunk (the largest 64 x 2^k within the budget and half
 * the longest prompt) after a cached prefix of about a quarter, half and all the rest of the
 * longest prompt (whole 64-token multiples, so the prefix is whole blocks at any common block
 * size): the pair rate at three contexts, since on a CPU it grows with the context.
 */
export function warmProbes(budgetTokens: number, maxPromptTokens: number): Probe[] {
  let chunkTokens = MIN_PREFILL_TOKENS;
  while (chunkTokens * 2 <= Math.min(budgetTokens, maxPromptTokens / 2)) chunkTokens *= 2;
  const longest = Math.floor((maxPromptTokens - chunkTokens) / 64) * 64;
  const contexts = [
    ...new Set([Math.floor(longest / 256) * 64, Math.floor(longest / 128) * 64, longest]),
  ].filter((c) => c > 0);
  return contexts.map((contextTokens) => ({ kind: 'warm', chunkTokens, contextTokens }));
}

/**
 * The attention-tile probes a step table needs (rowTile.ts): a chunk one token past a tile and
 * one of half a tile, after the longest warm probe's context; none when the budget is smaller.
 */
export function tileProbes(budgetTokens: number, maxPromptTokens: number): Probe[] {
  const longest = warmProbes(budgetTokens, maxPromptTokens).at(-1);
  if (longest?.kind !== 'warm') return [];
  return TILE_PROBE_TOKENS.filter(
    (n) => n <= budgetTokens && longest.contextTokens + n <= maxPromptTokens,
  ).map((chunkTokens) => ({ kind: 'tile', chunkTokens, contextTokens: longest.contextTokens }));
}

export async function measureLive(o: LiveOptions): Promise<LiveMeasurements> {
  const { dispatcher, abort, close } = openClient(o.signal);
  const startedAt = performance.now();
  const deadlineAt = startedAt + o.budgetS * 1000;
  const timer = setTimeout(() => abort.abort(), o.budgetS * 1000);
  try {
    const card = await discoverModelCard(o.url, o.apiKey, dispatcher);
    const model = o.model ?? card.id;
    const contextLimit = (card.maxModelLen ?? Number.POSITIVE_INFINITY) - 8;
    const maxPrompt = Math.min(o.maxPromptTokens ?? 4 * o.budgetTokens, contextLimit);
    if (!(maxPrompt >= MIN_PREFILL_TOKENS)) {
      throw new LiveError(`the server's context window (${card.maxModelLen}) is too small`);
    }
    const client = new Client(o, model, dispatcher, abort.signal);
    // Warm the connection and both sides' code paths before anything counts.
    for (const tokens of WARMUP_PROMPTS) await client.send(client.freshPrompt(tokens), 2);
    const planned = planProbes(o.budgetTokens, maxPrompt, o.maxBatch ?? 64, o.maxKvTokens).filter(
      (p) => p.kind !== 'decode' || p.contextTokens + p.outputTokens <= contextLimit,
    );
    const probes = o.stepTable ? stepTableProbes(o, planned, maxPrompt) : planned;
    const observations: Observation[] = [];
    const warmColdPairs: WarmColdPair[] = [];
    const tilePairs: TilePair[] = [];
    const textOverheads: TextOverhead[] = [];
    const skipped: string[] = [];
    for (const [i, probe] of probes.entries()) {
      const label = probeLabel(probe);
      const fraction = () =>
        Math.max(i / probes.length, (performance.now() - startedAt) / (deadlineAt - startedAt));
      if (abort.signal.aborted) {
        skipped.push(`${label}: not run (time budget)`);
        continue;
      }
      o.onProgress?.({ fraction: fraction(), label });
      const measure = () =>
        measureProbe(client, probe, o, contextLimit, { warmColdPairs, tilePairs, textOverheads });
      let result = await measure();
      // A concurrent probe whose streams a busy host did not keep together is run again: its
      // failure says something about the host, not the engine.
      for (let retry = 1; retry <= BUSY_RETRIES && isBusyHostResult(probe, result); retry++) {
        o.onProgress?.({ fraction: fraction(), label, result: `${result}; again (${retry})` });
        result = await measure();
      }
      if (typeof result === 'string') {
        skipped.push(`${label}: ${result}`);
        o.onProgress?.({ fraction: fraction(), label, result });
        continue;
      }
      const points = Array.isArray(result) ? result : [result];
      observations.push(...points);
      o.onProgress?.({
        fraction: fraction(),
        label,
        result: points.map((p) => `${p.measuredMs.toFixed(1)} ms`).join(', '),
      });
    }
    return {
      model,
      observations,
      warmColdPairs,
      tilePairs,
      requestOverheadsMs: client.overheadsMs,
      textOverheads,
      skipped,
      wallS: (performance.now() - startedAt) / 1000,
    };
  } finally {
    clearTimeout(timer);
    await close();
  }
}

/**
 * With `--step-table`, the planned probes and the step table's own: the sample, text, warm, tile
 * and mixed probes after the first four planned ones.
 */
function stepTableProbes(o: LiveOptions, planned: Probe[], maxPrompt: number): Probe[] {
  // Early, so that a short time budget still runs them: with the first batched decode,
  // which tells whether the engine batches sequences at all (passes.ts).
  const batched = planned.findIndex((p) => p.kind === 'decode' && p.batch > 1);
  const early = batched >= 4 ? [planned[batched]!] : [];
  const rest = planned.filter((_, i) => i >= 4 && i !== batched);
  return [
    ...planned.slice(0, 4),
    { kind: 'prefill', promptTokens: SAMPLE_PROBE_TOKENS } satisfies Probe,
    { kind: 'text', promptTokens: Math.min(TEXT_PROBE_TOKENS, maxPrompt) } satisfies Probe,
    ...early,
    ...warmProbes(o.budgetTokens, maxPrompt),
    ...tileProbes(o.budgetTokens, maxPrompt),
    ...mixedProbes(o.budgetTokens, maxPrompt),
    ...rest,
  ];
}

/** What the warm, tile and text probes collect beside their observations. */
interface ProbePairs {
  warmColdPairs: WarmColdPair[];
  tilePairs: TilePair[];
  textOverheads: TextOverhead[];
}

/** Runs one probe of its kind: its observations, or why it gave none. */
function measureProbe(
  client: Client,
  probe: Probe,
  o: LiveOptions,
  contextLimit: number,
  pairs: ProbePairs,
): Promise<Observation | Observation[] | string> {
  return probe.kind === 'prefill'
    ? measurePrefill(client, probe.promptTokens, o)
    : probe.kind === 'warm'
      ? measureWarm(client, probe, o, pairs.warmColdPairs)
      : probe.kind === 'tile'
        ? measureTile(client, probe, o, pairs.tilePairs)
        : probe.kind === 'mixed'
          ? measureMixed(client, probe, o, contextLimit)
          : probe.kind === 'text'
            ? measureText(client, probe, o, pairs.textOverheads)
            : measureDecode(client, probe, o.speedup);
}

/** Times a concurrent probe is run again when a busy host spoiled its timing. */
const BUSY_RETRIES = 3;

/** A decode or mixed probe that failed for its timing (not the deadline) on a host that may be busy. */
function isBusyHostResult(probe: Probe, result: Observation | Observation[] | string): boolean {
  return (
    typeof result === 'string' &&
    (probe.kind === 'decode' || probe.kind === 'mixed') &&
    result !== CANCELLED
  );
}

/** Sends prompts of fresh token ids; a failure other than the deadline is a LiveError. */
class Client {
  readonly #o: LiveOptions;
  readonly #model: string | null;
  readonly #dispatcher: Agent;
  readonly #signal: AbortSignal;
  readonly #rng: Rng;
  /** Every `sendAlone` overhead measured; scraping stops once the server shows no histogram. */
  readonly overheadsMs: number[] = [];
  #scrape = true;

  constructor(o: LiveOptions, model: string | null, dispatcher: Agent, signal: AbortSignal) {
    this.#o = o;
    this.#model = model;
    this.#dispatcher = dispatcher;
    this.#signal = signal;
    this.#rng = Rng.derive(o.seed ?? 0, 'calibrate');
  }

  freshPrompt(tokens: number): number[] {
    return Array.from({ length: tokens }, () => this.#rng.range(TOKEN_ID_LO, TOKEN_ID_HI - 1));
  }

  get signal(): AbortSignal {
    return this.#signal;
  }

  /**
   * `send` of a request the server runs alone (the probes send one at a time): its request
   * overhead is recorded too, from the server's prefill histogram read before and after it.
   */
  async sendAlone(
    prompt: number[] | string,
    maxTokens: number,
    onOverhead: (ms: number, outcome: StreamOutcome) => void = (ms) => this.overheadsMs.push(ms),
  ): Promise<StreamOutcome | null> {
    const before = await this.#prefillTotals();
    const outcome = await this.send(prompt, maxTokens);
    if (outcome === null || before === null) return outcome;
    const ttftMs = (outcome.tokenTimes[0]! - outcome.sentAt) * this.#o.speedup;
    // The server counts a request when it ends, which can be just after its last byte.
    for (let tries = 0; tries < 5; tries++) {
      const after = await this.#prefillTotals();
      if (after === null) break;
      const overhead = overheadOf(before, after, ttftMs);
      if (overhead !== null) {
        onOverhead(overhead, outcome);
        break;
      }
      if (after.count > before.count) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return outcome;
  }

  async #prefillTotals(): Promise<PrefillTotals | null> {
    if (!this.#scrape) return null;
    try {
      const res = await request(`${this.#o.url}/metrics`, {
        dispatcher: this.#dispatcher,
        headers: this.#o.apiKey === null ? {} : { authorization: `Bearer ${this.#o.apiKey}` },
        headersTimeout: 5_000,
        bodyTimeout: 5_000,
        signal: this.#signal,
      });
      const totals = res.statusCode === 200 ? prefillTotals(await res.body.text()) : null;
      if (res.statusCode !== 200) await res.body.dump();
      if (totals === null) this.#scrape = false;
      return totals;
    } catch {
      this.#scrape = false;
      return null;
    }
  }

  /**
   * One streamed completion; null when the deadline cancelled it. With `stop`, a stream that
   * `stop` cancels comes back with the tokens it had.
   */
  async send(
    prompt: number[] | string,
    maxTokens: number,
    stop?: AbortSignal,
  ): Promise<StreamOutcome | null> {
    const outcome = await streamCompletion({
      url: this.#o.url,
      prompt,
      maxTokens,
      model: this.#model,
      apiKey: this.#o.apiKey,
      dispatcher: this.#dispatcher,
      signal: stop ? AbortSignal.any([this.#signal, stop]) : this.#signal,
    });
    if (outcome.error === 'cancelled' && stop?.aborted && !this.#signal.aborted) return outcome;
    if (outcome.error === 'cancelled') return null;
    if (outcome.error !== null) {
      throw new LiveError(
        `${this.#o.url}: ${outcome.error}${outcome.detail ? ` (${outcome.detail.slice(0, 200)})` : ''}`,
      );
    }
    // A real model's token can decode to no text yet (part of a UTF-8 character, a special
    // token): a one-token completion then ends with the token, so its end is the token's time.
    if (outcome.tokenTimes.length === 0 && maxTokens === 1 && (outcome.completionTokens ?? 0) > 0) {
      outcome.tokenTimes.push(outcome.endAt);
    }
    if (outcome.tokenTimes.length === 0) {
      throw new LiveError(`${this.#o.url}: a completion came back without tokens`);
    }
    return outcome;
  }
}

/** Prompt tokens the server computed: what it reports, less its cache hits. */
function computedTokens(outcome: StreamOutcome, sent: number): number {
  return (outcome.promptTokens ?? sent) - (outcome.cachedTokens ?? 0);
}

/** One timed prompt: its time to first token (scaled by `speedup`) and the tokens computed. */
interface PromptRun {
  ttftMs: number;
  tokens: number;
}

function promptRun(outcome: StreamOutcome, sentTokens: number, speedup: number): PromptRun {
  return {
    ttftMs: (outcome.tokenTimes[0]! - outcome.sentAt) * speedup,
    tokens: computedTokens(outcome, sentTokens),
  };
}

/** A point of the fit: one request's time to first token (`measuredMs`) over `steps`. */
function ttftPoint(label: string, steps: StepWork[], measuredMs: number): Observation {
  return { kind: 'ttft', label, steps, perRequest: true, measuredMs };
}

const stepCount = (steps: readonly StepWork[]): string =>
  `${steps.length} step${steps.length > 1 ? 's' : ''}`;

/**
 * A probe kind's measurer: its observations (none for the kinds that only feed `out`), or why
 * it gave none.
 */
type ProbeMeasure<K extends Probe['kind'], Out> = (
  client: Client,
  probe: Extract<Probe, { kind: K }>,
  o: LiveOptions,
  out: Out[],
) => Promise<Observation[] | string>;

/**
 * The steps `tokens` prompt tokens run as after `cachedTokens` cached ones (0: a cold prompt):
 * chunks of the budget, each reading the KV before it.
 */
export function prefillSteps(tokens: number, budgetTokens: number, cachedTokens = 0): StepWork[] {
  const steps: StepWork[] = [];
  for (let done = 0; done < tokens; done += budgetTokens) {
    const chunk = Math.min(budgetTokens, tokens - done);
    steps.push({ prefillTokens: chunk, decodeTokens: 0, kvTokensRead: cachedTokens + done });
  }
  return steps;
}

/** Context pairs of prompt-only steps (each chunk x the KV before it, as contextPairs counts). */
const pairsOf = (steps: readonly StepWork[]): number =>
  steps.reduce((sum, s) => sum + s.prefillTokens * s.kvTokensRead, 0);

/** The median of a non-empty list (the lower middle one for an even count: a value measured). */
export function medianOf(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

async function measurePrefill(
  client: Client,
  promptTokens: number,
  o: LiveOptions,
): Promise<Observation | string> {
  const runs: PromptRun[] = [];
  for (let r = 0; r < (o.repeats ?? DEFAULT_REPEATS); r++) {
    const outcome = await client.sendAlone(client.freshPrompt(promptTokens), 1);
    if (outcome === null) return CANCELLED;
    runs.push(promptRun(outcome, promptTokens, o.speedup));
  }
  const median = medianRun(runs);
  const steps = prefillSteps(median.tokens, o.budgetTokens);
  return ttftPoint(
    `prompt ${median.tokens} tokens (${stepCount(steps)}), median of ${runs.length}`,
    steps,
    median.ttftMs,
  );
}

/**
 * Text prompts of fresh words, one at a time (`max_tokens` 1): each one's TTFT less the prefill
 * time the server counted, beside the tokens it reported; not a point of the fit (the steps are
 * those of a token-id prompt of the same length).
 */
const measureText: ProbeMeasure<'text', TextOverhead> = async (client, probe, o, out) => {
  const vocab = builtinVocab();
  const before = out.length;
  for (let r = 0; r < (o.repeats ?? DEFAULT_REPEATS); r++) {
    const text = vocab.text(client.freshPrompt(probe.promptTokens));
    const outcome = await client.sendAlone(text, 1, (overheadMs, done) => {
      if (done.promptTokens !== null) out.push({ promptTokens: done.promptTokens, overheadMs });
    });
    if (outcome === null) return CANCELLED;
  }
  if (out.length === before) return 'the server counts no prefill time (no overhead to read)';
  return [];
};

/** The run with the median time to first token. */
function medianRun<T extends { ttftMs: number }>(runs: readonly T[]): T {
  const ms = medianOf(runs.map((r) => r.ttftMs));
  return runs.find((r) => r.ttftMs === ms)!;
}

const measureWarm: ProbeMeasure<'warm', WarmColdPair> = async (client, probe, o, pairsOut) => {
  const prefix = client.freshPrompt(probe.contextTokens);
  // Computes the prefix (cold, not a point); the server caches it.
  if ((await client.send(prefix, 1)) === null) return CANCELLED;
  const runs: (PromptRun & { cached: number })[] = [];
  // The cold chunk of the same length, timed between the warm ones: both see the same load, so
  // a busy host's drift does not go into the pair rate (the difference is what it times).
  const colds: PromptRun[] = [];
  const pairs: WarmColdPair[] = [];
  // The pair rate is the median of these pairs' differences, a small part of either time:
  // at least WARM_REPEATS of them, whatever `repeats` says.
  for (let r = 0; r < Math.max(WARM_REPEATS, o.repeats ?? DEFAULT_REPEATS); r++) {
    const cold = await client.sendAlone(client.freshPrompt(probe.chunkTokens), 1);
    if (cold === null) return CANCELLED;
    colds.push(promptRun(cold, probe.chunkTokens, o.speedup));
    const prompt = [...prefix, ...client.freshPrompt(probe.chunkTokens)];
    const outcome = await client.sendAlone(prompt, 1);
    if (outcome === null) return CANCELLED;
    const cached = Math.min(outcome.cachedTokens ?? 0, prompt.length - 1);
    const run = { ...promptRun(outcome, prompt.length, o.speedup), cached };
    runs.push(run);
    pairs.push({
      warmMs: run.ttftMs,
      coldMs: colds[colds.length - 1]!.ttftMs,
      pairs:
        pairsOf(prefillSteps(run.tokens, o.budgetTokens, cached)) -
        pairsOf(prefillSteps(colds[colds.length - 1]!.tokens, o.budgetTokens)),
      contextTokens: cached,
    });
  }
  // Only a probe run to the end counts (a cancelled one returned above).
  pairsOut.push(...pairs);
  const median = medianRun(runs);
  const cold = medianRun(colds);
  // A server without a prefix cache computes the whole prompt: still a point, of cold chunks.
  const steps = prefillSteps(median.tokens, o.budgetTokens, median.cached);
  const coldSteps = prefillSteps(cold.tokens, o.budgetTokens);
  return [
    ttftPoint(
      `prompt ${median.tokens} tokens after ${median.cached} cached (${stepCount(steps)}), median of ${runs.length}`,
      steps,
      median.ttftMs,
    ),
    ttftPoint(
      `prompt ${cold.tokens} tokens (${stepCount(coldSteps)}) between those, median of ${colds.length}`,
      coldSteps,
      cold.ttftMs,
    ),
  ];
};

/**
 * A tile probe: the warm probe's runs, kept only as pairs for rowTile.ts (a chunk of an odd
 * length would add prefill knots beside the probes' own, so its times stay out of the fit).
 */
const measureTile: ProbeMeasure<'tile', TilePair> = async (client, probe, o, pairsOut) => {
  const pairs: WarmColdPair[] = [];
  const result = await measureWarm(client, { ...probe, kind: 'warm' }, o, pairs);
  if (typeof result === 'string') return result;
  for (const p of pairs) {
    pairsOut.push({
      chunkTokens: probe.chunkTokens,
      contextTokens: p.contextTokens ?? 0,
      warmMs: p.warmMs,
      coldMs: p.coldMs,
    });
  }
  return [];
};

const MIXED_REPEATS = 5;
const MIXED_STREAM_TOKENS = 4000;

async function measureMixed(
  client: Client,
  probe: Extract<Probe, { kind: 'mixed' }>,
  o: LiveOptions,
  contextLimit: number,
): Promise<Observation | string> {
  const stop = new AbortController();
  let streamDone = false;
  const streamTokens = Math.min(MIXED_STREAM_TOKENS, contextLimit - probe.contextTokens);
  const stream = client
    .send(client.freshPrompt(probe.contextTokens), streamTokens, stop.signal)
    .finally(() => {
      streamDone = true;
    });
  const prompts: StreamOutcome[] = [];
  // The first prompt may meet the stream's own prefill; it is sent anyway and left out below.
  for (let r = 0; r < MIXED_REPEATS + 1 && !streamDone && !client.signal.aborted; r++) {
    await new Promise((resolve) => setTimeout(resolve, 30));
    const outcome = await client.send(client.freshPrompt(probe.chunkTokens), 1);
    if (outcome === null) break;
    prompts.push(outcome);
  }
  stop.abort();
  const s = await stream;
  if (s === null) return CANCELLED;
  const times = s.tokenTimes;
  const gaps: number[] = [];
  for (const p of prompts) {
    const first = p.tokenTimes[0]!;
    if (p.sentAt <= times[0]! || first > times[times.length - 1]!) continue;
    // The stream token emitted by the same step as the prompt's first token: the nearest.
    let j = 1;
    for (let k = 1; k < times.length; k++) {
      if (Math.abs(times[k]! - first) < Math.abs(times[j]! - first)) j = k;
    }
    if (times[j - 1]! < p.sentAt - 1e3) continue;
    gaps.push(times[j]! - times[j - 1]!);
  }
  if (gaps.length === 0) return 'no prompt arrived while the stream decoded';
  const context = computedTokens(s, probe.contextTokens) + Math.round(times.length / 2);
  const chunk = probe.chunkTokens;
  return {
    kind: 'itl',
    label: `mixed step: ${chunk}-token chunk + 1 decode at ~${context} tokens, median of ${gaps.length}`,
    steps: [
      {
        prefillTokens: chunk,
        decodeTokens: 1,
        kvTokensRead: context + 1,
        entries: [
          { kind: 'decode', tokens: 1, contextTokens: context },
          { kind: 'prefill', tokens: chunk, contextTokens: 0 },
        ],
      },
    ],
    perRequest: false,
    measuredMs: medianOf(gaps) * o.speedup,
  };
}

async function measureDecode(
  client: Client,
  probe: Extract<Probe, { kind: 'decode' }>,
  speedup: number,
): Promise<Observation | string> {
  const prompts = Array.from({ length: probe.batch }, () =>
    client.freshPrompt(probe.contextTokens),
  );
  const outcomes = await Promise.all(prompts.map((p) => client.send(p, probe.outputTokens)));
  if (outcomes.some((x) => x === null)) return CANCELLED;
  const streams = outcomes as StreamOutcome[];
  const windowStart = Math.max(...streams.map((s) => s.tokenTimes[0]!));
  const windowEnd = Math.min(...streams.map((s) => s.tokenTimes[s.tokenTimes.length - 1]!));
  const slopes: number[] = [];
  let gaps = 0;
  let contextSum = 0;
  let counted = 0;
  for (const s of streams) {
    const inWindow = s.tokenTimes
      .map((t, index) => ({ t, index }))
      .filter(({ t }) => t >= windowStart && t <= windowEnd);
    if (inWindow.length < 2) continue;
    const first = inWindow[0]!;
    const last = inWindow[inWindow.length - 1]!;
    slopes.push(slope(inWindow.map((p) => [p.index, p.t])));
    gaps += inWindow.length - 1;
    // The step that emits output token i reads the prompt and the tokens before it, plus its
    // own: prompt + i. Averaged over the gaps, which end at tokens first+1 .. last.
    contextSum += computedTokens(s, probe.contextTokens) + (first.index + 1 + last.index) / 2;
    counted++;
  }
  const minGaps = Math.min(8, probe.outputTokens / 2) * probe.batch;
  if (gaps < minGaps) {
    return `only ${gaps} decode gaps with all ${probe.batch} streams running (wanted ${minGaps})`;
  }
  const meanContext = contextSum / counted;
  slopes.sort((a, b) => a - b);
  const stepMs = slopes[Math.floor(slopes.length / 2)]! * speedup;
  // Tokens that all arrived in a few bursts (a client or server starved of CPU) time nothing.
  if (!(stepMs > 0) || windowEnd - windowStart < (gaps / probe.batch) * 0.25 * (stepMs / speedup)) {
    return 'the tokens came in bursts: the machine is too busy to time decode steps';
  }
  return {
    kind: 'itl',
    label: `decode batch ${probe.batch}, mean context ${Math.round(meanContext)} tokens`,
    steps: [
      {
        prefillTokens: 0,
        decodeTokens: probe.batch,
        kvTokensRead: Math.round(meanContext * probe.batch),
      },
    ],
    perRequest: false,
    measuredMs: stepMs,
  };
}

/** Request overheads measured (at least 3 of them): their median, not below 0; else null. */
export function measuredRequestOverhead(overheadsMs: readonly number[]): number | null {
  return overheadsMs.length >= 3 ? Math.max(0, medianOf(overheadsMs)) : null;
}

/**
 * The profile from live measurements of `spec`'s replica: one curve at its TP, least squares.
 * Decode steps are slopes over many steps and precise, so their errors count relative to
 * their size; a time to first token carries client-side delays of a few ms whatever the prompt,
 * so all of them count in absolute ms (relative to the longest), and the shortest prompts do not
 * steer the fit.
 */
export function liveProfile(
  m: LiveMeasurements,
  spec: ReplicaSpec,
  o: Pick<LiveOptions, 'url' | 'budgetTokens' | 'speedup' | 'stepTable'>,
): CostProfile {
  const ttfts = m.observations.filter((x) => x.perRequest).map((x) => x.measuredMs);
  const errorFloorMs = Math.max(0, ...ttfts);
  const requestOverheadMs = measuredRequestOverhead(m.requestOverheadsMs);
  const held = requestOverheadMs === null ? {} : { requestOverheadMs };
  const perToken =
    requestOverheadMs === null ? null : textMsPerPromptToken(m.textOverheads, requestOverheadMs);
  const curve: ProfileCurve = fitCurve(spec, m.observations, {
    objective: 'least-squares',
    errorFloorMs,
    ...held,
  });
  if (o.stepTable) {
    const pairRate = contextPairRate(m.warmColdPairs);
    const byContext = contextPairRates(m.warmColdPairs);
    const rates = {
      msPerContextPair: pairRate ?? 0,
      ...(byContext !== null && {
        pairRateContextTokens: byContext.contextTokens,
        msPerContextPairAt: byContext.msPerPair,
      }),
    };
    const tiling = rowTiling(m.tilePairs, (c) => pairRateAt(rates, c));
    const fit = fitStepTable(markPromptSamples(m.observations), {
      tiling,
      errorFloorMs,
      promptSamples: true,
      ...(pairRate !== null && { msPerContextPair: pairRate }),
      ...(byContext !== null && { pairRatesByContext: byContext }),
      perSequencePasses: perSequencePasses(m.observations.filter((x) => !x.perRequest)),
      ...held,
    });
    curve.table = {
      ...fit.table,
      requestOverheadMs: fit.requestOverheadMs,
      ...(perToken !== null && { requestMsPerPromptToken: perToken }),
      fixed: fit.fixed,
      maxErrorPct: fit.maxErrorPct,
      rmsErrorPct: fit.rmsErrorPct,
    };
  }
  return {
    format: PROFILE_FORMAT,
    source: `live ${o.url}${m.model === null ? '' : ` (model ${m.model})`}`,
    method:
      `cold prompts of fresh token ids, the median of several times to first token, as a request overhead plus ` +
      `ceil(n / ${o.budgetTokens}) prefill steps; concurrent decodes, pooled inter-token gaps while all ` +
      `streams decode; wall times x ${o.speedup}` +
      (requestOverheadMs === null
        ? ''
        : `; the request overhead measured, the median over ${m.requestOverheadsMs.length} single requests of the time to first token less the prefill time the server counted (vllm:request_prefill_time_seconds)`) +
      (o.stepTable
        ? '; a step table (prefill and decode knots, overheads) fitted to the same points plus mixed steps and chunks after a cached prefix, its context-pair rate the median of each such chunk against the cold chunk timed just before it'
        : ''),
    measuredOn: {
      model: spec.model.name,
      gpu: spec.gpu.name,
      weightsDtype: spec.weightsDtype,
      kvDtype: spec.kvDtype,
    },
    curves: [curve],
  };
}

/** Least-squares slope of y on x. */
function slope(points: [number, number][]): number {
  const n = points.length;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (const [x, y] of points) {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) ** 2;
  }
  return sxy / sxx;
}
