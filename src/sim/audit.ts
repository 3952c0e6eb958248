/**
 * The router's self-audit in the simulator: chosen replicas' engines given the same faults as
 * `kvroute engine --fault-*` (KV events of a kind never published; the cache emptied every N s
 * with no event; a consistent liar: every prompt's blocks published as stored when it arrives,
 * no removal ever published, `cached_tokens` = the prompt), each finished request's prediction (prompt - uncached tokens at routing)
 * graded against what its engine reused (with the checks a liar cannot fake: its speed against
 * the replica's idle prefill times, its index against its pool's size), and, with `repair`, the gateway's repairs: a replay of
 * the replica's published events (which cannot bring back what the engine never published),
 * then the per-replica approximate fallback, events tried again after 128 ok requests (doubling).
 *
 * It wraps the engines and the router (`SimConfig.instrument`), so the fleet is unchanged. Time
 * is the fleet's virtual clock, as the router wrapper's calls carry it. Detection is measured
 * from a fault's onset (the first event dropped that would have changed the index; each reset)
 * to the first verdict other than `ok` on that replica after it, in seconds and in that
 * replica's finished requests.
 */
import type { DropEventKind } from '../engine/server/faults.ts';
import { withDroppedEvents } from '../engine/server/faults.ts';
import { makeIdlePrefill } from '../engine/idlePrefill.ts';
import { makeEngineConfig } from '../engine/options.ts';
import type { BlockStored } from '../kv/events.ts';
import type { KvEvent } from '../kv/events.ts';
import { kvPoolTokens } from '../model/cost.ts';
import type { SimulatedRun } from '../results/result.ts';
import { type AuditEvidence, type AuditVerdict, CacheAudit } from '../router/audit/index.ts';
import type { ReplicaReport, SimEngine, SimRouteRequest, SimRouter } from './fleet.ts';
import { type SimConfig, simulate } from './run.ts';

/** Batches a replica's replay buffer keeps (vLLM's default buffer). */
const REPLAY_BATCHES = 10_000;
const RETRY_EVENTS_AFTER = 128;

export interface SimAuditOptions {
  /** Replicas with the faults. */
  replicas: number[];
  dropEvents?: DropEventKind;
  silentResetS?: number;
  /** A consistent liar (`--fault-lie`): fake stores, no removals, cached_tokens = the prompt. */
  lie?: boolean;
  /**
   * The replicas' prefill time on an idle engine, ms, for `promptTokens` with `cachedTokens`
   * cached: the speed profile the claims are checked against (absent: no speed test).
   */
  prefillMs?: (promptTokens: number, cachedTokens: number) => number;
  /** Carry out the repairs (else the audit only watches). */
  repair: boolean;
  blockSize: number;
  /** The engines' KV pool in blocks: the fallback's capacity. */
  kvBlocks: number;
}

/** Repairs a simulated router can take for the audit (RouterBridge has them). */
export interface RepairableRouter {
  clearReplica(replica: number): void;
  distrustEvents(replica: number, capacityBlocks: number): void;
  trustEvents(replica: number): void;
  indexedBlocks(replica: number): number;
}

export interface DetectionStats {
  onsets: number;
  detected: number;
  /** Per detected onset, seconds and the replica's requests from onset to verdict. */
  meanS: number | null;
  maxS: number | null;
  meanRequests: number | null;
  maxRequests: number | null;
}

export interface SimAuditSummary {
  judged: number;
  verdictChanges: number;
  /** Verdicts other than ok on replicas without faults. */
  falseAlarms: number;
  repairs: { replays: number; fallbacks: number; retries: number };
  detection: DetectionStats;
  /** Over the run, on the faulty replicas: predicted and reported cached tokens. */
  faulty: { predictedTokens: number; reportedTokens: number; promptTokens: number };
}

interface Pending {
  replica: number;
  predicted: number;
  prompt: number;
  routedAtMs: number;
  firstTokenAtMs: number | null;
  /** Another request of its replica awaited its first token meanwhile: no speed test. */
  contended: boolean;
}

