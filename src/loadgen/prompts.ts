/**
 * Real prompts for the simulator's workloads. The workload decides arrival times, lengths and
 * which requests share which tokens (its synthetic token ids); each id becomes one word of
 * `WordVocab`, so the text the server tokenizes has the workload's length and sharing: equal
 * prefixes give equal text, a request's own tokens give its own words, and a Mooncake trace's
 * hash ids (512-token blocks) give the same text wherever they recur.
 */
import type { Arrival } from '../workload/workloads.ts';
import type { Workload } from '../workload/types.ts';
import { builtinVocab, type WordVocab } from './words.ts';

export interface PromptRequest {
  /** The arrival's index in the workload (0-based). */
  index: number;
  arrival: Arrival;
  /** The prompt text: exactly `arrival.promptLength` tokens for the builtin tokenizer. */
  text: string;
}

/** Arrivals with their prompt text, generated lazily (memory stays bounded). */
export function* promptStream(
  workload: Workload,
  limit = Number.POSITIVE_INFINITY,
  vocab: WordVocab = builtinVocab(),
): Generator<PromptRequest> {
  const it = workload.arrivals();
  for (let n = 0; n < limit; n++) {
    const next = it.next();
    if (next.done) return;
    const { tokens } = workload.materialize(next.value);
    yield { index: n, arrival: next.value, text: vocab.text(tokens) };
  }
}
