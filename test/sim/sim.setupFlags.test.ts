/**
 * `kvroute sim`'s setup flags: dtypes, memory fraction, and vLLM's or SGLang's own defaults for
 * the budget and running sequences (vllm/engine/arg_utils.py get_batch_defaults; sglang
 * server_args.py chunked_prefill_size, mem_fraction_static; model_runner.py max_num_reqs).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { UsageError } from '../../src/cli/args.ts';
import { parseSimFlags } from '../../src/cli/sim.ts';
import { makeEngineConfig } from '../../src/engine/options.ts';
import { kvPoolTokens } from '../../src/model/cost.ts';

const engineOf = (...argv: string[]) => {
  const parsed = parseSimFlags(['--workload', 'groups', ...argv]);
  assert.ok(parsed !== 'help');
  return parsed.base.engine;
};

describe('sim setup flags', () => {
  test('without them the engine options are the defaults, unchanged', () => {
    const e = engineOf();
    assert.equal(e.weightsDtype, undefined);
    assert.equal(e.memoryUtilization, undefined);
    assert.equal(e.budgetTokens, 2048);
    assert.equal(e.maxSeqs, 64);
  });

  test('--dtype, --kv-cache-dtype, --quantization, --gpu-memory-utilization reach the spec', () => {
    const spec = makeEngineConfig(
      engineOf(
        ...['--model', 'llama-3.1-8b', '--gpu', 'a100-80gb', '--tp', '1', '--dtype', 'float16'],
        ...['--kv-cache-dtype', 'fp8_e4m3', '--gpu-memory-utilization', '0.8'],
      ),
    ).spec;
    assert.equal(spec.weightsDtype, 'bf16');
    assert.equal(spec.kvDtype, 'fp8');
    assert.equal(spec.memoryUtilization, 0.8);
    const q = makeEngineConfig(
      engineOf('--model', 'llama-3.1-8b', '--gpu', 'l4', '--tp', '1', '--quantization', 'fp8'),
    ).spec;
    assert.equal(q.weightsDtype, 'fp8');
    assert.equal(q.gpu.name, 'l4');
  });

  test('vLLM: 8192/1024 on an H100, 2048/256 on an A100 80 GB and an L4', () => {
    const h100 = engineOf('--engine-defaults', 'vllm', '--gpu', 'h100-sxm', '--tp', '4');
    assert.deepEqual([h100.budgetTokens, h100.maxSeqs, h100.memoryUtilization], [8192, 1024, 0.9]);
    assert.equal(h100.weightsDtype, 'bf16');
    for (const gpu of ['a100-80gb', 'l4']) {
      const e = engineOf('--engine-defaults', 'vllm', '--model', 'llama-3.1-8b', '--gpu', gpu);
      assert.deepEqual([e.budgetTokens, e.maxSeqs], [2048, 256], gpu);
    }
  });

  test('SGLang: chunked prefill by GPU memory, 0.88 at TP 1, running requests from the pool', () => {
    const a100 = engineOf(
      ...['--engine-defaults', 'sglang', '--model', 'llama-3.1-8b', '--gpu', 'a100-80gb'],
      ...['--tp', '1'],
    );
    assert.equal(a100.budgetTokens, 8192);
    assert.equal(a100.memoryUtilization, 0.88);
    assert.equal(a100.activationReserveBytes, 0);
    // (80e9 x 0.88 - 16.06e9) / 131,072 B = 414,581 tokens: 414,581 / 131,072 x 512 = 1,619,
    // raised to 2,048.
    assert.equal(kvPoolTokens(makeEngineConfig(a100).spec), 414_581);
    assert.equal(a100.maxSeqs, 2048);
    const l4 = engineOf('--engine-defaults', 'sglang', '--model', 'qwen2.5-7b', '--gpu', 'l4');
    assert.equal(l4.budgetTokens, 2048);
  });

  test('a given --budget or --max-seqs wins over the engine defaults', () => {
    const e = engineOf('--engine-defaults', 'vllm', '--gpu', 'h200', '--budget', '4096');
    assert.deepEqual([e.budgetTokens, e.maxSeqs], [4096, 1024]);
  });

  test('the new GPUs and models', () => {
    const a40 = makeEngineConfig(
      engineOf('--model', 'qwen3-32b', '--gpu', 'a100-40gb', '--tp', '2', '--dtype', 'bf16'),
    ).spec;
    assert.equal(a40.gpu.hbmBytes, 40e9);
    assert.equal(a40.model.layers, 64);
    const a10g = makeEngineConfig(
      engineOf('--model', 'qwen2.5-7b', '--gpu', 'a10g', '--tp', '1', '--dtype', 'bf16'),
    ).spec;
    assert.equal(a10g.model.kvHeads, 4);
  });

  for (const [flag, value, accepted] of [
    ['dtype', 'int4', 'auto, bf16, bfloat16, fp16, float16, half, fp8'],
    ['kv-cache-dtype', 'int8', 'auto, bf16, bfloat16, fp16, fp8, fp8_e4m3, fp8_e5m2'],
    ['quantization', 'awq', 'fp8'],
    ['engine-defaults', 'trt', 'kvroute, vllm, sglang, sglang-v0.4'],
  ] as const) {
    test(`--${flag} ${value}: a usage error naming the flag and the accepted values`, () => {
      assert.throws(
        () => engineOf(`--${flag}`, value),
        (err: unknown) =>
          err instanceof UsageError &&
          err.message === `--${flag} must be one of ${accepted}; got '${value}'`,
      );
    });
  }

  test('--gpu-memory-utilization outside (0, 1] and a model that does not fit are usage errors', () => {
    assert.throws(() => engineOf('--gpu-memory-utilization', '1.2'), /--gpu-memory-utilization/);
    assert.throws(() => engineOf('--gpu-memory-utilization', '0'), /--gpu-memory-utilization/);
    assert.throws(
      () => engineOf('--model', 'llama-3.1-70b', '--gpu', 'l4', '--tp', '2', '--dtype', 'bf16'),
      (err: unknown) => err instanceof UsageError && /does not fit/.test(err.message),
    );
  });
});
