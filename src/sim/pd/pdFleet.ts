/**
 * A disaggregated fleet on the virtual clock: P prefill and D decode engine cores (the real
 * scheduler and block pool on both sides, with the NixlConnector beside each pool), the real
 * router over the prefill pool, the decode pick the gateway uses (`model/decodePick.ts`), and the
 * KV transfer between them as a delay: `transferMs` of the prompt's blocks the decode replica
 * does not cache yet.
 *
 * A request arrives, is routed among the prefill replicas, prefilled with max_tokens 1 and its
 * blocks held; its prefill's finish picks the decode replica (from that replica's counters at
 * that instant) and starts the pull; when the pull lands the prefiller frees the blocks and the
 * decode replica takes the request with the blocks written into its pool, computes the last
 * prompt token and decodes every output token. The client's first token is the decode
 * replica's (vLLM's proxy drops the prefiller's): TTFT runs from arrival to it, so it includes
 * the prefill queue, the prefill, the link and the decode replica's first step.
 */
import { EngineCore } from '../../engine/core.ts';
import { transferMs } from '../../engine/connector/nixl.ts';
import type { EngineConfig, StepResult } from '../../engine/types.ts';
import { pickDecode } from '../../model/decodePick.ts';
import type { BlockKey } from '../../kv/blockKey.ts';
import { kvBytesPerToken } from '../../model/cost.ts';
import type { Arrival } from '../../workload/workloads.ts';
import type { Workload } from '../../workload/types.ts';
import { EventQueue, PRIORITY, type SimEvent } from '../eventQueue.ts';
import type { SimRouter } from '../fleet.ts';
import { runLoop, type SimClock } from '../loop.ts';

export interface PdFleetOptions {
  prefill: number;
  decode: number;
  workload: Workload;
  engine: EngineConfig;
  /** The router over the prefill pool (replica ids 0..prefill-1). */
  router: SimRouter;
  transferGbps: number;
  transferLatencyMs: number;
  kvThreshold: number;
  warmupMs: number;
  /** Stop here (virtual ms): what is left unfinished counts as errors (an overloaded probe). */
  horizonMs?: number;
}

interface Req {
  id: string;
  arrival: Arrival;
  tokens: Int32Array;
  blockKeys: readonly BlockKey[];
  prefill: number;
  decode: number;
  prefillCachedTokens: number;
  firstTokenMs: number;
  transferMs: number;
  prefillDoneMs: number;
  pulledMs: number;
}

type PdEvent = SimEvent &
  (
    | { kind: 'arrival'; arrival: Arrival }
    | { kind: 'stepEnd'; pool: 'p' | 'd'; replica: number }
    | { kind: 'pulled'; id: string }
  );

interface Engine {
  core: EngineCore;
  busy: boolean;
  pending: StepResult | null;
  /** Requests routed here and not finished (the decode pick's in-flight count). */
  inFlight: number;
}

export interface PdSample {
  ttftMs: number;
  tpotMs: number;
  promptTokens: number;
  prefillCachedTokens: number;
  transferMs: number;
  /** Arrival to the prefill's end (the prefill pool's queue and compute). */
  prefillMs: number;
  /** The pull's landing to the decode replica's first token. */
  decodeFirstMs: number;
}

export interface PdOutcome {
  samples: PdSample[];
  arrived: number;
  completed: number;
  endMs: number;
  /** Blocks still held by prefillers and pulled blocks still waiting on decoders at the end. */
  heldBlocks: number;
  injectedBlocks: number;
  usedBlocks: number;
}

export class PdFleet {
  readonly #o: PdFleetOptions;
  readonly #queue = new EventQueue<PdEvent>();
  readonly #clock: SimClock = { nowMs: 0 };
  readonly #prefill: Engine[];
  readonly #decode: Engine[];
  readonly #requests = new Map<string, Req>();
  readonly #arrivals: Iterator<Arrival>;
  readonly #samples: PdSample[] = [];
  readonly #kvBytes: number;
  #arrived = 0;
  #completed = 0;

