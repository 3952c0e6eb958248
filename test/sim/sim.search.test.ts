/**
 * The replica search: its answer checked upward (non-monotone policies flagged), its diagnosis
 * when nothing meets the SLO, and the parallel search giving the serial search's bytes.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { resultsJson } from '../../src/results/result.ts';
import { formatSearch } from '../../src/results/table.ts';
import { runBatch } from '../../src/sim/parallel.ts';
import { planSearch } from '../../src/sim/searchPlan.ts';
import { makeSyntheticTrace } from '../../src/workload/trace.ts';
import { runCli } from '../support/cli.ts';
import { smallSeedConfig } from '../support/sim.ts';

/** Runs `planSearch` to its answer against a fixed verdict per count. */
function search(start: number, max: number, met: (n: number) => boolean) {
  const asked: number[] = [];
  for (;;) {
    const step = planSearch({ start, max }, (n) => (asked.includes(n) ? met(n) : undefined));
    if ('answer' in step) return { ...step.answer, asked };
    asked.push(step.probe);
  }
}

test('the search checks counts above its answer and reports those that miss', () => {
  // Met from 11 up, except 13-15 (consistent-hash at 2 s on the seed workload did this).
  const odd = search(22, 256, (n) => n >= 11 && !(n >= 13 && n <= 15));
  assert.equal(odd.minReplicas, 11);
  assert.deepEqual(odd.misses, [13, 14, 15]);
  assert.ok(odd.asked.includes(16) && odd.asked.includes(17), `${odd.asked}`);
  assert.deepEqual(
    odd.probed,
    [...new Set(odd.asked)].sort((a, b) => a - b),
  );
  // Monotone: two counts above the answer, and nothing else.
  const plain = search(22, 256, (n) => n >= 17);
  assert.equal(plain.minReplicas, 17);
  assert.deepEqual(plain.misses, []);
  assert.ok(plain.asked.includes(18) && plain.asked.includes(19));
  assert.ok(!plain.asked.includes(20) || plain.asked.indexOf(20) < plain.asked.indexOf(18));
  // The limit bounds the check; nothing met gives null and no misses.
  assert.deepEqual(search(4, 8, (n) => n >= 8).misses, []);
  assert.equal(search(4, 16, () => false).minReplicas, null);
});

const policies = ['cost', 'consistent-hash', 'random'];
const batch = (threads: number) =>
  runBatch({
    runs: policies.map((policy) =>
      smallSeedConfig({ durationMs: 40_000, warmupMs: 10_000 }, policy),
    ),
    searches: policies.map((policy) => ({
      label: policy,
      config: smallSeedConfig(
        { durationMs: 40_000, warmupMs: 10_000, slo: { ttftP99Ms: 1500, tpotP99Ms: 100 } },
        policy,
      ),
    })),
    bounds: { start: 3, max: 12 },
    threads,
  });

test('runs and searches on worker threads give the serial bytes', async () => {
  const serial = await batch(1);
  const parallel = await batch(3);
  assert.equal(serial.search.length, 3);
  assert.ok(serial.search.some((s) => s.minReplicas !== null));
  assert.equal(
    resultsJson(parallel.results, parallel.search),
    resultsJson(serial.results, serial.search),
  );
});

test('kvroute sim --search: --threads 2 prints what --threads 1 prints', () => {
  const args = [
    ...['sim', '--quiet', '--workload', 'groups', '--policy', 'cost,round-robin'],
    ...['--duration', '30', '--search', '--max-replicas', '6', '--replicas', '2', '--json'],
  ];
  const one = runCli([...args, '--threads', '1'], 300_000);
  const two = runCli([...args, '--threads', '2'], 300_000);
  assert.equal(one.status, 0, one.stderr);
  assert.equal(two.status, 0, two.stderr);
  assert.ok(JSON.parse(one.stdout).search.length === 2);
  assert.equal(two.stdout, one.stdout);
  const bad = runCli(['sim', '--threads', '0']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--threads must be at least 1/);
});

test('a search over too few measured requests says so instead of "not met"', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-search-'));
  try {
    const trace = join(dir, 'short.jsonl');
    writeFileSync(
      trace,
      makeSyntheticTrace({
        seed: 3,
        requests: 60,
        ratePerS: 4,
        roots: 4,
        sharedBlocks: 4,
        maxUniqueBlocks: 4,
        outputTokens: 20,
      }),
    );
    const out = runCli(
      [
        ...['sim', '--quiet', '--trace', trace, '--policy', 'cost', '--replicas', '2'],
        ...['--warmup', '1', '--slo-ttft-p99-ms', '1', '--search', '--max-replicas', '4'],
        ...['--threads', '1'],
      ],
      60_000,
    );
    assert.equal(out.status, 0, out.stderr);
    assert.match(out.stdout, /too few requests/);
    assert.match(out.stdout, /too few measured requests \(n=\d+\) for a p99.*raise --duration/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the search table names non-monotone counts and out-of-reach SLOs', () => {
  const probe = { sloMet: true, stoppedEarly: false, ttftP99Ms: 400, tpotP99Ms: 30 };
  const text = formatSearch([
    {
      policy: 'consistent-hash',
      minReplicas: 11,
      monotone: false,
      misses: [13, 14, 15],
      unmet: null,
      probes: [{ ...probe, replicas: 11 }],
    },
    {
      policy: 'random',
      minReplicas: null,
      monotone: true,
      misses: [],
      unmet: { reason: 'out-of-reach', measured: 2000, outOfReach: 55, maxReplicas: 256 },
      probes: [{ ...probe, replicas: 256, sloMet: false, stoppedEarly: true }],
    },
  ]);
  assert.match(text, /11 \(misses at 13, 14, 15\)/);
  assert.match(text, /consistent-hash: met at 11 but missed at 13, 14, 15/);
  assert.match(text, /random: 55 of 2000 measured requests cannot meet the TTFT target/);
  assert.match(text, /--slo-ttft-slowdown/);
});
