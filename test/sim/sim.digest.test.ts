/**
 * `kvroute sim` output pinned byte for byte: three short runs through the CLI entry (JSON, the
 * terminal table, a trace with faults and a replica search, and its HTML report) hashed and
 * compared with digests recorded from a known-good build. A refactor of the simulator, its
 * workloads or its result type must leave these bytes alone; a change that means to alter the
 * simulation records new digests and says why in its commit.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT, runCli } from '../support/cli.ts';

/** sha256 of each output, recorded before the simulator's libraries moved out of src/sim. */
const DIGESTS = {
  seedJson: '64c962a8b9a74ddcf5ba35dfbf1703edca10ba88e47f63c970c3ab73700b610d',
  hotTable: '1c0b6ae88f4ab028d33f179d86df14578301eba820aa1e7ad47069887918bb67',
  traceJson: '39e4612b5dc80152a8dfd01084e9a97e24635e18813243ae9e78eecafa95d548',
  traceHtml: '5bec1c4032d648e9d972859817e7e730da9cb291ed7743e8cf188c1f9b5f93de',
};

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** The trace fixture: 300 requests written by `makeSyntheticTrace` (seed 7), committed as bytes. */
const TRACE = join(ROOT, 'test/fixtures/digest-trace.jsonl');

function sim(args: string[]): string {
  const out = runCli(['sim', '--quiet', ...args], 300_000);
  assert.equal(out.status, 0, out.stderr);
  return out.stdout;
}

test('kvroute sim --json: seed workload, three policies', () => {
  const stdout = sim([
    ...['--workload', 'seed', '--policy', 'cost,llmd,random', '--replicas', '8'],
    ...['--rate', '12', '--duration', '30', '--json'],
  ]);
  assert.equal(sha256(stdout), DIGESTS.seedJson);
});

test('kvroute sim table: hot customer, watched-customer rows', () => {
  const stdout = sim([
    ...['--workload', 'hot', '--policy', 'cost,round-robin', '--replicas', '6'],
    ...['--rate', '10', '--duration', '20', '--warmup', '5'],
  ]);
  assert.equal(sha256(stdout), DIGESTS.hotTable);
});

test('kvroute sim --trace with a kill, a revival and a search: JSON and HTML report', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-digest-'));
  try {
    const report = join(dir, 'report.html');
    const stdout = sim([
      ...['--trace', TRACE, '--policy', 'cost,sglang', '--replicas', '3', '--warmup', '2'],
      ...['--kill', '1@10', '--revive', '1@20', '--search', '--max-replicas', '8'],
      ...['--report', report, '--json'],
    ]);
    assert.equal(sha256(stdout), DIGESTS.traceJson);
    // The report quotes its command line; the temporary folder's name is the run's own.
    const html = readFileSync(report, 'utf8').replaceAll(dir, 'DIR').replaceAll(ROOT, 'ROOT/');
    assert.equal(sha256(html), DIGESTS.traceHtml);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
