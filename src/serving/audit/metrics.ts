/**
 * The audit's Prometheus metrics, in the gateway's registry: per replica, cached tokens the
 * router predicted and the engine reported, and the per-request error as a fraction of the
 * prompt ((predicted - reported) / prompt tokens: > 0 over-predicted, < 0 under-predicted).
 * The verdict itself is a gauge read at scrape time (0 ok, 1 over-predicts, -1 under-predicts).
 */
import { Gauge, type Registry } from 'prom-client';
import { LabelledCounter, LabelledHistogram } from '../metricSeries.ts';
import { type AuditSample, type AuditVerdict, clampReported } from '../../router/audit/index.ts';

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
  readonly predicted: LabelledCounter;
  readonly reported: LabelledCounter;
  readonly error: LabelledHistogram;
  readonly repairs: LabelledCounter;
  #source: VerdictSource | null = null;

  constructor(registry: Registry) {
    const registers = [registry];
    // Bumped per audited response: series resolved once (metricSeries.ts).
    this.predicted = new LabelledCounter(
      'kvroute_gateway_predicted_cached_tokens_total',
      'Prompt tokens the router predicted cached on the replica it chose (audited requests)',
      ['replica', 'model'],
      registry,
    );
    this.reported = new LabelledCounter(
      'kvroute_gateway_reported_cached_tokens_total',
      'Prompt tokens the engine reported it reused (usage cached_tokens, or the hit counter)',
      ['replica', 'model'],
      registry,
    );
    this.error = new LabelledHistogram(
      'kvroute_gateway_cache_prediction_error_ratio',
      'Per audited request, (predicted - reported cached tokens) / prompt tokens',
      ERROR_BUCKETS,
      ['replica', 'model'],
      registry,
    );
    this.repairs = new LabelledCounter(
      'kvroute_gateway_index_repairs_total',
      'Repairs of a replica index the audit asked for, by action',
      ['replica', 'model', 'action'],
      registry,
    );
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

  /**
   * One audited response. The reported count is the engine's number: clamped to [0, prompt
   * tokens] as the audit clamps it (`clampReported`), and a non-finite one counts nowhere (a
   * counter must not become +Inf or NaN). The prediction is bounded the same way.
   */
  observe(replica: string, model: string, sample: AuditSample): void {
    const report = clampReported(sample.reportedTokens, sample.promptTokens);
    if (report === null || !Number.isFinite(sample.predictedTokens)) return;
    const prompt = Math.max(0, sample.promptTokens);
    const predicted = Math.min(prompt, Math.max(0, sample.predictedTokens));
    this.predicted.series(replica, model).inc(predicted);
    this.reported.series(replica, model).inc(report.tokens);
    if (prompt > 0) {
      this.error.series(replica, model).observe((predicted - report.tokens) / prompt);
    }
  }
}
