/** The simulator's inputs as plain data (its result is `src/results/result.ts`'s RunResult). */
import type { ApproxForgetMode, LlmdPrefixConfig } from '../router/index/approxForgetting.ts';
import type { IndexMode, QueueSource } from '../router/defaults.ts';
import type { PolicyOptions } from '../router/registry.ts';

/** A replica dies at `atMs` (kill) or comes back cold (revive). */
export interface FaultSpec {
  kind: 'kill' | 'revive';
  replica: number;
  atMs: number;
}

export interface RouterOptions {
  policy: string;
  index: IndexMode;
  queueSource: QueueSource;
  /** Knobs for the policy's constructor (see the registry's PolicyOptions); defaults otherwise. */
  policyOptions?: PolicyOptions;
  kvThreshold?: number;
  /** The router's own report-age limit; default: comfortably above the simulated delay. */
  staleLimitMs?: number;
  overlayTtlMs?: number;
  /**
   * How the approximate records forget (`--index approx`, and the sglang policy's own tree):
   * kvroute's LRU (default), one peer's way, or `peer`: each policy its own project's.
   */
  approxForget?: ApproxForgetMode;
  /** llm-d's prefix-cache-scorer parameters for its approximate record (default plugin.go's). */
  llmdPrefix?: LlmdPrefixConfig;
  /** Routes as if adapters did not exist (no load term, no slot guard, no LoRA affinity). */
  loraBlind?: boolean;
  /** Router instances (gateways) over the fleet, arrivals spread round robin (default 1). */
  routers?: number;
  /** Several routers: each one's records reach the others this late; null: never (no sync). */
  syncMs?: number | null;
}

export interface ViewOptions {
  /** Engine reports reach the router this late (0: also after every step, immediately). */
  staleMs: number;
  /** Every replica reports this often (idle ones too, so none looks stale to the router). */
  reportMs: number;
  /** KV events reach the router's index this late. */
  eventDelayMs: number;
}
