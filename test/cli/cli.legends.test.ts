/**
 * Terminal tables explain themselves: under each table of `kvroute sim` (results, the watched
 * customer's block, the search) one line says what its columns mean, the SLO included.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli } from '../support/cli.ts';

/** Each table's header and the line after its `rows` rows (a header, a dashed rule, rows). */
function legendsAfterTables(stdout: string, rows: number): { head: string; legend: string }[] {
  const lines = stdout.split('\n');
  const out: { head: string; legend: string }[] = [];
  for (let i = 1; i < lines.length; i++) {
    if (/^-+( +-+)+$/.test(lines[i]!)) {
      out.push({ head: lines[i - 1]!, legend: lines[i + 1 + rows] ?? '' });
    }
  }
  return out;
}

test('kvroute sim: a legend under the results, the customer block and the search', () => {
  const out = runCli(
    [
      ...['sim', '--quiet', '--workload', 'hot', '--policy', 'cost,random', '--replicas', '4'],
      ...['--rate', '6', '--duration', '20', '--warmup', '2', '--search', '--max-replicas', '4'],
      ...['--slo-ttft-p99-ms', '1500'],
    ],
    120_000,
  );
  assert.equal(out.status, 0, out.stderr);
  const tables = legendsAfterTables(out.stdout, 2);
  assert.equal(tables.length, 3, out.stdout);
  const [results, customer, search] = tables;
  assert.match(results!.head, /^policy +replicas +TTFT p50/);
  assert.match(
    results!.legend,
    /^TTFT: time to first token, ms; TPOT: per output token after the first; ITL: between tokens; hit rate: .*; util: .*; done, errors: requests; SLO: met when TTFT p99 ≤ 1,500 ms, TPOT p99 ≤ 100 ms, no errors$/,
  );
  assert.match(customer!.head, /^policy +cust 0 TTFT p50/);
  assert.match(customer!.legend, /^cust 0: the watched customer's requests .*owners max, last: /);
  assert.match(search!.head, /^policy +min replicas +probes/);
  assert.match(search!.legend, /^min replicas: the fewest meeting the SLO .*; probes: /);
});
