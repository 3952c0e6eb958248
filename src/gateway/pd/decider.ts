/**
 * Whether a request is worth disaggregating, as llm-d's `prefix-based-pd-decider`
 * (llm-d-inference-scheduler, pkg/plugins/profile/prefix_based_pd_decider.go) decides: with a
 * threshold of 0 (its default, `NonCachedTokens: 0`) every request is disaggregated; otherwise a
 * request whose prompt, or whose part not cached on the chosen decode replica, is shorter than
 * the threshold runs on the decode replica alone ("Non-cached suffix is smaller than threshold,
 * using decode profile only").
 */

/** llm-d's default `nonCachedTokens`. */
export const DEFAULT_PD_THRESHOLD_TOKENS = 0;

export type PdPath = 'disaggregated' | 'local';

export function decidePd(
  promptTokens: number,
  cachedOnDecodeTokens: number,
  thresholdTokens: number,
): PdPath {
  if (thresholdTokens <= 0) return 'disaggregated';
  if (promptTokens < thresholdTokens) return 'local';
  return promptTokens - cachedOnDecodeTokens < thresholdTokens ? 'local' : 'disaggregated';
}