export class SimAudit {
  readonly audit: CacheAudit;
  readonly #o: SimAuditOptions;
  readonly #faulty: Set<number>;
  #nowMs = 0;
  #router: (SimRouter & Partial<RepairableRouter>) | null = null;
  readonly #pending = new Map<string, Pending>();
  readonly #reported = new Map<string, number>();
  readonly #replay = new Map<number, KvEvent[][]>();
  /** A liar's fake stores, published with its next step's events. */
  readonly #fakeStores = new Map<number, KvEvent[]>();
  readonly #promptOf = new Map<string, number>();
  /** Per replica, the requests awaiting their first token. */
  readonly #awaiting = new Map<number, Set<Pending>>();
  readonly #nextResetMs = new Map<number, number>();
  /** Open onsets per replica: time and judged count at onset. */
  readonly #onsets = new Map<number, { atMs: number; judged: number }>();
  readonly #judged = new Map<number, number>();
  readonly #stage = new Map<
    number,
    { stage: 'events' | 'approx'; ok: number; retryAfter: number }
  >();
  readonly #detections: { s: number; requests: number }[] = [];
  #onsetCount = 0;
  #changes = 0;
  #falseAlarms = 0;
  #judgedAll = 0;
  readonly #repairs = { replays: 0, fallbacks: 0, retries: 0 };
  readonly #faultyTotals = { predictedTokens: 0, reportedTokens: 0, promptTokens: 0 };

  constructor(options: SimAuditOptions) {
    this.#o = options;
    this.#faulty = new Set(options.replicas);
    this.audit = new CacheAudit({ blockSize: options.blockSize });
    if (options.silentResetS !== undefined) {
      for (const r of options.replicas) this.#nextResetMs.set(r, options.silentResetS * 1000);
    }
  }

