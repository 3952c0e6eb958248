/**
 * The `shared-prefix` workload against inference-perf's SharedPrefixDataGenerator: num_groups x
 * num_prompts_per_group prompts, each a group's system_prompt_len-token system prompt and its own
 * question_len-token question, shuffled once and then sent in that order again and again, every
 * request asking for output_len tokens; defaults 10, 10, 100, 50, 50 as upstream's config.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { UsageError } from '../../src/cli/args.ts';
import { parseSimFlags } from '../../src/cli/sim.ts';
import { buildWorkload } from '../../src/workload/spec.ts';
import { SHARED_PREFIX_DEFAULTS } from '../../src/workload/sharedPrefixGroups.ts';
import type { Arrival } from '../../src/workload/workloads.ts';

const shape = {
  numGroups: 4,
  numPromptsPerGroup: 3,
  systemPromptLen: 64,
  questionLen: 20,
  outputLen: 7,
};

describe('shared-prefix', () => {
  const workload = buildWorkload(
    { kind: 'synthetic', name: 'shared-prefix', ratePerS: 50, sharedPrefix: shape },
    { seed: 5, blockSize: 16, durationMs: 2_000 },
  );
  const arrivals: Arrival[] = [];
  const it = workload.arrivals();
  for (let a = it.next(); !a.done; a = it.next()) arrivals.push(a.value);
  const prompts = shape.numGroups * shape.numPromptsPerGroup;

  test("upstream's defaults", () => {
    assert.deepEqual(SHARED_PREFIX_DEFAULTS, {
      numGroups: 10,
      numPromptsPerGroup: 10,
      systemPromptLen: 100,
      questionLen: 50,
      outputLen: 50,
    });
  });

  test('every prompt once per pass, then the same order again, the same tokens', () => {
    assert.ok(arrivals.length > 3 * prompts);
    const first = arrivals.slice(0, prompts).map((a) => a.seed);
    assert.deepEqual(
      [...first].sort((a, b) => a - b),
      Array.from({ length: prompts }, (_, i) => i),
    );
    assert.notDeepEqual(
      first,
      [...first].sort((a, b) => a - b),
      'shuffled once',
    );
    for (let k = prompts; k < arrivals.length; k++) {
      assert.equal(arrivals[k]!.seed, arrivals[k - prompts]!.seed);
    }
    const a = workload.materialize(arrivals[0]!);
    const b = workload.materialize(arrivals[prompts]!);
    assert.deepEqual(a.tokens, b.tokens);
    for (const x of arrivals) {
      assert.equal(x.promptLength, shape.systemPromptLen + shape.questionLen);
      assert.equal(x.outputTokens, shape.outputLen);
      assert.equal(x.customer, Math.floor(x.seed / shape.numPromptsPerGroup));
    }
  });

  test("a group's prompts share its system prompt, and only that", () => {
    const byPrompt = new Map(arrivals.slice(0, prompts).map((a) => [a.seed, a]));
    const t0 = workload.materialize(byPrompt.get(0)!).tokens;
    const t1 = workload.materialize(byPrompt.get(1)!).tokens; // same group
    const t3 = workload.materialize(byPrompt.get(3)!).tokens; // next group
    const common = (x: Int32Array, y: Int32Array) => {
      let i = 0;
      while (i < x.length && x[i] === y[i]) i++;
      return i;
    };
    assert.ok(common(t0, t1) >= shape.systemPromptLen && common(t0, t1) < t0.length);
    assert.ok(common(t0, t3) < shape.systemPromptLen);
  });

  test("its flags are inference-perf's names; they apply to this workload only", () => {
    const parsed = parseSimFlags([
      '--workload',
      'shared-prefix',
      '--num-groups',
      '8',
      '--output-len',
      '64',
    ]);
    assert.ok(parsed !== 'help');
    assert.deepEqual(parsed.base.workload, {
      kind: 'synthetic',
      name: 'shared-prefix',
      sharedPrefix: { ...SHARED_PREFIX_DEFAULTS, numGroups: 8, outputLen: 64 },
    });
    assert.throws(
      () => parseSimFlags(['--workload', 'seed', '--question-len', '10']),
      (err: unknown) =>
        err instanceof UsageError &&
        err.message === '--question-len applies to --workload shared-prefix',
    );
  });
});
