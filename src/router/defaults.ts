/**
 * The router's defaults and option names, in one place: the router core, the gateway's config
 * and the simulator all read them from here, so a default is changed once.
 */

/** delay-cost: the seed's rule with spills charged for the requests queued behind them (policies/delayCost.ts). */
export const DEFAULT_POLICY = 'delay-cost';

/** Replicas above this KV usage (0..1) are skipped: admitting there forces preemption. */
export const DEFAULT_KV_THRESHOLD = 0.95;

/** Replicas whose last report is older than this are skipped (report age, ms). */
export const DEFAULT_STALE_MS = 500;

/** Seed of the router's randomness (the random policy, tie breaks). */
export const DEFAULT_SEED = 0x6b76;

/** How long a just-routed prefix counts as cached before the engine's events confirm it. */
export const DEFAULT_OVERLAY_TTL_MS = 2_000;

/** The prefix index's feed: the engines' KV events, or the router's own record of its routes. */
export const INDEX_MODES = ['events', 'approx'] as const;
export type IndexMode = (typeof INDEX_MODES)[number];

/** Where the cost policy's queue term comes from: the router's ledger, or engine reports. */
export const QUEUE_SOURCES = ['ledger', 'reports'] as const;
export type QueueSource = (typeof QUEUE_SOURCES)[number];

/**
 * Prefill time per uncached prompt token, µs: the router seed's replica (Llama 3.3 70B, FP8
 * weights, TP=2 H200 at 50 % MFU), 2 x 70.55e9 / (2 x 1979e12 x 0.50) = 71.3 us. The one source
 * of this default: delay-cost's time scale and the gateway's admission bounds both read it (the
 * router may not import the model catalog; a test holds it to the catalog's figure).
 */
export const DEFAULT_PREFILL_US_PER_TOKEN = 71.3;

/**
 * A LoRA adapter's load time in prefill tokens, the cost policy's term where the adapter is not
 * resident: the engine's model (src/engine/lora.ts) for the seed replica, a rank-16 Llama 3.3 70B
 * adapter (167.8 MB) read at 2 GB/s in 83.9 ms, over 71.3 us per prefill token. A router in front
 * of other engines is given its own figure (the simulator computes it from the engine options).
 */
export const DEFAULT_LORA_LOAD_TOKENS = 1177;

/**
 * Time to reload one token's KV from a replica's CPU tier over PCIe, µs: the seed replica's
 * 327,680 B/token over PCIe 5.0 x16 (32 GT/s x 16 lanes x 128/130 / 8 = 63.0 GB/s per direction,
 * PCI-SIG's PCIe 5.0 rate), 327,680 / 63.0e3 = 5.2 us. A CPU hit costs the cost rules this, not
 * a full prefill (policies/cpuHitCredit.ts).
 */
export const DEFAULT_CPU_RELOAD_US_PER_TOKEN = 327_680 / 63_000;