  constructor(o: PdFleetOptions) {
    this.#o = o;
    const make = (): Engine => ({
      core: new EngineCore(o.engine),
      busy: false,
      pending: null,
      inFlight: 0,
    });
    this.#prefill = Array.from({ length: o.prefill }, make);
    this.#decode = Array.from({ length: o.decode }, make);
    this.#arrivals = o.workload.arrivals();
    this.#kvBytes = kvBytesPerToken(o.engine.spec.model, o.engine.spec.kvDtype);
  }

  run(): PdOutcome {
    this.#nextArrival();
    const horizonMs = this.#o.horizonMs ?? Number.POSITIVE_INFINITY;
    runLoop(this.#queue, this.#clock, (e) => this.#handle(e), {
      check: (nowMs) => nowMs > horizonMs,
    });
    const all = [...this.#prefill, ...this.#decode];
    const sum = (f: (e: Engine) => number) => all.reduce((s, e) => s + f(e), 0);
    return {
      samples: this.#samples,
      arrived: this.#arrived,
      completed: this.#completed,
      endMs: this.#clock.nowMs,
      heldBlocks: sum((e) => e.core.counters().kvTransfer?.heldBlocks ?? 0),
      injectedBlocks: sum((e) => e.core.counters().kvTransfer?.injectedBlocks ?? 0),
      usedBlocks: sum((e) => e.core.counters().kvBlocksTotal - e.core.counters().kvBlocksFree),
    };
  }

