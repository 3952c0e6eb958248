import assert from 'node:assert/strict';
import { test } from 'node:test';
import { UsageError } from '../../src/cli/args.ts';
import { parseSimFlags, run as runSimCli } from '../../src/cli/sim.ts';
import { renderReport } from '../../src/results/report.ts';
import { POLICY_NAMES } from '../../src/router/registry.ts';
import { simulate } from '../../src/sim/run.ts';
import { RESULT_JSON_KEYS, smallSeedConfig } from '../support/sim.ts';
import type { RunResult } from '../../src/results/result.ts';

const small = smallSeedConfig;

async function captureStdout(fn: () => Promise<number>): Promise<{ code: number; out: string }> {
  const chunks: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array) => {
    chunks.push(String(chunk));
    return true;
  }) as typeof process.stdout.write;
  try {
    const code = await fn();
    return { code, out: chunks.join('') };
  } finally {
    process.stdout.write = write;
  }
}

test('same seed, same output, byte for byte', async () => {
  const argv = [
    '--workload',
    'seed',
    '--rate',
    '6',
    '--replicas',
    '4',
    '--duration',
    '15',
    '--policy',
    'cost,random',
    '--json',
    '--quiet',
    // In this thread: stdout is captured in-process, and while worker threads run, the test
    // runner's own writes would land in it too (threads are compared in sim.search.test.ts).
    '--threads',
    '1',
  ];
  const a = await captureStdout(() => runSimCli(argv));
  const b = await captureStdout(() => runSimCli(argv));
  assert.equal(a.code, 0);
  assert.equal(a.out, b.out);
  const parsed = JSON.parse(a.out) as { results: Record<string, unknown>[]; search: unknown[] };
  assert.deepEqual(
    parsed.results.map((r) => r.policy),
    ['cost', 'random'],
  );
  for (const r of parsed.results) {
    for (const key of RESULT_JSON_KEYS) {
      assert.ok(key in r, key);
    }
    assert.deepEqual(Object.keys(r.ttftMs as object).slice(0, 3), ['p50', 'p90', 'p99']);
  }
  assert.deepEqual(parsed.search, []);
  const c = await captureStdout(() => runSimCli([...argv.slice(0, -2), '--seed', '2', '--json']));
  assert.notEqual(c.out, a.out);
});

test('cost keeps prefixes warm where random cannot', () => {
  const cost = simulate(small());
  const random = simulate(small({}, 'random'));
  assert.equal(cost.errors + random.errors, 0);
  assert.equal(cost.completed, cost.arrived);
  assert.ok(cost.hitRate > 0.6, `cost hit rate ${cost.hitRate}`);
  assert.ok(random.hitRate < cost.hitRate - 0.2, `random hit rate ${random.hitRate}`);
  assert.ok(cost.ttftMs.p50 < 250, `cost TTFT p50 ${cost.ttftMs.p50}`);
  assert.ok(cost.ttftMs.p99 < random.ttftMs.p99, `${cost.ttftMs.p99} vs ${random.ttftMs.p99}`);
});

test('a killed replica loses no request: re-routed or counted, then it comes back cold', () => {
  const r = simulate(
    small({
      faults: [
        { kind: 'kill', replica: 1, atMs: 80_000 },
        { kind: 'revive', replica: 1, atMs: 100_000 },
      ],
    }),
  );
  assert.equal(r.arrived, r.completed + r.errors, 'every arrival accounted for');
  assert.deepEqual(Object.keys(r.errorsByKind), r.errors > 0 ? ['killed-mid-stream'] : []);
  const kill = r.faults[0]!;
  assert.equal(kill.kind, 'kill');
  assert.ok(kill.customers > 10, `${kill.customers} customers owned`);
  assert.ok(kill.rerouted + kill.errors > 0);
  assert.equal(kill.errors, r.errors);
  // Their next request lands cold: a bump of about the prefill the hit saved (6,000 tokens).
  const bumpMs = kill.ttftFirstAfterP50Ms - kill.ttftBeforeP50Ms;
  assert.ok(bumpMs > 250 && bumpMs < 900, `bump ${bumpMs} ms`);
  assert.ok(kill.ttftLaterP50Ms < kill.ttftBeforeP50Ms + 150, 'recovered on a new owner');
  assert.equal(r.faults[1]!.kind, 'revive');
  assert.ok(r.utilization.perReplica[1]! > 0);
});

test('the HTML report is self-contained SVG', () => {
  const results: RunResult[] = [
    simulate(small({ durationMs: 10_000, warmupMs: 0, replicas: 3 })),
    simulate(small({ durationMs: 10_000, warmupMs: 0, replicas: 3 }, 'least-queued')),
  ];
  const html = renderReport(
    results,
    [{ policy: 'cost', minReplicas: 3, monotone: true, misses: [], unmet: null, probes: [] }],
    {
      title: 'test <&>',
      command: 'kvroute sim',
    },
  );
  assert.match(html, /^<!doctype html>/);
  assert.ok((html.match(/<svg /g) ?? []).length >= 4);
  assert.doesNotMatch(html, /<script|<link|https?:\/\//);
  assert.match(html, /test &lt;&amp;&gt;/);
});

test('bad flags are one-line usage errors naming the flag', () => {
  const cases: [string[], RegExp][] = [
    [['--policy', 'cost,nope'], /--policy must be a list of .*least-queued.*; got 'nope'/],
    [['--workload', 'bursty'], /--workload must be one of seed, hot, low-shared/],
    [['--index', 'tree'], /--index must be one of events, approx/],
    [['--queue-source', 'x'], /--queue-source must be one of ledger, reports/],
    [['--kill', 'one@two'], /--kill takes REPLICA@SECONDS/],
    [
      ['--kill', '40@5'],
      /--kill 40@5: replica 40 does not exist; --replicas 22 gives replicas 0 to 21/,
    ],
    [['--replicas', '0'], /--replicas must be greater than 0/],
    [['--stale-ms', '-1'], /--stale-ms must be at least 0/],
    [['--trace', 'f.jsonl', '--workload', 'seed'], /--trace and --workload/],
    [['--rate-scale', '2'], /--rate-scale applies to --trace/],
    [['--tp', '3'], /--tp must be a power of two/],
    [['--frobnicate'], /frobnicate/],
  ];
  for (const [argv, message] of cases) {
    assert.throws(
      () => parseSimFlags(argv),
      (err: unknown) =>
        err instanceof UsageError && message.test(err.message) && !err.message.includes('\n'),
      argv.join(' '),
    );
  }
  const ok = parseSimFlags(['--policy', 'all', '--kill', '3@120', '--revive', '3@180']);
  assert.ok(ok !== 'help');
  assert.deepEqual(ok.policies, [...POLICY_NAMES]);
  assert.equal(ok.policies.length, 13);
  assert.deepEqual(ok.base.faults, [
    { kind: 'kill', replica: 3, atMs: 120_000 },
    { kind: 'revive', replica: 3, atMs: 180_000 },
  ]);
});
