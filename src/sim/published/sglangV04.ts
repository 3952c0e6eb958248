/**
 * SGLang v0.4's cache-aware router against round robin (LMSYS blog, 2024-12-04): 8 x A100 80 GB
 * data-parallel workers of Llama 3.1 8B, SGLang's generated shared-prefix benchmark (64 groups x
 * 16 prompts of a 2,048-token system prompt + a 128-token question, 256 output tokens), all
 * requests sent at once.
 */
import type { PublishedRun } from './types.ts';

export const SGLANG_V04: PublishedRun = {
  name: 'sglang-v0.4',
  title: 'SGLang v0.4: cache-aware load balancer vs round robin',
  source: 'https://lmsys.org/blog/2024-12-04-sglang-v0-4/',
  setup:
    '8 x A100 80 GB, one Llama 3.1 8B (BF16) worker each; 64 groups x 16 prompts, 2,048 shared + ' +
    '128 own tokens, 256 output tokens, all sent at once',
  simArgs: [
    ...['--workload', 'groups', '--replicas', '8', '--model', 'llama-3.1-8b'],
    ...['--gpu', 'a100-80gb', '--tp', '1', '--engine-defaults', 'sglang', '--dtype', 'bf16'],
    ...['--warmup', '0', '--duration', '3600'],
  ],
  burst: { order: 'grouped' },
  outputTokens: 256,
  runs: [
    { label: 'round robin', policy: 'round-robin', hitRate: 0.2, tokensPerS: 82_665 },
    { label: 'cache aware', policy: 'sglang', hitRate: 0.75, tokensPerS: 158_596 },
  ],
  notes: [
    'prompts reach the router group by group (bench_serving generates them so; the replay does ' +
      "not shuffle them), so round robin puts each group's two prompts per worker side by side " +
      'in the queue: they are prefilled in the same step and neither finds the other cached',
    'the roofline cost model at 50 % MFU and 75 % MBU, not a measured A100 profile',
  ],
};
