/**
 * The llm-d 37 %-capacity replay (src/sim/published/llmd37Capacity.ts): its setup is the
 * published one as flags, and on a shortened ladder (the warm-up stage and the 8 QPS stage) the
 * figures fall on the sides the full replay's do (docs/simulator.md): the prefix-aware runs far
 * ahead of random in hits and TTFT, the estimated one behind the precise one in hits. Deterministic, so sides are asserted, not values.
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

const RUN = PUBLISHED_HARNESS_RUNS['llm-d-37-capacity']!;
const SMALL = withFlag(RUN.simArgs, '--rate-ladder', '10x20,8x10');

describe('llm-d-37-capacity replay', () => {
  test('the setup parses to the published pods, pool and ladder', () => {
    assert.ok(PUBLISHED_NAMES.includes('llm-d-37-capacity'));
    const base = publishedSetup(RUN.simArgs);
    assert.equal(base.replicas, 4);
    assert.equal(base.engine.blockSize * base.engine.kvBlocks!, 461_376);
    assert.equal(base.metricsAs, 'inference-perf');
    const shape = base.workload.shape;
    assert.ok(shape?.kind === 'ladder');
    assert.equal(shape.stages.length, 10);
    assert.equal(
      shape.stages.reduce((s, st) => s + st.durationS, 0),
      975,
    );
  });

  test('scaled down: every run served, prefix-aware ahead of random; same seed, same figures', () => {
    const r = replayHarness(RUN, publishedSetup, SMALL);
    const [random, estimated, precise] = r.rows;
    for (const row of r.rows) {
      assert.equal(row.failed, 0);
      assert.equal(row.completed, random!.completed);
    }
    assert.ok(precise!.hitRate > random!.hitRate + 0.3);
    // The estimated record, an LRU of 2,200 blocks of 256 characters a pod (the report's
    // prefix-cache-scorer parameters), forgets groups the pods still hold: ahead of random, behind
    // precise.
    assert.ok(estimated!.hitRate > random!.hitRate + 0.2);
    assert.ok(estimated!.hitRate < precise!.hitRate - 0.05);
    assert.ok(random!.simulated.ttftMeanMs > 3 * precise!.simulated.ttftMeanMs);
    assert.ok(precise!.simulated.outputTokensPerS > random!.simulated.outputTokensPerS);
    assert.match(formatHarnessReplay(r), /37-capacity\/README\.md/);
    const again = replayHarness({ ...RUN, runs: [RUN.runs[2]!] }, publishedSetup, SMALL);
    assert.deepEqual(again.rows[0], precise);
  });
});
