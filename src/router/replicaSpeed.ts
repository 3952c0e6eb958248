/**
 * A replica's speed as the router's policies see it: plain numbers from the replica's cost model
 * (the simulator and the gateway compute them from the catalog or a calibrated profile; the
 * router does not import the catalog). A fleet of one hardware class needs none: every policy
 * then uses its own fleet-wide figure. A mixed fleet gives one per replica, so a policy that
 * scores in milliseconds (delay-cost) compares replicas of different speeds on one scale.
 *
 *   prefill(tokens)        [ms] = tokens x prefillMsPerToken
 *   decodeStep(batch, ctx) [ms] = decodeBaseMs + batch x ctx x decodeMsPerKvToken
 *
 * decodeBaseMs is the weight read of one step and decodeMsPerKvToken the read of one cached
 * token's KV (the roofline's decode step: both over the replica's delivered HBM bandwidth).
 */
export interface ReplicaSpeed {
  /** Prefill time per uncached prompt token, ms. */
  readonly prefillMsPerToken: number;
  /** Decode step time at no context (the weights read once), ms. */
  readonly decodeBaseMs: number;
  /** Decode step time added by each KV token the step reads, ms. */
  readonly decodeMsPerKvToken: number;
}

/** The decode step at `batch` sequences of `contextTokens` each, ms. */
export const decodeStepMsOf = (s: ReplicaSpeed, batch: number, contextTokens: number): number =>
  s.decodeBaseMs + batch * contextTokens * s.decodeMsPerKvToken;