  #push(e: PdEvent extends infer E ? (E extends PdEvent ? Omit<E, 'seq'> : never) : never): void {
    this.#queue.push({ ...e, seq: 0 } as PdEvent);
  }

  #nextArrival(): void {
    const next = this.#arrivals.next();
    if (next.done) return;
    this.#push({
      kind: 'arrival',
      arrival: next.value,
      timeMs: next.value.atMs,
      priority: PRIORITY.arrival,
    });
  }

  #handle(e: PdEvent): undefined {
    const nowMs = this.#clock.nowMs;
    if (e.kind === 'arrival') {
      this.#onArrival(e.arrival, nowMs);
      this.#nextArrival();
    } else if (e.kind === 'stepEnd') this.#onStepEnd(e.pool, e.replica, nowMs);
    else this.#onPulled(e.id, nowMs);
    return undefined;
  }

  #onArrival(arrival: Arrival, nowMs: number): void {
    const { tokens, blockKeys } = this.#o.workload.materialize(arrival);
    const id = `r${this.#arrived++}`;
    // Fresh reports of the whole prefill pool (the simulator's --stale-ms 0 view).
    for (let i = 0; i < this.#prefill.length; i++) this.#report(i, nowMs);
    const decision = this.#o.router.route(
      {
        id,
        blockKeys,
        promptTokens: arrival.promptLength,
        blockSize: this.#o.workload.blockSize,
        customer: arrival.customer,
      },
      nowMs,
    );
    if (decision === null) return;
    const req: Req = {
      id,
      arrival,
      tokens,
      blockKeys,
      prefill: decision.replicaId,
      decode: -1,
      prefillCachedTokens: 0,
      firstTokenMs: Number.NaN,
      transferMs: 0,
      prefillDoneMs: Number.NaN,
      pulledMs: Number.NaN,
    };
    this.#requests.set(id, req);
    const engine = this.#prefill[req.prefill]!;
    engine.core.add({
      id,
      promptTokens: tokens,
      maxNewTokens: 1,
      arrivalMs: nowMs,
      blockKeys,
      kvTransfer: 'remote-decode',
    });
    engine.inFlight++;
    this.#startStep('p', req.prefill, nowMs);
  }

  #startStep(pool: 'p' | 'd', replica: number, nowMs: number): void {
    const engine = (pool === 'p' ? this.#prefill : this.#decode)[replica]!;
    if (engine.busy || !engine.core.hasWork()) return;
    const result = engine.core.step();
    if (result.durationMs <= 0 && result.emitted.length === 0 && result.finished.length === 0)
      return;
    engine.busy = true;
    engine.pending = result;
    this.#push({
      kind: 'stepEnd',
      pool,
      replica,
      timeMs: nowMs + Math.max(0, result.durationMs),
      priority: PRIORITY.stepEnd,
    });
  }

  #onStepEnd(pool: 'p' | 'd', replica: number, nowMs: number): void {
    const engine = (pool === 'p' ? this.#prefill : this.#decode)[replica]!;
    const result = engine.pending!;
    engine.pending = null;
    engine.busy = false;
    if (pool === 'p') this.#onPrefillStep(replica, result, nowMs);
    else this.#onDecodeStep(result, nowMs);
    this.#startStep(pool, replica, nowMs);
  }

  #onPrefillStep(replica: number, result: StepResult, nowMs: number): void {
    const router = this.#o.router;
    const engine = this.#prefill[replica]!;
    engine.core.expireTransfers(nowMs);
    for (const t of result.emitted) router.onFirstToken(t.id, nowMs);
    if (result.events.length > 0 && router.wantsEvents)
      router.applyEvents(replica, result.events, nowMs);
    for (const f of result.finished) {
      router.onFinished(f.id, nowMs);
      engine.inFlight--;
      const req = this.#requests.get(f.id);
      if (req === undefined || f.heldBlockIds === undefined) continue;
      req.prefillCachedTokens = f.cachedTokens;
      req.prefillDoneMs = nowMs;
      req.decode = this.#pickDecode(req);
      const decoder = this.#decode[req.decode]!;
      decoder.inFlight++;
      const held = Math.min(
        req.arrival.promptLength,
        f.heldBlockIds.length * this.#o.engine.blockSize,
      );
      const local = Math.min(held, decoder.core.cachedPrefixTokens(req.blockKeys));
      req.transferMs = transferMs(
        held - local,
        this.#kvBytes,
        this.#o.transferGbps,
        this.#o.transferLatencyMs,
      );
      this.#push({
        kind: 'pulled',
        id: req.id,
        timeMs: nowMs + req.transferMs,
        priority: PRIORITY.kvEvents,
      });
    }
    this.#report(replica, nowMs);
  }

  #report(replica: number, nowMs: number): void {
    const c = this.#prefill[replica]!.core.counters();
    this.#o.router.onReport(
      replica,
      {
        kvUsage: c.kvUsage,
        running: c.running,
        waiting: c.waiting,
        queuedPromptTokens: 0,
        reportedAtMs: nowMs,
      },
      nowMs,
    );
  }

  #pickDecode(req: Req): number {
    const candidates = this.#decode.map((e, i) => {
      const c = e.core.counters();
      return {
        name: `d${i}`,
        running: c.running + c.waiting,
        kvUsage: c.kvUsage,
        inFlight: e.inFlight,
        decodeRequests: e.inFlight,
        queuedPromptTokens: 0,
      };
    });
    return pickDecode(
      candidates,
      this.#o.engine.spec,
      req.arrival.promptLength,
      this.#o.kvThreshold,
      this.#o.engine.budgetTokens,
    );
  }

  #onPulled(id: string, nowMs: number): void {
    const req = this.#requests.get(id)!;
    req.pulledMs = nowMs;
    this.#prefill[req.prefill]!.core.releaseTransfer(id);
    const decoder = this.#decode[req.decode]!;
    decoder.core.add({
      id,
      promptTokens: req.tokens,
      maxNewTokens: req.arrival.outputTokens,
      arrivalMs: nowMs,
      blockKeys: req.blockKeys,
      kvTransfer: 'remote-prefill',
    });
    this.#startStep('d', req.decode, nowMs);
  }

  #onDecodeStep(result: StepResult, nowMs: number): void {
    for (const t of result.emitted) {
      const req = this.#requests.get(t.id);
      if (req !== undefined && Number.isNaN(req.firstTokenMs)) req.firstTokenMs = nowMs;
    }
    for (const f of result.finished) {
      const req = this.#requests.get(f.id);
      if (req === undefined) continue;
      this.#requests.delete(f.id);
      this.#decode[req.decode]!.inFlight--;
      this.#completed++;
      if (req.arrival.atMs < this.#o.warmupMs) continue;
      this.#samples.push({
        ttftMs: req.firstTokenMs - req.arrival.atMs,
        tpotMs: f.outputTokens > 1 ? (nowMs - req.firstTokenMs) / (f.outputTokens - 1) : Number.NaN,
        promptTokens: f.promptTokens,
        prefillCachedTokens: req.prefillCachedTokens,
        transferMs: req.transferMs,
        prefillMs: req.prefillDoneMs - req.arrival.atMs,
        decodeFirstMs: req.firstTokenMs - req.pulledMs,
      });
    }
  }
}
