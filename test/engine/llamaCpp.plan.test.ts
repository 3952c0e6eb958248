/**
 * The scheduler's plan is what llama.cpp ran, step by step: on a small trace (three prompts, one
 * longer than the budget, at most two running), every step that computes anything is exactly
 * one llama.cpp batch whose items are the plan's entries, each with the entry's token count and
 * the entry's tokens (the prompt chunk the plan names, or the last sampled token for a decode),
 * processed whole. Plus the plan's own shape: decodes first, within the budget, the long prompt
 * chunked.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { LlamaModel } from 'node-llama-cpp';
import { makeEngineConfig } from '../../src/engine/options.ts';
import { LlamaCppEngine } from '../../src/engine/runtime/llamaCpp/engine.ts';
import { loadGgufModel } from '../../src/engine/runtime/llamaCpp/load.ts';
import type { ExecutedStep } from '../../src/engine/runtime/llamaCpp/runtime.ts';
import { ENGINE_DEFAULTS } from '../../src/engine/options.ts';
import type { StepResult } from '../../src/engine/types.ts';
import type { StepPlan } from '../../src/scheduler/types.ts';
import { tinyModelPath } from '../support/tinyModel.ts';

const BUDGET = 24;
let model: LlamaModel;

before(async () => {
  model = await loadGgufModel(await tinyModelPath());
});

after(async () => {
  await model?.dispose();
});

test("each step runs as one llama.cpp batch of exactly the plan's entries", async () => {
  const steps: { result: StepResult; executed: ExecutedStep }[] = [];
  const engine = await LlamaCppEngine.create(
    makeEngineConfig({ ...ENGINE_DEFAULTS, budgetTokens: BUDGET, maxSeqs: 2 }),
    {
      model,
      threads: 1,
      contextTokens: 512,
      traceTokens: true,
      onStep: (result, executed) => steps.push({ result, executed }),
    },
  );
  try {
    const prompts = new Map<string, number[]>([
      ['a', model.tokenize('A short prompt that decodes for a while.', true)],
      [
        'b',
        model.tokenize(
          'A much longer prompt that the budget has to cut into chunks, so that the running ' +
            'request keeps getting its tokens while this one is prefilled piece by piece, as ' +
            'the scheduler seed says it must be done for every step of the engine.',
          true,
        ),
      ],
      ['c', model.tokenize('A third one waits for a free sequence.', true)],
    ]);
    assert.ok(prompts.get('b')!.length > BUDGET, 'b needs more than one step of prefill');
    let arrival = 0;
    for (const [id, tokens] of prompts) {
      engine.add({ id, promptTokens: tokens, maxNewTokens: 6, arrivalMs: arrival++ });
    }
    const sampled = new Map<string, number[]>([...prompts.keys()].map((id) => [id, []]));
    for (let n = 0; engine.hasWork() && n < 200; n++) {
      const result = await engine.step();
      for (const t of result.emitted) sampled.get(t.id)!.push(t.tokenId!);
    }
    assert.equal(engine.hasWork(), false);

    const history = new Map<string, number[]>(
      [...prompts].map(([id, tokens]) => [id, tokens.slice()]),
    );
    let chunkedPrefills = 0;
    let mixedSteps = 0;
    for (const { result, executed } of steps) {
      const plan = result.plan as StepPlan;
      if (plan.entries.length === 0) continue;
      // One batch, its items the plan's entries (by their tokens), each processed whole.
      assert.equal(executed.batches.length, 1, `step ${plan.stepIndex}: one forward pass`);
      const batch = executed.batches[0]!;
      assert.equal(batch.length, plan.entries.length);
      for (const item of batch) assert.equal(item.processAmount, item.tokens.length);
      const key = (tokens: readonly number[]) => tokens.join(',');
      assert.deepEqual(
        batch.map((item) => key(item.tokens)).sort(),
        executed.inputs.map((input) => key(input.tokens)).sort(),
      );
      // Each input is what the plan entry names: its tokens of the request's history so far.
      assert.ok(plan.prefillTokens + plan.decodeTokens <= BUDGET);
      let decodesDone = false;
      plan.entries.forEach((entry, i) => {
        const input = executed.inputs[i]!;
        assert.equal(input.id, entry.id);
        assert.equal(input.tokens.length, entry.tokens);
        const known = history.get(entry.id)!;
        assert.deepEqual(
          input.tokens,
          known.slice(entry.contextTokens, entry.contextTokens + entry.tokens),
        );
        if (entry.kind === 'decode') {
          assert.equal(decodesDone, false, 'decodes come first');
          assert.equal(entry.tokens, 1);
        } else {
          decodesDone = true;
          if (entry.contextTokens + entry.tokens < known.length) chunkedPrefills++;
        }
      });
      if (plan.decodeTokens > 0 && plan.prefillTokens > 0) mixedSteps++;
      for (const t of result.emitted) history.get(t.id)!.push(t.tokenId!);
    }
    assert.ok(mixedSteps >= 1, 'decodes and a prefill chunk ran in one batch');
    assert.ok(chunkedPrefills >= 1, 'the long prompt was chunked by the budget');
    for (const [id, tokens] of sampled) assert.equal(tokens.length, 6, `${id}: 6 tokens`);
    // The third request waited for a sequence: admitted only after one of the first two ended.
    const admittedAt = (id: string) =>
      steps.findIndex(({ result }) => (result.plan as StepPlan).admitted.includes(id));
    const finishedAt = (id: string) =>
      steps.findIndex(({ result }) => result.finished.some((f) => f.id === id));
    assert.ok(admittedAt('c') > Math.min(finishedAt('a'), finishedAt('b')));
  } finally {
    await engine.dispose();
  }
});
