/**
 * `kvroute sim --pd P:D`: deterministic output for a seed, every request through both pools,
 * the P/D ledger back at zero; the CLI's flags and their errors (exit 2 naming the flag).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli } from '../support/cli.ts';

const ARGS = [
  'sim',
  '--workload',
  'groups',
  '--duration',
  '8',
  '--warmup',
  '1',
  '--rate',
  '6',
  '--pd',
  '2:2',
  '--json',
  '--quiet',
];

test('sim --pd: the same seed prints the same bytes; every request completes; ledger at zero', () => {
  const a = runCli(ARGS, 300_000);
  const b = runCli(ARGS, 300_000);
  assert.equal(a.status, 0, a.stderr);
  assert.equal(a.stdout, b.stdout);
  // biome-ignore lint/suspicious/noExplicitAny: the run's JSON, read field by field
  const { pd } = JSON.parse(a.stdout) as { pd: Record<string, any> };
  assert.equal(pd.prefill, 2);
  assert.equal(pd.decode, 2);
  assert.equal(pd.gpus, 8);
  assert.ok(pd.arrived > 20);
  assert.equal(pd.completed, pd.arrived);
  assert.equal(pd.errors, 0);
  assert.equal(pd.heldBlocks, 0);
  assert.equal(pd.injectedBlocks, 0);
  // The groups workload repeats 2,048-token system prompts (48 requests over 64 groups here):
  // the prefill pool's router sends repeats to their owner.
  assert.ok(pd.prefillHitRate > 0.2, `hit rate ${pd.prefillHitRate}`);
  assert.ok(pd.transferMs.p50 > 1);
  const other = runCli([...ARGS.slice(0, -2), '--seed', '2', '--json', '--quiet'], 300_000);
  assert.notEqual(other.stdout, a.stdout);
});

test('sim --pd: bad values name the flag', () => {
  for (const [args, msg] of [
    [['--pd', '3'], /--pd takes P:D/],
    [['--pd', '0:2'], /--pd takes P:D/],
    [['--pd', 'auto'], /--pd auto needs --search/],
    [['--search', '--pd', '2:2'], /--search takes --pd auto/],
    [['--transfer-gbps', '10'], /need --pd/],
  ] as const) {
    const r = runCli(['sim', '--workload', 'groups', '--duration', '1', ...args], 300_000);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, msg);
  }
});

test('sim --search --pd auto: the JSON names the aggregated and disaggregated answers', () => {
  const r = runCli(
    [
      'sim',
      '--workload',
      'groups',
      '--duration',
      '4',
      '--warmup',
      '1',
      '--rate',
      '4',
      '--search',
      '--pd',
      'auto',
      '--max-replicas',
      '4',
      '--slo-ttft-p99-ms',
      '2000',
      '--slo-tpot-p99-ms',
      '100',
      '--json',
      '--quiet',
    ],
    300_000,
  );
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as {
    pd: {
      aggregated: { replicas: number; gpus: number };
      disaggregated: { prefill: number; decode: number; gpus: number };
    };
    probes: number;
  };
  assert.deepEqual(Object.keys(out.pd), ['aggregated', 'disaggregated']);
  assert.deepEqual(Object.keys(out.pd.aggregated), ['replicas', 'gpus']);
  assert.deepEqual(Object.keys(out.pd.disaggregated), ['prefill', 'decode', 'gpus']);
  assert.equal(out.pd.aggregated.gpus, out.pd.aggregated.replicas * 2);
  assert.equal(
    out.pd.disaggregated.gpus,
    (out.pd.disaggregated.prefill + out.pd.disaggregated.decode) * 2,
  );
});
