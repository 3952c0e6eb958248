/**
 * The audit's Prometheus metrics, in the gateway's registry: per replica, cached tokens the
 * router predicted and the engine reported, and the per-request error as a fraction of the
 * prompt ((predicted - reported) / prompt tokens: > 0 over-predicted, < 0 under-predicted).
 * The verdict itself is a gauge read at scrape time (0 ok, 1 over-predicts, -1 under-predicts).
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { AuditSample, AuditVerdict } from '../../router/audit/index.ts';

const ERROR_BUCKETS = [-1, -0.5, -0.25, -0.1, -0.05, -0.01, 0, 0.01, 0.05, 0.1, 0.25, 0.5, 1];

export const VERDICT_VALUE: Record<AuditVerdict, number> = {
  ok: 0,
  'over-predicts': 1,
  'under-predicts': -1,
};

export interface VerdictSource {
  verdicts(): { replica: string; model: string; verdict: AuditVerdict }[];
}

export class AuditMetrics {
  readonly predicted: Counter<'replica' | 'model'>;
  readonly reported: Counter<'replica' | 'model'>;
  readonly error: Histogram<'replica' | 'model'>;
  readonly repairs: Counter<'replica' | 'model' | 'action'>;
  #source: VerdictSource | null = null;

  constructor(registry: Registry) {
    const registers = [registry];
    this.predicted = new Counter({
      name: 'kvroute_gateway_predicted_cached_tokens_total',
      help: 'Prompt tokens the router predicted cached on the replica it chose (audited requests)',
      labelNames: ['replica', 'model'],
      registers,
    });
    this.reported = new Counter({
      name: 'kvroute_gateway_reported_cached_tokens_total',
      help: 'Prompt tokens the engine reported it reused (usage cached_tokens, or the hit counter)',
      labelNames: ['replica', 'model'],
      registers,
    });
    this.error = new Histogram({
      name: 'kvroute_gateway_cache_prediction_error_ratio',
      help: 'Per audited request, (predicted - reported cached tokens) / prompt tokens',
      buckets: ERROR_BUCKETS,
      labelNames: ['replica', 'model'],
      registers,
    });
    this.repairs = new Counter({
      name: 'kvroute_gateway_index_repairs_total',
      help: 'Repairs of a replica index the audit asked for, by action',
      labelNames: ['replica', 'model', 'action'],
      registers,
    });
    const self = this;
    new Gauge({
      name: 'kvroute_gateway_audit_verdict',
      help: 'The audit verdict per replica: 0 ok, 1 over-predicts, -1 under-predicts',
      labelNames: ['replica', 'model'],
      registers,
      collect() {
        this.reset();
        for (const v of self.#source?.verdicts() ?? []) {
          this.set({ replica: v.replica, model: v.model }, VERDICT_VALUE[v.verdict]);
        }
      },
    });
  }

  /** Where the verdict gauge reads from (the pools, once they exist). */
  follow(source: VerdictSource): void {
    this.#source = source;
  }

  observe(replica: string, model: string, sample: AuditSample): void {
    const labels = { replica, model };
    this.predicted.inc(labels, sample.predictedTokens);
    this.reported.inc(labels, sample.reportedTokens);
    if (sample.promptTokens > 0) {
      this.error.observe(
        labels,
        (sample.predictedTokens - sample.reportedTokens) / sample.promptTokens,
      );
    }
  }
}
