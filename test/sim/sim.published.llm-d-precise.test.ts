/**
 * The llm-d precise-prefix replay (src/sim/published/llmdKvcacheWins.ts): its setup is the
 * published one as flags, and on a shortened ladder (the warm-up stage and two rates of the
 * published ladder, 16 s in all) the figures fall on the sides the full replay's do
 * (docs/simulator.md): the cache-aware runs far ahead of random in hits, TTFT and tokens/s, by
 * less than published in TTFT. Deterministic, so sides are asserted, not values.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { publishedSetup } from '../../src/cli/sim.ts';
import {
  formatHarnessReplay,
  replayHarness,
  withFlag,
} from '../../src/sim/published/harnessReplay.ts';
import { PUBLISHED_HARNESS_RUNS, PUBLISHED_NAMES } from '../../src/sim/published/index.ts';

const RUN = PUBLISHED_HARNESS_RUNS['llm-d-precise']!;
/** The published ladder's warm-up rate and its 40 QPS stage, shortened. */
const SMALL = withFlag(RUN.simArgs, '--rate-ladder', '15x10,40x6');

describe('llm-d-precise replay', () => {
  test('the setup parses to the published fleet, engines and ladder', () => {
    assert.ok(PUBLISHED_NAMES.includes('llm-d-precise'));
    const base = publishedSetup(RUN.simArgs);
    assert.equal(base.replicas, 8);
    assert.equal(base.engine.blockSize, 64);
    assert.equal(base.engine.kvBlocks, 4802);
    assert.equal(base.engine.budgetTokens, 8192);
    assert.equal(base.engine.maxSeqs, 1024);
    assert.equal(base.metricsAs, 'inference-perf');
    assert.equal(base.warmupMs, 0);
    const shape = base.workload.shape;
    assert.ok(shape?.kind === 'ladder');
    assert.equal(shape.stages.length, 17);
    assert.equal(
      shape.stages.reduce((s, st) => s + st.durationS, 0),
      502,
    );
    assert.deepEqual(shape.stages[0], { ratePerS: 15, durationS: 50 });
    assert.deepEqual(shape.stages.at(-1), { ratePerS: 60, durationS: 25 });
    // The estimated run reads the approximate index; the others the KV events.
    assert.equal(publishedSetup([...RUN.simArgs, ...RUN.runs[1]!.args!]).router.index, 'approx');
    assert.equal(base.router.index, 'events');
  });

  test('scaled down: every run served, cache-aware ahead of random; same seed, same figures', () => {
    const r = replayHarness(RUN, publishedSetup, SMALL);
    assert.deepEqual(
      r.rows.map((row) => row.policy),
      ['random', 'llmd', 'llmd-precise'],
    );
    const [random, estimated, precise] = r.rows;
    for (const row of r.rows) {
      assert.equal(row.failed, 0);
      assert.equal(row.completed, random!.completed);
      assert.deepEqual(
        row.figures.map((f) => f.figure),
        ['stageMeanOutputTokensPerS', 'ttftP90Ms', 'ttftMeanMs'],
      );
    }
    // Random loses most of each group's prefix; the cache-aware runs keep what a first visit
    // left (on 16 s of the ladder a group comes about five times).
    assert.ok(random!.hitRate < 0.2);
    assert.ok(precise!.hitRate > random!.hitRate + 0.3);
    assert.ok(estimated!.hitRate > random!.hitRate + 0.3);
    // Random's TTFT several times precise's, yet a smaller gain than the published 171x (the
    // short ladder starts cold), and precise serves more tokens/s than random.
    assert.ok(random!.simulated.ttftMeanMs > 3 * precise!.simulated.ttftMeanMs);
    const gain = r.gains.find((g) => g.label === 'precise-scheduling' && g.figure === 'ttftP90Ms');
    assert.ok(gain !== undefined && gain.published > 170);
    assert.ok(gain.simulated > 3 && gain.simulated < gain.published);
    assert.ok(precise!.simulated.outputTokensPerS > random!.simulated.outputTokensPerS);
    // The table names the source and every run.
    const text = formatHarnessReplay(r);
    assert.match(text, /73-capacity\/README\.md/);
    for (const p of RUN.runs) assert.ok(text.includes(p.label));
    // Deterministic: the precise run again, alone.
    const again = replayHarness({ ...RUN, runs: [RUN.runs[2]!] }, publishedSetup, SMALL);
    assert.deepEqual(again.rows[0], precise);
  });
});
