/**
 * One model pool's audit: the router core's `CacheAudit` fed by the pool's shells (the gateway's
 * generate path, the endpoint picker's response path), a log line per verdict change, and the
 * repairs of `repair.ts` carried out through the pool (`AuditActions`). Requests whose response
 * carried no cached-token count wait for the replica's next scrape: their predictions are judged
 * together against its `vllm:prefix_cache_hits_total` delta since the one before.
 */
import {
  type AuditEvidence,
  type AuditSample,
  type AuditState,
  type AuditVerdict,
  CacheAudit,
} from '../../router/audit/index.ts';
import type { Logger } from '../log.ts';
import { type RepairAction, RepairPlan, type RepairStage } from './repair.ts';

/** What the pool does for a repair. */
export interface AuditActions {
  /** Clears the replica's entries and replays its events; whether that removed blocks. */
  replay(replica: string): Promise<'mended' | 'unchanged' | 'unavailable'>;
  /** Routes it on the router's own record (its KV pool's size, when known). */
  distrust(replica: string): void;
  /** Its events are believed again (then replayed). */
  trust(replica: string): void;
  /** Forgets the replica's entries (an approximate index has no events to replay). */
  clear(replica: string): void;
  /**
   * Why it under-predicts, in words: the tokenizer agreement, and the event stream unless the
   * replica's index is approximate only (`approxOnly`).
   */
  diagnose(replica: string, approxOnly: boolean): Promise<string>;
}

/** `/router/replicas`' `audit` of one replica. */
export interface ReplicaAudit extends AuditState {
  /** Where its predictions come from now and what the last repair was. */
  repair: { stage: RepairStage; last: RepairAction | null; repairs: number };
  /** What its predictions come from now: its KV events, or the router's own record. */
  indexSource: 'events' | 'approx';
  /** Where reported counts came from: responses' usage, the hit counter. */
  sources: { usage: number; hitCounter: number };
}

interface Pending {
  predictedTokens: number;
  promptTokens: number;
  requests: number;
  /** The hit counter before the first of them was routed (or at the last judgment). */
  baseline: number;
}

export class PoolAudit {
  readonly audit: CacheAudit;
  readonly #model: string | null;
  readonly #logger: Logger;
  readonly #actions: AuditActions;
  readonly #indexSource: (replica: string) => 'events' | 'approx';
  readonly #evidence: ((replica: string) => AuditEvidence | undefined) | undefined;
  readonly #approxOnly: (replica: string) => boolean;
  readonly #plans = new Map<string, RepairPlan>();
  readonly #last = new Map<string, { action: RepairAction | null; repairs: number }>();
  readonly #sources = new Map<string, { usage: number; hitCounter: number }>();
  readonly #pending = new Map<string, Pending>();
  readonly #hits = new Map<string, number>();
  readonly #judgedAt = new Map<string, number>();

  constructor(options: {
    model: string | null;
    blockSize: number;
    logger: Logger;
    actions: AuditActions;
    indexSource: (replica: string) => 'events' | 'approx';
    /**
     * What the pool knows of the replica beside the report, read when a judgment is made: its
     * KV pool's size and the blocks its index holds (the pool bound of `claims.ts`).
     */
    evidence?: (replica: string) => AuditEvidence | undefined;
    /**
     * The replica's index can only be approximate (the pool routes on `--index approx`, or its
     * engine publishes no events): a repair clears its entries, as there is nothing to replay.
     */
    approxOnly?: (replica: string) => boolean;
    windowRequests?: number;
  }) {
    this.#approxOnly = options.approxOnly ?? (() => false);
    this.#indexSource = options.indexSource;
    this.#evidence = options.evidence;
    this.#model = options.model;
    this.#logger = options.logger;
    this.#actions = options.actions;
    this.audit = new CacheAudit({
      blockSize: options.blockSize,
      ...(options.windowRequests !== undefined && { windowRequests: options.windowRequests }),
    });
  }

  /** One response's report; returns the repair it started, if any. */
  record(replica: string, sample: AuditSample): RepairAction | null {
    this.#source(replica).usage++;
    return this.#judge(replica, sample);
  }

  /** The replica's hit counter as last scraped (take it when routing; give it to `defer`). */
  hitsNow(replica: string): number | undefined {
    return this.#hits.get(replica);
  }

