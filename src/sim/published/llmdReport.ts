/**
 * The setup both llm-d-kv-cache-manager benchmarking reports share (`benchmarking/37-capacity/`
 * and `benchmarking/73-capacity/README.md`): inference-perf's shared_prefix data on vLLM pods,
 * its load stages as a rate ladder with no separate warm-up, its metrics as inference-perf
 * computes them, blocks of 64 tokens (the precise scorer's tokenProcessorConfig.blockSize, which
 * must equal vLLM's for its hashes to match) and the approximate index forgetting as llm-d's.
 */

export interface LlmdReportSetup {
  /** shared_prefix: num_groups, num_prompts_per_group, system_prompt_len, question_len. */
  groups: number;
  promptsPerGroup: number;
  systemPromptTokens: number;
  questionTokens: number;
  /** Output tokens a request, as replayed. */
  outputTokens: number;
  pods: number;
  model: string;
  gpu: string;
  tp: number;
  /** The pod's KV pool, fixed to the report's, in blocks of 64 tokens. */
  kvBlocks: number;
  /** inference-perf's load.stages, `rate x duration s` each. */
  stages: string;
}

/** `kvroute sim`'s arguments for a report's setup. */
export function llmdReportSimArgs(s: LlmdReportSetup): string[] {
  return [
    ...['--workload', 'shared-prefix', '--num-groups', `${s.groups}`],
    ...['--num-prompts-per-group', `${s.promptsPerGroup}`],
    ...['--system-prompt-len', `${s.systemPromptTokens}`, '--question-len', `${s.questionTokens}`],
    ...['--output-len', `${s.outputTokens}`, '--replicas', `${s.pods}`, '--model', s.model],
    ...['--gpu', s.gpu, '--tp', `${s.tp}`, '--engine-defaults', 'vllm'],
    ...['--block-size', '64', '--kv-blocks', `${s.kvBlocks}`],
    ...['--rate-ladder', s.stages, '--warmup', '0', '--metrics-as', 'inference-perf'],
    ...['--approx-forget', 'peer'],
  ];
}
