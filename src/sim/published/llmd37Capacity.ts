/**
 * llm-d's precise prefix-cache scorer against its estimating scorer and random routing at 37 %
 * of the fleet's KV capacity (llm-d-kv-cache-manager benchmarking report
 * `benchmarking/37-capacity/README.md`: the inference-perf profile, the EndpointPickerConfigs
 * and the figures): 4 vLLM pods of Llama 3.1 70B Instruct with 461,376 tokens of KV each;
 * inference-perf's shared_prefix data, 83 groups x 3 prompts of an 8,000-token system prompt +
 * a 1,000-token question, 1,000 output tokens (ignore_eos), constant-rate stages from a 10 QPS
 * warm-up through 3 to 20 QPS (975 s of sending), each waiting for its requests to end as
 * inference-perf runs them (llmdReport.ts).
 */
import type { PublishedHarnessRun } from './harnessReplay.ts';
import { llmdReportSimArgs } from './llmdReport.ts';

/** inference-perf's load.stages of the report, rate x duration s. */
const STAGES = '10x25,3x210,4x180,5x120,6x120,8x90,10x70,12x60,15x50,20x50';

export const LLMD_37_CAPACITY: PublishedHarnessRun = {
  name: 'llm-d-37-capacity',
  title:
    'llm-d: precise vs estimated prefix-cache scoring vs random (37 % capacity, Llama 3.1 70B)',
  source:
    'https://github.com/llm-d/llm-d-kv-cache-manager/blob/main/benchmarking/37-capacity/README.md',
  setup:
    '4 vLLM pods of Llama 3.1 70B Instruct, 461,376 KV tokens a pod (4 x H100 a pod, TP 4); ' +
    'inference-perf shared_prefix, 83 groups x 3 prompts, 8,000 shared + 1,000 own tokens, ' +
    '1,000 out; stages 10 QPS x 25 s warm-up, then 3 to 20 QPS over 950 s',
  simArgs: llmdReportSimArgs({
    groups: 83,
    promptsPerGroup: 3,
    systemPromptTokens: 8000,
    questionTokens: 1000,
    outputTokens: 1000,
    pods: 4,
    model: 'llama-3.1-70b',
    gpu: 'h100-sxm',
    tp: 4,
    kvBlocks: 7209,
    stages: STAGES,
  }),
  runs: [
    {
      label: 'random',
      policy: 'random',
      published: {
        stageMeanOutputTokensPerS: 2991.5,
        ttftP90Ms: 84_938,
        ttftMeanMs: 40_915,
      },
    },
    {
      label: 'estimate-prefix-cache_load',
      policy: 'llmd',
      // The report's estimate-prefix-cache_load EndpointPickerConfig (the queue scorer stands in
      // for its active-request-scorer).
      args: [
        ...['--index', 'approx', '--scorer-weights', 'prefix=2,kv=1,queue=1'],
        ...[
          '--prefix-cache-scorer',
          'hashBlockSize=256,maxPrefixBlocksToMatch=256,lruCapacityPerServer=2200',
        ],
      ],
      published: {
        stageMeanOutputTokensPerS: 3408.6,
        ttftP90Ms: 64_430,
        ttftMeanMs: 25_337,
      },
    },
    {
      label: 'precise-prefix-cache_load',
      policy: 'llmd-precise',
      // The report's precise-prefix-cache_load EndpointPickerConfig (queue for active requests).
      args: ['--scorer-weights', 'prefix=2,kv=1,queue=1'],
      published: {
        stageMeanOutputTokensPerS: 5380.9,
        ttftP90Ms: 409,
        ttftMeanMs: 259,
      },
    },
  ],
  notes: [
    "figures from the report's 'Summary across QPS' (TTFT over every request, the warm-up " +
      "included, as replayed; output tok/s the mean of the stages', see below)",
    "GPUs: 4 x H100 a pod (TP 4), as the report's first version says (2bb0a20, 2025-09-09: " +
      "'4 H100 GPUs (Tensor-Parallelism=4)'); the version replayed gives only the KV pool, " +
      "461,376 tokens a pod, which Llama 3.1 70B's 320 KiB a token fits on 4 x 80 GB at 0.9 after its weights; " +
      'the pool is fixed to it (7,209 blocks of 64, the block size assumed from the precise ' +
      "scorer's tokenProcessorConfig.blockSize)",
    'load (active-request and KV-utilization scorers, no prefix scorer) has no kvroute policy ' +
      'and is not replayed',
    'precise: prefix x 2, KV utilization x 1, active requests x 1 in the report, replayed ' +
      "2/1/1 (--scorer-weights) with the queue scorer in place of llm-d-inference-scheduler's " +
      'active-request-scorer (not modelled)',
    'estimated: active requests x 1, KV x 1, prefix x 2 (--scorer-weights prefix=2,kv=1,queue=1, ' +
      'the queue scorer for active requests; 3/2/2 picks alike here), hashBlockSize 256, ' +
      'maxPrefixBlocksToMatch 256, lruCapacityPerServer 2,200 (--prefix-cache-scorer; the ' +
      "inference extension's v1.0.x of September 2025 reads hashBlockSize, renamed blockSize only " +
      "in v1.1.0): blocks of 256 characters, 64 tokens at 4 a token, so a pod's record holds " +
      '140,800 tokens, where the ~21 groups routed to it take ~2,600 blocks of prefix: it forgets ' +
      'groups the pods still cache, and recorded in prompt order a forgotten group loses its first ' +
      'block, so its whole prefix (prefix plugin.go and indexer.go at v1.0.1, 2b313acf)',
    "the report's Requests/s is the rate requests were sent (inference-perf's load_summary " +
      'achieved_rate), about the stage rate for every policy, and is not compared; output ' +
      'tok/s is its Summary across QPS, the mean of its 9 per-QPS rows (no warm-up row), ' +
      "compared with the mean of the simulated stages' after the first",
    "load.type constant (inference-perf's ConstantLoadTimer: exponential gaps scaled to fill " +
      "the stage) is replayed as kvroute's Poisson ladder",
    'the roofline cost model (no measured profile of Llama 3.1 70B); the client as inference-' +
      "perf of September 2025 (llmdReport.ts): stages drained one by one, aiohttp's 300 s timeout",
  ],
};
