/**
 * KubeAI's Prefix Hash load balancing (CHWBL) against its Least Load and a plain Kubernetes
 * Service (kubeai.org, "Benchmarking Prefix Aware Load Balancing"; the page is
 * substratusai/kubeai `docs/benchmarks/prefix-aware-load-balancing.md`, with the model, the
 * Service and the benchmark jobs): 8 vLLM (V1) replicas of Llama 3.1 8B Instruct FP8 on one
 * L4 each, FP8 KV cache, 0.95 GPU memory, 16,384 tokens a step; vLLM's benchmark_serving
 * (substratus fork) over ShareGPT conversations of 16 messages or more (800 conversations),
 * 8,000 prompts at 800 req/s with at most 8,000 in flight: the page's headline run.
 */
import type { PublishedHarnessRun } from './harnessReplay.ts';

export const KUBEAI_PREFIX_HASH: PublishedHarnessRun = {
  name: 'kubeai-prefix-hash',
  title: 'KubeAI: Prefix Hash (CHWBL) vs Least Load vs a Kubernetes Service (8,000 in flight)',
  source: 'https://kubeai.org/benchmarks/prefix-aware-load-balancing/',
  setup:
    '8 x L4, one vLLM V1 replica of Llama 3.1 8B Instruct FP8 each (KV FP8, 0.95 GPU memory, ' +
    '--max-num-batched-token 16384); benchmark_serving, ShareGPT conversations of 16+ messages, ' +
    '8,000 prompts (6,656,338 in, 608,447 out tokens), 800 req/s, --max-concurrency 8000',
  simArgs: [
    ...['--workload', 'chat', '--replicas', '8', '--model', 'llama-3.1-8b', '--gpu', 'l4'],
    ...['--tp', '1', '--engine-defaults', 'vllm', '--quantization', 'fp8'],
    ...['--kv-cache-dtype', 'fp8', '--gpu-memory-utilization', '0.95', '--budget', '16384'],
    ...['--burst', '8000', '--max-concurrency', '8000', '--metrics-as', 'vllm'],
  ],
  runs: [
    {
      label: 'K8s Service',
      policy: 'random',
      published: {
        totalTokensPerS: 46_510.4,
        outputTokensPerS: 3895.38,
        durationS: 156.2,
        ttftMeanMs: 48_587.55,
        ttftP99Ms: 101_940.11,
        tpotMeanMs: 215.24,
      },
    },
    {
      label: 'Least Load',
      policy: 'least-load',
      published: {
        totalTokensPerS: 47_609.83,
        outputTokensPerS: 3987.46,
        durationS: 152.59,
        ttftMeanMs: 39_163.8,
        ttftP99Ms: 78_489.26,
        tpotMeanMs: 214.09,
      },
    },
    {
      label: 'Prefix Hash',
      policy: 'chwbl',
      published: {
        totalTokensPerS: 67_333.71,
        outputTokensPerS: 5639.4,
        durationS: 107.89,
        ttftMeanMs: 237.06,
        ttftP99Ms: 619.65,
        tpotMeanMs: 79.99,
      },
    },
  ],
  notes: [
    "the Kubernetes Service is kube-proxy's pick, random per connection (the page calls it " +
      "round robin and says 'randomly distribute'): kvroute's random",
    'lengths differ: the published run averages 832 prompt and 76 output tokens a request ' +
      "(its totals over 8,000); kvroute's chat workload (ShareGPT-like, 161 in and 338 out a " +
      'turn, 3.51 turns, each prompt the history) averages about 1,300 in and 330 out, and no ' +
      'flag sets its lengths or its turns (the published conversations have 8 turns or more): ' +
      'compare the gains more than the absolute figures',
    'arrivals: 800 req/s over 8,000 prompts is 10 s of sending against a run of 108 to 156 s, ' +
      'so the replay sends all 8,000 at t = 0 (--burst) under the same in-flight cap; the ' +
      "fork's order of turns within a conversation is not published: the chat workload's " +
      'first 8,000 turns in time order',
    "CHWBL as KubeAI's defaults (load factor 125 %, 256 replicas a node, 100 characters of " +
      "prefix); max-num-seqs vLLM's default for a GPU under 70 GiB (256); --max-model-len 16384 " +
      'is not modelled (no chat prompt reaches it)',
    'the roofline cost model (no measured L4 profile)',
  ],
};
