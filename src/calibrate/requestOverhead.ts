/**
 * The request overhead measured, not fitted: what a time to first token holds beyond the steps
 * that computed the prompt. vLLM (and kvroute's engine) count each request's time in the
 * prefill phase, from its first scheduled step to its first token, in the histogram
 * `vllm:request_prefill_time_seconds`; a request sent alone to an idle server moves its `_sum` by
 * exactly that. The client's TTFT less it is the HTTP, tokenization and hand-off to the step
 * loop, which a least-squares fit over a few TTFTs cannot tell from the prefill knots (it has
 * come out anywhere from 2 to 57 ms on the same engine).
 */

const PREFILL_HISTOGRAM = 'vllm:request_prefill_time_seconds';

/** The histogram's sum (s) and count over all its label sets; null when the text has none. */
export interface PrefillTotals {
  sumS: number;
  count: number;
}

export function prefillTotals(metricsText: string): PrefillTotals | null {
  let sumS = 0;
  let count = 0;
  let seen = false;
  for (const line of metricsText.split('\n')) {
    if (!line.startsWith(PREFILL_HISTOGRAM)) continue;
    const rest = line.slice(PREFILL_HISTOGRAM.length);
    const field = rest.startsWith('_sum') ? 'sum' : rest.startsWith('_count') ? 'count' : null;
    if (field === null) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (!Number.isFinite(value)) continue;
    seen = true;
    if (field === 'sum') sumS += value;
    else count += value;
  }
  return seen ? { sumS, count } : null;
}

/**
 * One request's overhead in ms: its TTFT (modeled ms) less the prefill time the server counted
 * for it between the two scrapes; null unless exactly one request finished in between.
 */
export function overheadOf(
  before: PrefillTotals,
  after: PrefillTotals,
  ttftMs: number,
): number | null {
  if (after.count - before.count !== 1) return null;
  return ttftMs - (after.sumS - before.sumS) * 1000;
}

/** A text prompt's overhead (TTFT less the server's prefill time), beside its reported tokens. */
export interface TextOverhead {
  promptTokens: number;
  overheadMs: number;
}

/**
 * What each prompt token of a text prompt adds to the request overhead, ms: the median over the
 * text runs of (their overhead - the token-id prompts' overhead) / their prompt tokens, not below
 * 0; null with fewer than 3 runs. The server tokenizes a text prompt before its first step (2 to
 * 9 ms for 1,300 tokens on the llama.cpp engine here), which a workload of text prompts pays on
 * every request and the token-id probes never do.
 */
export function textMsPerPromptToken(
  runs: readonly TextOverhead[],
  requestOverheadMs: number,
): number | null {
  const rates = runs
    .filter((r) => r.promptTokens > 0)
    .map((r) => (r.overheadMs - requestOverheadMs) / r.promptTokens)
    .sort((a, b) => a - b);
  if (rates.length < 3) return null;
  const mid = rates.length >> 1;
  const median = rates.length % 2 === 1 ? rates[mid]! : (rates[mid - 1]! + rates[mid]!) / 2;
  return Math.max(0, median);
}