  /**
   * A response without a cached-token count, routed when the hit counter read `hitsAtRoute`:
   * judged at the replica's next scrape against the counter's growth since.
   */
  defer(
    replica: string,
    predictedTokens: number,
    promptTokens: number,
    hitsAtRoute: number | undefined,
  ): void {
    if (hitsAtRoute === undefined) return;
    const baseline = Math.max(hitsAtRoute, this.#judgedAt.get(replica) ?? hitsAtRoute);
    const p = this.#pending.get(replica);
    if (!p) {
      this.#pending.set(replica, { predictedTokens, promptTokens, requests: 1, baseline });
      return;
    }
    p.predictedTokens += predictedTokens;
    p.promptTokens += promptTokens;
    p.requests++;
    p.baseline = Math.min(p.baseline, baseline);
  }

  /** A scrape's `vllm:prefix_cache_hits_total` (tokens); judges what was deferred before it. */
  onHitCounter(replica: string, hitsTokens: number): RepairAction | null {
    this.#hits.set(replica, hitsTokens);
    const p = this.#pending.get(replica);
    if (p === undefined) return null;
    this.#pending.delete(replica);
    if (hitsTokens < p.baseline) return null; // the engine restarted: nothing to compare
    this.#judgedAt.set(replica, hitsTokens);
    this.#source(replica).hitCounter += p.requests;
    return this.#judge(replica, {
      predictedTokens: p.predictedTokens,
      reportedTokens: hitsTokens - p.baseline,
      promptTokens: p.promptTokens,
    });
  }

  verdict(replica: string): AuditVerdict {
    return this.audit.verdict(replica);
  }

  view(replica: string): ReplicaAudit {
    const last = this.#last.get(replica) ?? { action: null, repairs: 0 };
    return {
      ...this.audit.state(replica),
      repair: {
        stage: this.#plans.get(replica)?.stage ?? 'events',
        last: last.action,
        repairs: last.repairs,
      },
      indexSource: this.#indexSource(replica),
      sources: { ...(this.#sources.get(replica) ?? { usage: 0, hitCounter: 0 }) },
    };
  }

  remove(replica: string): void {
    this.audit.remove(replica);
    this.#plans.delete(replica);
    this.#last.delete(replica);
    this.#sources.delete(replica);
    this.#pending.delete(replica);
    this.#hits.delete(replica);
    this.#judgedAt.delete(replica);
  }

  #judge(replica: string, reported: AuditSample): RepairAction | null {
    const known = this.#evidence?.(replica);
    const sample =
      known === undefined
        ? reported
        : { ...reported, evidence: { ...known, ...reported.evidence } };
    const change = this.audit.record(replica, sample);
    if (change.changed) {
      const s = this.audit.state(replica);
      const where = {
        replica,
        model: this.#model,
        index: this.#indexSource(replica),
        verdict: change.verdict,
        previous: change.previous,
        window: s.window,
        predictedTokens: s.predictedTokens,
        reportedTokens: s.reportedTokens,
      };
      if (change.verdict === 'ok') this.#logger.info(where, 'cache audit: predictions agree again');
      else this.#logger.warn(where, `cache audit: the router ${change.verdict} on this replica`);
    }
    let plan = this.#plans.get(replica);
    if (!plan) {
      plan = new RepairPlan(this.audit.windowRequests);
      this.#plans.set(replica, plan);
    }
    const action = plan.next(change);
    if (action !== null) this.#carryOut(replica, plan, action);
    return action;
  }

  #carryOut(replica: string, plan: RepairPlan, action: RepairAction): void {
    const last = this.#last.get(replica) ?? { action: null, repairs: 0 };
    last.action = action;
    if (action !== 'recovered' && action !== 'diagnose') last.repairs++;
    this.#last.set(replica, last);
    const where = { replica, model: this.#model, index: this.#indexSource(replica), action };
    const approxOnly = this.#approxOnly(replica);
    if (action === 'diagnose') {
      this.#diagnose(replica, approxOnly, where);
      return;
    }
    if (action === 'recovered') {
      this.#logger.info(
        where,
        approxOnly
          ? 'cache audit repair: its predictions agree again'
          : 'cache audit repair: its events agree again',
      );
      return;
    }
    if (approxOnly) {
      this.#clearApprox(replica, where);
      return;
    }
    switch (action) {
      case 'retry-events':
        // Events tried again: believed and replayed; the audit judges whether they agree now.
        this.#actions.trust(replica);
        this.audit.reset(replica);
        void this.#actions.replay(replica).then((result) => {
          this.#logger.info({ ...where, result }, 'cache audit repair: its events tried again');
        });
        return;
      case 'replay':
        this.audit.reset(replica);
        void this.#actions.replay(replica).then((result) => {
          if (result === 'mended') {
            this.#logger.info({ ...where, result }, 'cache audit repair: replayed its events');
            return;
          }
          plan.replayFailed();
          last.action = 'approx';
          this.#actions.distrust(replica);
          this.audit.reset(replica);
          this.#logger.warn(
            { ...where, result },
            'cache audit repair: the replay did not mend it; its entries cleared, routed on the approximate index until its events agree again',
          );
        });
        return;
      case 'approx':
        this.#actions.distrust(replica);
        this.audit.reset(replica);
        this.#logger.warn(where, 'cache audit repair: routed on the approximate index');
        return;
    }
  }

  /** Asks why the router under-predicts on `replica`, and logs the answer when it comes. */
  #diagnose(replica: string, approxOnly: boolean, where: object): void {
    void this.#actions.diagnose(replica, approxOnly).then((cause) => {
      this.#logger.warn({ ...where, cause }, 'cache audit: why the router under-predicts');
    });
  }

  /**
   * A repair (replay, approx or retry-events) where the index is approximate only: what
   * over-predicts is the router's own record, so it is cleared (the next requests rebuild it);
   * there are no events to replay or retry.
   */
  #clearApprox(replica: string, where: object): void {
    this.#actions.clear(replica);
    this.audit.reset(replica);
    this.#logger.warn(
      where,
      "cache audit repair: its approximate entries cleared (the router's own record starts afresh)",
    );
  }

  #source(replica: string): { usage: number; hitCounter: number } {
    let s = this.#sources.get(replica);
    if (!s) {
      s = { usage: 0, hitCounter: 0 };
      this.#sources.set(replica, s);
    }
    return s;
  }
}
