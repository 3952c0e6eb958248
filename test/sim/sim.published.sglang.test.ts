/**
 * The SGLang v0.4 replay runs SGLang v0.4's scheduler (`--engine-defaults sglang-v0.4`:
 * prefill first, the overlap scheduler's delay, LPM; src/engine/engineDefaults.ts), and where
 * its figures fall against the published ones (docs/simulator.md). Deterministic, so the sides
 * are asserted, not the figures.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { replayPublished } from '../../src/cli/replayPublished.ts';
import { parseSimFlags } from '../../src/cli/sim.ts';
import { PUBLISHED_RUNS } from '../../src/sim/published/index.ts';

const RUN = PUBLISHED_RUNS['sglang-v0.4']!;

function setup() {
  const parsed = parseSimFlags([...RUN.simArgs]);
  assert.ok(parsed !== 'help');
  return parsed.base;
}

describe('sglang-v0.4 replay with SGLang v0.4 scheduler', () => {
  test("the setup's engines take SGLang v0.4's scheduler and limits", () => {
    const { engine } = setup();
    assert.deepEqual(engine.scheduling, {
      batchShape: 'prefill-first',
      schedulePolicy: 'lpm',
      deferPrefixInsert: true,
    });
    assert.equal(engine.budgetTokens, 8192);
    assert.equal(engine.maxSeqs, 2048);
  });

  test('figures: which side of the published each falls, and the scheduler moves them', () => {
    const base = setup();
    const r = replayPublished('sglang-v0.4', base);
    const [rr, ca] = r.rows;
    assert.deepEqual(
      r.rows.map((row) => row.simulated.requests),
      [1024, 1024],
    );
    // Round robin keeps more hits than published (not reproduced), cache aware is near.
    assert.ok(rr!.simulated.hitRate > 0.2 + 0.1);
    assert.ok(Math.abs(ca!.simulated.hitRate - 0.75) < 0.1);
    // Token/s within 25 % of published for both; the ratio below published.
    for (const row of r.rows) {
      assert.ok(Math.abs(row.simulated.tokensPerS / row.published.tokensPerS - 1) < 0.25);
    }
    assert.ok(r.simulated.ratio > 1 && r.simulated.ratio < r.published.ratio);
    // Without SGLang's scheduler (vLLM's step, kvroute's queue) round robin keeps more hits
    // and serves more tokens/s: the modes are in force in the replay.
    const { scheduling: _s, ...engine } = base.engine;
    const plain = replayPublished('sglang-v0.4', { ...base, engine });
    assert.ok(plain.rows[0]!.simulated.hitRate > rr!.simulated.hitRate);
    assert.ok(plain.rows[0]!.simulated.tokensPerS > rr!.simulated.tokensPerS);
  });
});
