/**
 * The KubeAI Prefix Hash replay (src/sim/published/kubeaiPrefixHash.ts): its setup is the
 * published one as flags, and with a tenth of the prompts and of the in-flight cap the figures
 * fall on the sides the full replay's do (docs/simulator.md): Prefix Hash keeps more of each
 * conversation's history cached and serves faster than the Kubernetes Service and Least Load,
 * by far less than published. Deterministic, so sides are asserted, not values.
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

const RUN = PUBLISHED_HARNESS_RUNS['kubeai-prefix-hash']!;
const SMALL = withFlag(withFlag(RUN.simArgs, '--burst', '800'), '--max-concurrency', '800');

describe('kubeai-prefix-hash replay', () => {
  test('the setup parses to the published fleet, engines and client', () => {
    assert.ok(PUBLISHED_NAMES.includes('kubeai-prefix-hash'));
    const base = publishedSetup(RUN.simArgs);
    assert.equal(base.replicas, 8);
    assert.equal(base.engine.budgetTokens, 16384);
    assert.equal(base.engine.maxSeqs, 256);
    assert.equal(base.maxConcurrency, 8000);
    assert.equal(base.metricsAs, 'vllm');
    assert.deepEqual(base.workload.shape, { kind: 'burst', requests: 8000 });
    assert.deepEqual(
      RUN.runs.map((p) => p.policy),
      ['random', 'least-load', 'chwbl'],
    );
  });

  test('scaled down: every prompt served, Prefix Hash ahead by less than published; same seed, same figures', () => {
    const r = replayHarness(RUN, publishedSetup, SMALL);
    const [service, leastLoad, prefixHash] = r.rows;
    for (const row of r.rows) {
      assert.equal(row.completed, 800);
      assert.equal(row.failed, 0);
    }
    assert.ok(prefixHash!.hitRate > service!.hitRate + 0.2);
    assert.ok(prefixHash!.hitRate > leastLoad!.hitRate + 0.2);
    assert.ok(prefixHash!.simulated.ttftMeanMs < service!.simulated.ttftMeanMs);
    for (const figure of ['totalTokensPerS', 'ttftMeanMs'] as const) {
      const gain = r.gains.find((g) => g.label === 'Prefix Hash' && g.figure === figure)!;
      assert.ok(gain.simulated > 1, `${figure}: ${gain.simulated}`);
      assert.ok(gain.simulated < gain.published, `${figure}: ${gain.simulated}`);
    }
    const text = formatHarnessReplay(r);
    assert.match(text, /kubeai\.org\/benchmarks\/prefix-aware-load-balancing/);
    const again = replayHarness({ ...RUN, runs: [RUN.runs[2]!] }, publishedSetup, SMALL);
    assert.deepEqual(again.rows[0], prefixHash);
  });
});