  /** The engine of `replica`, with the faults when it has them. */
  engine(inner: SimEngine, replica: number): SimEngine {
    const audit = this;
    return {
      add(req) {
        if (audit.#o.lie && audit.#faulty.has(replica))
          audit.#promptOf.set(req.id, req.promptTokens.length);
        inner.add(req);
      },
      hasWork: () => inner.hasWork(),
      abort: (id) => inner.abort(id),
      counters: () => inner.counters(),
      step() {
        audit.#maybeReset(inner, replica);
        const result = inner.step();
        const liar = audit.#o.lie === true && audit.#faulty.has(replica);
        for (const f of result.finished) {
          const prompt = audit.#promptOf.get(f.id);
          audit.#promptOf.delete(f.id);
          audit.#reported.set(f.id, liar && prompt !== undefined ? prompt : f.cachedTokens);
        }
        if (!audit.#faulty.has(replica)) return result;
        let events = audit.#drop(replica, result.events);
        const fake = audit.#fakeStores.get(replica);
        if (fake !== undefined && fake.length > 0) {
          audit.#fakeStores.set(replica, []);
          events = [...fake, ...events];
        }
        if (events.length > 0) {
          const buffer = audit.#replay.get(replica) ?? [];
          buffer.push(events);
          if (buffer.length > REPLAY_BATCHES) buffer.shift();
          audit.#replay.set(replica, buffer);
        }
        return events === result.events ? result : { ...result, events };
      },
    };
  }

  /** The router, graded on every finished request. */
  router(inner: SimRouter & Partial<RepairableRouter>): SimRouter {
    this.#router = inner;
    const audit = this;
    return {
      wantsEvents: inner.wantsEvents,
      route(req: SimRouteRequest, nowMs: number) {
        audit.#nowMs = nowMs;
        const d = inner.route(req, nowMs);
        if (audit.#o.lie) for (const r of audit.#faulty) audit.#fakeStore(r, req);
        if (d !== null) {
          const p: Pending = {
            replica: d.replicaId,
            predicted: req.promptTokens - d.uncachedTokens,
            prompt: req.promptTokens,
            routedAtMs: nowMs,
            firstTokenAtMs: null,
            contended: false,
          };
          audit.#pending.set(req.id, p);
          audit.#await(p);
        }
        return d;
      },
      onFirstToken: (id, nowMs) => {
        audit.#nowMs = nowMs;
        const p = audit.#pending.get(id);
        if (p !== undefined && p.firstTokenAtMs === null) {
          p.firstTokenAtMs = nowMs;
          audit.#awaiting.get(p.replica)?.delete(p);
        }
        inner.onFirstToken(id, nowMs);
      },
      onFinished(id, nowMs) {
        audit.#nowMs = nowMs;
        inner.onFinished(id, nowMs);
        audit.#finished(id);
      },
      onReport(replica: number, report: ReplicaReport, nowMs: number) {
        audit.#nowMs = nowMs;
        inner.onReport(replica, report, nowMs);
      },
      applyEvents: (replica, events, nowMs) => inner.applyEvents(replica, events, nowMs),
      markDown: (replica, nowMs) => inner.markDown(replica, nowMs),
      markUp: (replica, nowMs) => inner.markUp(replica, nowMs),
      ...(inner.stats && { stats: () => inner.stats!() }),
    };
  }

  summary(): SimAuditSummary {
    const d = this.#detections;
    const mean = (xs: number[]) =>
      xs.length === 0 ? null : xs.reduce((a, b) => a + b, 0) / xs.length;
    const max = (xs: number[]) => (xs.length === 0 ? null : Math.max(...xs));
    return {
      judged: this.#judgedAll,
      verdictChanges: this.#changes,
      falseAlarms: this.#falseAlarms,
      repairs: { ...this.#repairs },
      detection: {
        onsets: this.#onsetCount,
        detected: d.length,
        meanS: mean(d.map((x) => x.s)),
        maxS: max(d.map((x) => x.s)),
        meanRequests: mean(d.map((x) => x.requests)),
        maxRequests: max(d.map((x) => x.requests)),
      },
      faulty: { ...this.#faultyTotals },
    };
  }

  /** Requests that awaited their first token together on a replica share its steps. */
  #await(p: Pending): void {
    let set = this.#awaiting.get(p.replica);
    if (!set) {
      set = new Set();
      this.#awaiting.set(p.replica, set);
    }
    if (set.size > 0) {
      p.contended = true;
      for (const q of set) q.contended = true;
    }
    set.add(p);
  }

  /**
   * A liar publishes every prompt's blocks as stored: the simulated one claims each prompt the
   * fleet is sent, as an engine that learned the hot prefixes would, to draw their traffic.
   */
  #fakeStore(replica: number, req: SimRouteRequest): void {
    const keys = req.blockKeys;
    if (keys === undefined || keys.length === 0) return;
    const event: BlockStored = {
      type: 'BlockStored',
      blockKeys: [...keys],
      parentKey: null,
      tokenIds: [],
      blockSize: this.#o.blockSize,
      loraName: req.lora ?? null,
      cacheSalt: null,
    };
    const list = this.#fakeStores.get(replica) ?? [];
    list.push(event);
    this.#fakeStores.set(replica, list);
    this.#onset(replica);
  }

  #drop(replica: number, events: KvEvent[]): KvEvent[] {
    const kept = withDroppedEvents(events, this.#o.lie ? 'removed' : this.#o.dropEvents);
    if (kept.length !== events.length && !this.#onsets.has(replica)) {
      const lost = events.some(
        (e) => !kept.includes(e) && (e.type !== 'BlockRemoved' || e.blockKeys.length > 0),
      );
      if (lost) this.#onset(replica);
    }
    return kept;
  }

  #maybeReset(inner: SimEngine, replica: number): void {
    const at = this.#nextResetMs.get(replica);
    if (at === undefined || this.#nowMs < at) return;
    this.#nextResetMs.set(replica, at + this.#o.silentResetS! * 1000);
    const forget = (inner as { forgetCacheSilently?: () => number }).forgetCacheSilently;
    if (forget && forget.call(inner) > 0) this.#onset(replica);
  }

  #onset(replica: number): void {
    if (this.#onsets.has(replica)) return;
    this.#onsetCount++;
    this.#onsets.set(replica, { atMs: this.#nowMs, judged: this.#judged.get(replica) ?? 0 });
  }

  #finished(id: string): void {
    const p = this.#pending.get(id);
    const reported = this.#reported.get(id);
    this.#pending.delete(id);
    if (p !== undefined) this.#awaiting.get(p.replica)?.delete(p);
    this.#reported.delete(id);
    if (p === undefined || reported === undefined) return;
    const name = String(p.replica);
    const judged = (this.#judged.get(p.replica) ?? 0) + 1;
    this.#judged.set(p.replica, judged);
    this.#judgedAll++;
    const faulty = this.#faulty.has(p.replica);
    if (faulty) {
      this.#faultyTotals.predictedTokens += p.predicted;
      this.#faultyTotals.reportedTokens += reported;
      this.#faultyTotals.promptTokens += p.prompt;
    }
    const change = this.audit.record(name, {
      predictedTokens: p.predicted,
      reportedTokens: reported,
      promptTokens: p.prompt,
      evidence: this.#evidence(p, reported),
    });
    if (change.changed) this.#changes++;
    if (change.changed && change.verdict !== 'ok') {
      if (!faulty) this.#falseAlarms++;
      const onset = this.#onsets.get(p.replica);
      if (onset) {
        this.#detections.push({
          s: (this.#nowMs - onset.atMs) / 1000,
          requests: judged - onset.judged,
        });
        this.#onsets.delete(p.replica);
      }
    }
    if (this.#o.repair) this.#repair(p.replica, change.changed, change.verdict);
  }

  /** What a liar cannot fake: the response's speed, the index against the pool. */
  #evidence(p: Pending, reported: number): AuditEvidence {
    const indexed = this.#router?.indexedBlocks?.(p.replica);
    const prefill = this.#o.prefillMs;
    const claimed = Math.min(p.prompt, Math.max(0, reported));
    return {
      poolBlocks: this.#o.kvBlocks,
      ...(indexed !== undefined && { indexedBlocks: indexed }),
      ...(prefill !== undefined &&
        p.firstTokenAtMs !== null &&
        !p.contended && {
          speed: {
            ttftMs: p.firstTokenAtMs - p.routedAtMs,
            coldMs: prefill(p.prompt, 0),
            warmMs: prefill(p.prompt, claimed),
          },
        }),
    };
  }

  #repair(replica: number, changed: boolean, verdict: AuditVerdict): void {
    const router = this.#router;
    if (!router?.distrustEvents || !router.trustEvents || !router.clearReplica) return;
    const s = this.#stage.get(replica) ?? {
      stage: 'events',
      ok: 0,
      retryAfter: RETRY_EVENTS_AFTER,
    };
    this.#stage.set(replica, s);
    const name = String(replica);
    if (changed && verdict === 'over-predicts') {
      if (s.stage === 'events' && this.#replayMends(router, replica)) {
        this.#repairs.replays++;
        this.audit.reset(name);
        return;
      }
      this.#repairs.fallbacks++;
      router.distrustEvents(replica, this.#o.kvBlocks);
      s.stage = 'approx';
      s.ok = 0;
      this.audit.reset(name);
      return;
    }
    if (verdict !== 'ok' || s.stage !== 'approx') return;
    if (++s.ok < s.retryAfter) return;
    // Events tried again: trusted, the index rebuilt from the replica's replay buffer.
    this.#repairs.retries++;
    router.trustEvents(replica);
    this.#applyReplay(router, replica);
    s.stage = 'events';
    s.ok = 0;
    s.retryAfter *= 2;
    this.audit.reset(name);
  }

  /** Clears the replica and replays its buffer: mended when that removed blocks. */
  #replayMends(router: SimRouter & Partial<RepairableRouter>, replica: number): boolean {
    this.#repairs.replays++;
    const before = router.indexedBlocks?.(replica) ?? 0;
    this.#applyReplay(router, replica);
    const after = router.indexedBlocks?.(replica) ?? 0;
    if (after < before) return true;
    this.#repairs.replays--;
    return false;
  }

