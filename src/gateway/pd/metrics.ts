/** The gateway's P/D counters, in its registry (`kvroute_gateway_pd_*`). */
import { Counter, type Registry } from 'prom-client';

export class PdMetrics {
  /** Requests by path: disaggregated (prefill leg then decode leg) or local (decode alone). */
  readonly decisions: Counter<'model' | 'path'>;
  /** Legs that failed before any byte reached the client and went to another replica. */
  readonly legRetries: Counter<'model' | 'leg'>;
  /** Disaggregated requests whose prefill answer carried no kv_transfer_params, or none left. */
  readonly fallbacks: Counter<'model' | 'reason'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.decisions = new Counter({
      name: 'kvroute_gateway_pd_decisions_total',
      help: 'P/D requests by path: disaggregated (prefill then decode replica) or local (decode replica alone)',
      labelNames: ['model', 'path'],
      registers,
    });
    this.legRetries = new Counter({
      name: 'kvroute_gateway_pd_leg_retries_total',
      help: 'P/D legs retried on another replica after failing before the first byte, by leg',
      labelNames: ['model', 'leg'],
      registers,
    });
    this.fallbacks = new Counter({
      name: 'kvroute_gateway_pd_fallbacks_total',
      help: 'Disaggregated requests decoded without transfer params (no prefill replica answered, or the answer had none)',
      labelNames: ['model', 'reason'],
      registers,
    });
  }
}
