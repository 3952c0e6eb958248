/**
 * A replica's running decodes counted as queue, in prompt tokens, for delay-cost's queue term.
 *
 * Every step a replica runs carries one token for each of its running decodes, inside the same
 * token budget as the prefill chunks. Where a decode token costs `decodeCostTokens` prompt
 * tokens of step time (its marginal cost in a mixed step over a prompt token's), a request that
 * waits behind `aheadTokens` of prefill (the queue and its own uncached prompt) waits through
 * about aheadTokens / (budget - decodes) steps, each longer by decodes x decodeCostTokens:
 *
 *   decodeQueueTokens = aheadTokens x decodes x decodeCostTokens / (budgetTokens - decodes)
 *
 * and at least one step's worth (decodes x decodeCostTokens: the step in flight carries them
 * whatever the request needs). The decodes are taken to last through the wait: the router does
 * not know their output lengths, so for short answers this is an upper bound.
 *
 * Units: decodeCostTokens is about 0 on a GPU, whose mixed step is bound by the prefill's compute
 * and reads the weights once for every token in it; on a CPU (llama.cpp) a decode token costs
 * tens of prompt tokens (it computes the vocabulary's logits and samples), so a replica busy
 * decoding is far from idle although it has no prefill queued. `decodeCostTokensOf` in
 * src/model/stepTable.ts derives it from a measured step table.
 *
 * Per-replica cost models (a mixed fleet): the function takes one replica's numbers, so a caller
 * holding each replica's prefill ms per token, decode step model and budget passes that
 * replica's cost ratio and budget per candidate; nothing else changes.
 */

export interface DecodeWork {
  /** Requests decoding on the replica (past their first token, not finished). */
  decodes: number;
  /** Prefill tokens the new request waits behind there: queued plus its own uncached. */
  aheadTokens: number;
  /** Prompt tokens of step time one decode token adds to a step (>= 0; 0: decodes are free). */
  decodeCostTokens: number;
  /** Tokens per step of the replica's engine (prefill and decode alike). */
  budgetTokens: number;
}

/** The decodes' share of the wait, in prompt tokens (0 without decodes or without a cost). */
export function decodeQueueTokens(w: DecodeWork): number {
  if (w.decodes <= 0 || !(w.decodeCostTokens > 0)) return 0;
  const perStep = w.decodes * w.decodeCostTokens;
  const prefillPerStep = Math.max(1, w.budgetTokens - w.decodes);
  return Math.max(perStep, (Math.max(0, w.aheadTokens) * perStep) / prefillPerStep);
}
