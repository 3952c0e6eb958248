/**
 * The HTML report of a closed-loop run (`kvroute sim --concurrency C --report FILE`): a "Closed
 * loop" table with each policy's concurrency, requests/s, output tokens/s and goodput, as the
 * run's own `closedLoop` figures, and bar charts of output tokens/s and goodput; an open-loop
 * run's report has none of it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { parseSimFlags } from '../../src/cli/sim.ts';
import { renderReport } from '../../src/results/report.ts';
import { simulate } from '../../src/sim/run.ts';
import { runCli } from '../support/cli.ts';

const fixed = (x: number, digits: number) =>
  x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** The cells of the closed-loop table's rows, in order. */
function closedLoopRows(html: string): string[][] {
  const at = html.indexOf('<h2>Closed loop</h2>');
  assert.ok(at >= 0, 'a Closed loop section');
  const table = html.slice(at, html.indexOf('</table>', at));
  return [...table.matchAll(/<tr>((?:<td>[^<]*<\/td>)+)<\/tr>/g)].map((m) =>
    [...m[1]!.matchAll(/<td>([^<]*)<\/td>/g)].map((c) => c[1]!),
  );
}

describe('the report of a closed-loop run', () => {
  const parsed = parseSimFlags([
    ...['--workload', 'seed', '--replicas', '3', '--concurrency', '12'],
    ...['--duration', '20', '--warmup', '4'],
  ]);
  assert.ok(parsed !== 'help');
  const policies = ['delay-cost', 'random'] as const;
  const runs = policies.map((policy) =>
    simulate({ ...parsed.base, router: { ...parsed.base.router, policy } }),
  );
  const html = renderReport(runs, [], { title: 't', command: 'kvroute sim' });

  test("one row per policy with the run's own closed-loop figures", () => {
    const rows = closedLoopRows(html);
    assert.equal(rows.length, 2);
    rows.forEach((row, i) => {
      const c = runs[i]!.closedLoop!;
      assert.ok(c.outputTokensPerS > 0);
      assert.deepEqual(row.slice(0, 5), [
        policies[i],
        '12',
        fixed(c.requestsPerS, 2),
        fixed(c.outputTokensPerS, 0),
        fixed(c.goodputRps, 2),
      ]);
      assert.equal(row[5], `${fixed((c.goodputRps / c.requestsPerS) * 100, 1)} %`);
    });
  });

  test('bar charts of output tokens/s and goodput, one bar a policy', () => {
    for (const [title, value] of [
      [
        'Output tokens/s per policy (closed loop)',
        (i: number) => Math.round(runs[i]!.closedLoop!.outputTokensPerS),
      ],
      [
        'Goodput (requests/s meeting the SLO) per policy (closed loop)',
        (i: number) => Math.round(runs[i]!.closedLoop!.goodputRps * 100) / 100,
      ],
    ] as const) {
      const at = html.indexOf(`<h2>${title}</h2>`);
      assert.ok(at >= 0, title);
      const svg = html.slice(at, html.indexOf('</svg>', at));
      const labels = [...svg.matchAll(/<text x="[\d.]+" y="[\d.]+">([^<]*)<\/text>/g)].map(
        (m) => m[1],
      );
      assert.deepEqual(labels, [String(value(0)), String(value(1))]);
    }
  });

  test('an open-loop run has no closed-loop section', () => {
    const open = parseSimFlags(['--workload', 'seed', '--replicas', '3', '--duration', '10']);
    assert.ok(open !== 'help');
    const page = renderReport([simulate(open.base)], [], { title: 't', command: 'kvroute sim' });
    assert.ok(!page.includes('Closed loop'));
    assert.ok(!page.includes('closed loop'));
  });
});

describe('kvroute sim --concurrency C --report FILE', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-closed-report-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('writes the closed-loop section with the figures --json prints', () => {
    const report = join(dir, 'r.html');
    const args = ['sim', '--workload', 'seed', '--replicas', '2', '--concurrency', '6'];
    const r = runCli([
      ...args,
      '--duration',
      '12',
      '--warmup',
      '2',
      '--report',
      report,
      '--json',
      '--quiet',
    ]);
    assert.equal(r.status, 0, r.stderr);
    const c = JSON.parse(r.stdout).results[0].closedLoop;
    const rows = closedLoopRows(readFileSync(report, 'utf8'));
    assert.equal(rows.length, 1);
    assert.deepEqual(rows[0]!.slice(1, 5), [
      '6',
      fixed(c.requestsPerS, 2),
      fixed(c.outputTokensPerS, 0),
      fixed(c.goodputRps, 2),
    ]);
  });
});
