/**
 * Where a front end (the gateway's generate path, the endpoint picker's response path) hands
 * the audit one finished response: the router's decision, the prompt's size and what the
 * response said was reused (null: it did not say, so the replica's hit counter is used).
 */
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
): void {
  if (reportedTokens === null) {
    pool.audit.defer(decision.replica, decision.cachedTokens, promptTokens, hitsAtRoute);
    return;
  }
  const sample = { predictedTokens: decision.cachedTokens, reportedTokens, promptTokens };
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
