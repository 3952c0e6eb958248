/**
 * The setup both llm-d-kv-cache-manager benchmarking reports share (`benchmarking/37-capacity/`
 * and `benchmarking/73-capacity/README.md`): inference-perf's shared_prefix data on vLLM pods,
 * its load stages as a rate ladder with no separate warm-up, its metrics as inference-perf
 * computes them, blocks of 64 tokens (the precise scorer's tokenProcessorConfig.blockSize, which
 * must equal vLLM's for its hashes to match) and the approximate index forgetting as llm-d's.
 *
 * The client is inference-perf as of the reports (added 2025-09-09 and 2025-09-21; the profiles
 * name no version, so kubernetes-sigs/inference-perf at 5b1da4d, 2025-09-18, is read):
 * - its stages run one by one, each waiting for all its requests to end (`--drain-stages 2`:
 *   `load_generator.py` `run_stage`, then `load.interval` 1 s and the next stage's 1 s lead);
 * - a request's clock starts at its send (`openai_client.py` `process_request`: `start =
 *   time.perf_counter()` just before `session.post`), as kvroute's does;
 * - its aiohttp session is made with no timeout, so aiohttp's default applies: 300 s in total,
 *   the streamed body included (`aiohttp/client.py` `DEFAULT_TIMEOUT = ClientTimeout(total=5 *
 *   60, sock_connect=30)`, "cumulative for all request operations ... data consuming"); a
 *   timed-out request is recorded as failed (`--client-timeout 300`). inference-perf's own
 *   `request_timeout` came later (b81afa4, 2025-10-15);
 * - its in-flight cap, `load.num_workers` (default `cpu_count()`) x `worker_max_concurrency`
 *   (default 100), is not modelled: `multiprocessing.cpu_count()` counts the machine's CPUs, and
 *   with 16 or more it is 1,600 or more, above any stage's requests (at most 1,548 in 73-capacity's,
 *   1,000 in 37-capacity's), which are all a drained stage ever has in flight.
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
    ...['--rate-ladder', s.stages, '--drain-stages', '2', '--client-timeout', '300'],
    ...['--warmup', '0', '--metrics-as', 'inference-perf'],
    ...['--approx-forget', 'peer'],
  ];
}
