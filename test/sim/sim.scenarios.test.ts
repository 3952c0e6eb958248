/**
 * Small versions of the router seed's claims, run through the simulator (the full-size commands
 * are in the sim README notes; these keep to a few simulated minutes on a handful of replicas).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { simulate } from '../../src/sim/run.ts';
import { smallSeedConfig } from '../support/sim.ts';
import { makeSyntheticTrace } from '../../src/workload/trace.ts';

const config = smallSeedConfig;

test('a 2 s stale view: the ledger holds TTFT p99, queue terms from reports herd', () => {
  const fresh = simulate(config({}));
  const stale = { staleMs: 2000, reportMs: 100, eventDelayMs: 2000 };
  const ledger = simulate(config({ view: stale }));
  const reports = simulate(
    config({ view: stale, router: { policy: 'cost', index: 'events', queueSource: 'reports' } }),
  );
  assert.ok(
    ledger.ttftMs.p99 <= 1.3 * fresh.ttftMs.p99,
    `ledger ${ledger.ttftMs.p99} vs fresh ${fresh.ttftMs.p99}`,
  );
  assert.ok(
    reports.ttftMs.p99 > 2 * ledger.ttftMs.p99,
    `reports ${reports.ttftMs.p99} vs ledger ${ledger.ttftMs.p99}`,
  );
});

test('hot customer: cost grows owners and keeps its TTFT near the others; hashing does not', () => {
  const hot = (policy: string) =>
    simulate(
      config(
        {
          workload: { kind: 'synthetic', name: 'hot' },
          replicas: 22,
          durationMs: 60_000,
          warmupMs: 20_000,
        },
        policy,
      ),
    );
  const cost = hot('cost');
  const hash = hot('consistent-hash');
  assert.equal(cost.customers.watched, 0);
  assert.ok(Math.max(...cost.owners.watched) >= 2, `owners ${cost.owners.watched.slice(-5)}`);
  const costHot = cost.customers.watchedTtftMs!.p99;
  const costOthers = cost.customers.othersTtftMs!.p99;
  assert.ok(costHot <= 2 * costOthers, `cost: hot ${costHot} vs others ${costOthers}`);
  const hashHot = hash.customers.watchedTtftMs!.p99;
  assert.ok(hashHot > 2 * costHot, `consistent-hash hot ${hashHot} vs cost ${costHot}`);
});

test('low shared fraction: cost is as good as least-queued (the reversal)', () => {
  const low = (policy: string) =>
    simulate(
      config(
        { workload: { kind: 'synthetic', name: 'low-shared', ratePerS: 8 }, replicas: 8 },
        policy,
      ),
    );
  const cost = low('cost');
  const lq = low('least-queued');
  assert.ok(
    Math.abs(cost.ttftMs.p99 / lq.ttftMs.p99 - 1) <= 0.1,
    `cost ${cost.ttftMs.p99} vs least-queued ${lq.ttftMs.p99}`,
  );
});

test('Mooncake-format trace at ~75 % utilization: cost has the lowest TTFT p99', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-trace-'));
  try {
    const path = join(dir, 'trace.jsonl');
    writeFileSync(
      path,
      makeSyntheticTrace({
        seed: 1,
        // Enough requests that the p99 is not the fourth-worst of a few hundred.
        requests: 1200,
        ratePerS: 2.3,
        roots: 30,
        sharedBlocks: 8,
        maxUniqueBlocks: 8,
        outputTokens: 150,
      }),
    );
    const run = (policy: string) =>
      simulate(
        config(
          {
            workload: { kind: 'trace', path, rateScale: 1 },
            durationMs: undefined,
            warmupMs: 20_000,
            replicas: 3,
          },
          policy,
        ),
      );
    const random = run('random');
    assert.ok(
      random.utilization.mean > 0.7 && random.utilization.mean < 0.8,
      `random utilization ${random.utilization.mean}`,
    );
    const cost = run('cost');
    for (const policy of ['random', 'round-robin', 'least-queued', 'consistent-hash']) {
      const other = policy === 'random' ? random : run(policy);
      assert.ok(
        cost.ttftMs.p99 <= other.ttftMs.p99 * 1.01,
        `cost ${cost.ttftMs.p99} vs ${policy} ${other.ttftMs.p99}`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
