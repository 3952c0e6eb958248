/**
 * vLLM's sampling knobs as node-llama-cpp's sampler options for one drawn token. Pure.
 *
 * vLLM's top-k and top-p are off unless given; node-llama-cpp's defaults are 40 and 0.95 (an
 * unset option takes them). A knob that is off is passed as null, which node-llama-cpp leaves out
 * of the sampler chain (`removeNullFields` in its LlamaContext). Top-k 0 would not do: it becomes
 * top-k of the whole vocabulary, a sort of every logit per token (128,256 on the tiny model,
 * about half of a 31 ms draw) that changes no probability.
 */
import type { SamplingParams } from '../../types.ts';

/** Below this temperature a request is greedy, as in vLLM. */
export const GREEDY_TEMPERATURE = 1e-5;

/** `generateNext.options` of a controlled evaluation, as node-llama-cpp types them. */
interface Options {
  temperature: number;
  /** null (typed as a number there, where only null's removal is documented in code): off. */
  topK?: number;
  topP?: number;
  minP?: number;
  seed?: number;
}

/** The options for the request's `drawn`-th token (its prompt plus the tokens drawn so far). */
export function samplerOptions(s: SamplingParams, drawn: number): Options {
  if (s.temperature < GREEDY_TEMPERATURE) return { temperature: 0 };
  return {
    temperature: s.temperature,
    topK: (s.topK !== null && s.topK > 0 ? s.topK : null) as number,
    topP: (s.topP !== null && s.topP < 1 ? s.topP : null) as number,
    minP: s.minP ?? 0,
    // One seed per drawn token: the same request and seed draw the same tokens.
    seed: (s.seed + drawn) >>> 0,
  };
}
