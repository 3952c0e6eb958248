/**
 * Where a front end (the gateway's generate path, the endpoint picker's response path) hands
 * the audit one finished response: the router's decision, the prompt's size and what the
 * response said was reused (null: it did not say, so the replica's hit counter is used).
 *
 * With the time to its first token (`ttftMs`, from the request's leaving for the replica to
 * the first generated token of a stream), a claim is also tested for speed
 * (`router/audit/claims.ts`, `testClaimSpeed`) when the replica has a speed (a backend with
 * `gpu=`, `tp=` or `profile=`: `../backendSpeed.ts`) and the request had the replica's prefill
 * to itself (no prompt of this gateway queued ahead of it when routed: `queuedAheadTokens` 0).
 */
import { speedEvidenceOf } from '../../router/audit/index.ts';
import type { RouteDecision } from '../../router/index.ts';
import type { GatewayMetrics } from '../metrics.ts';
import type { ModelPool } from '../pool.ts';
import type { ModelPools } from '../pools.ts';
import type { VerdictSource } from './metrics.ts';

export function auditResponse(
  pool: ModelPool,
  metrics: GatewayMetrics,
  decision: RouteDecision,
  promptTokens: number,
  reportedTokens: number | null,
  /** `pool.audit.hitsNow(replica)` when the request was routed. */
  hitsAtRoute: number | undefined,
  /** A stream's time to first token, ms; null: not measured (a JSON answer). */
  ttftMs: number | null = null,
): void {
  if (reportedTokens === null) {
    pool.audit.defer(decision.replica, decision.cachedTokens, promptTokens, hitsAtRoute);
    return;
  }
  const speed = ttftMs === null ? undefined : pool.router.speedOf(decision.replica);
  const sample = {
    predictedTokens: decision.cachedTokens,
    reportedTokens,
    promptTokens,
    ...(speed !== undefined &&
      ttftMs !== null &&
      decision.queuedAheadTokens === 0 && {
        evidence: {
          speed: speedEvidenceOf(speed.prefillMsPerToken, promptTokens, reportedTokens, ttftMs),
        },
      }),
  };
  const model = pool.model ?? '';
  metrics.audit.observe(decision.replica, model, sample);
  const action = pool.audit.record(decision.replica, sample);
  if (action !== null && action !== 'diagnose' && action !== 'recovered') {
    metrics.audit.repairs.series(decision.replica, model, action).inc();
  }
}

/**
 * Whether a request's response can be audited: a completions batch (several prompts) reports
 * the usage of all of them, while the router predicted for the first one only.
 */
export function auditable(json: unknown): boolean {
  if (typeof json !== 'object' || json === null) return false;
  const prompt = (json as { prompt?: unknown }).prompt;
  if (!Array.isArray(prompt) || prompt.length <= 1) return true;
  return typeof prompt[0] === 'number';
}

/** Every pool's replicas' verdicts, for the verdict gauge. */
export function verdictsOf(pools: ModelPools): VerdictSource {
  return {
    verdicts: () =>
      pools.all().flatMap((p) =>
        p.router.replicaNames.map((replica) => ({
          replica,
          model: p.model ?? '',
          verdict: p.audit.verdict(replica),
        })),
      ),
  };
}
