/** `kvroute sim --replay-published`: the published figures beside simulated ones, flags checked. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { UsageError } from '../../src/cli/args.ts';
import { replayPublished } from '../../src/cli/replayPublished.ts';
import { parseSimFlags, run } from '../../src/cli/sim.ts';
import { ReplayTally } from '../../src/sim/published/figures.ts';
import { PUBLISHED_NAMES, PUBLISHED_RUNS } from '../../src/sim/published/index.ts';

describe('sim --replay-published', () => {
  test('sglang-v0.4: 1,024 prompts each, cache-aware beats round robin; same seed, same figures', () => {
    const setup = parseSimFlags([...PUBLISHED_RUNS['sglang-v0.4']!.simArgs]);
    assert.ok(setup !== 'help');
    const r = replayPublished('sglang-v0.4', setup.base);
    assert.deepEqual(
      r.rows.map((row) => row.simulated.requests),
      [1024, 1024],
    );
    assert.deepEqual(replayPublished('sglang-v0.4', setup.base).rows, r.rows);
    assert.ok(Math.abs(r.published.ratio - 1.92) < 0.01);
    const [rr, ca] = r.rows;
    assert.ok(ca!.simulated.hitRate > rr!.simulated.hitRate);
    assert.ok(r.simulated.ratio > 1);
    // The targets the replay reaches (docs/simulator.md): each hit rate within 10 points, each
    // token/s within 25 %, the ratio within 15 %.
    assert.ok(Math.abs(rr!.simulated.hitRate - 0.2) < 0.1);
    assert.ok(Math.abs(ca!.simulated.hitRate - 0.75) < 0.1);
    assert.ok(Math.abs(rr!.simulated.tokensPerS / 82_665 - 1) < 0.25);
    assert.ok(Math.abs(ca!.simulated.tokensPerS / 158_596 - 1) < 0.25);
    assert.ok(Math.abs(r.simulated.ratio / 1.92 - 1) < 0.15);
  });

  test('an unknown name or another flag is a usage error', async () => {
    await assert.rejects(
      run(['--replay-published', 'nope']),
      (e: unknown) =>
        e instanceof UsageError &&
        e.message === `--replay-published must be one of ${PUBLISHED_NAMES.join(', ')}; got 'nope'`,
    );
    await assert.rejects(
      run(['--replay-published', 'sglang-v0.4', '--replicas', '4']),
      (e: unknown) => e instanceof UsageError && /drop --replicas/.test(e.message),
    );
  });
});

describe('the replay counts hits as the publication did', () => {
  const record = (promptTokens: number, cachedTokens: number, resumedPrefixTokens?: number) => ({
    arrivalMs: 0,
    promptTokens,
    cachedTokens,
    endMs: 1000,
    ...(resumedPrefixTokens !== undefined && { resumedPrefixTokens }),
  });

  test('cached: cached prompt tokens over prompt tokens, chunks ignored', () => {
    const tally = new ReplayTally(0, 'cached');
    tally.add(record(2176, 2048));
    tally.add(record(2176, 0, 1664));
    assert.equal(tally.figures().hitRate, 2048 / 4352);
  });

  test("sglang-log: a chunked prompt's earlier chunks are hits of its next batch, and in the base", () => {
    // SGLang's PrefillAdder.add_inflight_req (python/sglang/srt/managers/schedule_policy.py)
    // logs len(req.prefix_indices), the chunks already computed, as the batch's hit tokens,
    // and log_prefill_stats (scheduler.py) divides hits by hits plus extended tokens.
    const tally = new ReplayTally(0, 'sglang-log');
    tally.add(record(2176, 2048));
    // Prefilled as 1,664 then 512 tokens: the second batch logs 1,664 hit and 512 extended.
    tally.add(record(2176, 0, 1664));
    assert.equal(tally.figures().hitRate, (2048 + 1664) / (4352 + 1664));
  });
});
