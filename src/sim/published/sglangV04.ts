/**
 * SGLang v0.4's cache-aware router against round robin (LMSYS blog, 2024-12-04): 8 x A100 80 GB
 * data-parallel workers of Llama 3.1 8B, SGLang's generated shared-prefix benchmark (64 groups x
 * 16 prompts of a 2,048-token system prompt + a 128-token question, 256 output tokens), all
 * requests sent at once, group by group.
 *
 * The figures were measured before v0.4.0: they are the table of sgl-project/sglang#2170
 * (2024-11-25, "Original RR DP | 82,665 | 20%", "Cache Aware v1 | 158,596.72 | 7..."), run with
 * `bench_serving.py --dataset-name generated-shared-prefix --generated-input-path
 * ~/.cache/gen.json --generated-input-save-path ~/.cache/gen.json`. Those two flags are the
 * bench_serving of 55bd97f3 (#2093, 2024-11-20) to 4b0a1c93 (#2170, 2024-11-24), whose
 * `sample_generated_shared_prefix_requests` shuffles the questions (`random.shuffle(questions)`)
 * and then appends the requests group by group; the shuffle of the requests themselves
 * (`random.shuffle(input_requests)`) came with #2170, which also dropped those flags. The round
 * robin is the DataParallelController's (`--dp-size 8`, `load_balance_method` "round_robin",
 * data_parallel_controller.py `round_robin_scheduler`), one request after another.
 */
import type { PublishedRun } from './types.ts';

export const SGLANG_V04: PublishedRun = {
  name: 'sglang-v0.4',
  title: 'SGLang v0.4: cache-aware load balancer vs round robin',
  source: 'https://lmsys.org/blog/2024-12-04-sglang-v0-4/',
  setup:
    '8 x A100 80 GB, one Llama 3.1 8B (BF16) worker each; 64 groups x 16 prompts, 2,048 shared + ' +
    '128 own tokens, 256 output tokens, all sent at once, group by group',
  simArgs: [
    ...['--workload', 'groups', '--replicas', '8', '--model', 'llama-3.1-8b'],
    ...['--gpu', 'a100-80gb', '--tp', '1', '--engine-defaults', 'sglang-v0.4', '--dtype', 'bf16'],
    ...['--warmup', '0', '--duration', '3600', '--approx-forget', 'peer'],
  ],
  burst: { order: 'grouped' },
  outputTokens: 256,
  hitCount: 'sglang-log',
  runs: [
    { label: 'round robin', policy: 'round-robin', hitRate: 0.2, tokensPerS: 82_665 },
    { label: 'cache aware', policy: 'sglang', hitRate: 0.75, tokensPerS: 158_596 },
  ],
  notes: [
    'the figures are those of sgl-project/sglang#2170 (2024-11-25; the blog repeats them): ' +
      'round robin is the DataParallelController of `--dp-size 8`, cache aware the router v1 of ' +
      '#2114 (every request by prefix match: cache_routing_prob 1.0), here the `sglang` policy ' +
      "(v0.4's router, shortest queue past 32 requests of imbalance). Group by group they route " +
      'alike: a new group goes to the smallest tree, its 15 others follow, and the queues never ' +
      'differ by more than 16',
    'prompts reach the fleet group by group: the runs loaded a dataset saved with ' +
      '--generated-input-save-path, a flag of bench_serving.py from 55bd97f3 (#2093) to ' +
      '4b0a1c93 (#2170), whose sample_generated_shared_prefix_requests shuffled only the ' +
      'questions; `random.shuffle(input_requests)` came with #2170, after the runs. Round robin ' +
      'so sends each worker two prompts of every group, next to each other in its queue: most ' +
      "pairs are prefilled in the same batch or the next, before the overlap scheduler's delay " +
      'lets the first be matched; cache aware sends each worker 8 whole groups, 16 prompts in ' +
      'a row',
    "hit rates as SGLang's scheduler logs them (log_prefill_stats): cumulative since the " +
      "server started (tree_cache_metrics), per prefill batch, a chunked prompt's earlier " +
      'chunks counting as matched prefix (PrefillAdder.add_inflight_req)',
    "SGLang's scheduler of those runs and of v0.4.0 (--engine-defaults sglang-v0.4): prefill " +
      'and decode batches apart, prefill first (get_next_batch_to_run); the overlap ' +
      "scheduler's one-batch delay before a prefilled prompt enters the radix cache " +
      '(event_loop_overlap); LPM while the waiting list holds at most 128 requests ' +
      '(calc_priority, schedule_policy.py); chunked prefill 8,192',
    'no retraction: 128 requests a worker under both policies (round robin: 311,296 tokens ' +
      'even without sharing) against a pool of 414,581 tokens, so the new_token_ratio admission ' +
      'never binds; LPM is on from the start (at most 128 waiting)',
    "not modelled: bench_serving's single test prompt before the run (one of 1,025) and the " +
      'in-batch prefix check (sgl-project/sglang#2442, 2024-12-11, after v0.4.0)',
    'the roofline cost model at 50 % MFU and 75 % MBU, not a measured A100 profile',
  ],
};