  #applyReplay(router: SimRouter & Partial<RepairableRouter>, replica: number): void {
    router.clearReplica!(replica);
    for (const events of this.#replay.get(replica) ?? []) {
      router.applyEvents(replica, events, this.#nowMs);
    }
  }
}

/** The faults of an audited run, as `kvroute sim --fault-*` gives them. */
export interface SimFaults {
  replicas: number[];
  dropEvents?: DropEventKind;
  silentResetS?: number;
  lie?: boolean;
}

/** One run: no fault; the faults with the audit watching; or the faults with its repairs. */
export type AuditedRunKind = 'no-fault' | 'audit-off' | 'audit-on';

export function simulateAudited(
  config: SimConfig,
  faults: SimFaults,
  kind: AuditedRunKind,
): { run: SimulatedRun; audit: SimAuditSummary } {
  const engine = makeEngineConfig(config.engine);
  const audit = new SimAudit({
    replicas: kind === 'no-fault' ? [] : faults.replicas,
    ...(kind !== 'no-fault' &&
      faults.dropEvents !== undefined && { dropEvents: faults.dropEvents }),
    ...(kind !== 'no-fault' &&
      faults.silentResetS !== undefined && { silentResetS: faults.silentResetS }),
    ...(kind !== 'no-fault' && faults.lie === true && { lie: true }),
    prefillMs: makeIdlePrefill(engine),
    repair: kind === 'audit-on',
    blockSize: engine.blockSize,
    kvBlocks: engine.kvBlocks ?? Math.floor(kvPoolTokens(engine.spec) / engine.blockSize),
  });
  const run = simulate({
    ...config,
    instrument: {
      engine: (e, replica) => audit.engine(e, replica),
      router: (r) => audit.router(r as SimRouter & Partial<RepairableRouter>),
    },
  });
  return { run, audit: audit.summary() };
}
