/**
 * `kvroute sim --max-queue-ms`: the gateway's fleet queue bound at arrival (and `--max-ttft-ms`,
 * its bound on the modelled TTFT where a request was routed). Under overload the
 * bounded run refuses some arrivals and serves the rest in time (goodput above the unbounded
 * run's); the arrivals are the same in both runs, and every arrival is accounted for.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli } from '../support/cli.ts';

interface Result {
  arrived: number;
  completed: number;
  errors: number;
  ttftMs: { p99: number };
  sloMet: boolean;
  admission: {
    maxQueueMs: number | null;
    maxTtftMs?: number | null;
    rejected: number;
    goodputRps: number;
    offeredRps: number;
  };
}

function sim(args: string[]): Result[] {
  const out = runCli(['sim', '--quiet', '--json', ...args], 300_000);
  assert.equal(out.status, 0, out.stderr);
  return JSON.parse(out.stdout).results;
}

test('under overload, the bound keeps admitted TTFT in the SLO and raises goodput', () => {
  // 3 replicas at 9 req/s of the seed's 8,000-token prompts: well past what they can prefill.
  const [open, bounded] = sim([
    ...['--workload', 'seed', '--replicas', '3', '--rate', '9', '--duration', '40'],
    ...['--max-queue-ms', '50', '--slo-ttft-p99-ms', '1500'],
  ]);
  assert.ok(open && bounded);
  assert.equal(open.admission.maxQueueMs, null);
  assert.equal(bounded.admission.maxQueueMs, 50);
  assert.equal(open.arrived, bounded.arrived, 'the same arrivals');
  assert.equal(open.admission.offeredRps, bounded.admission.offeredRps);
  assert.equal(open.admission.rejected, 0);
  assert.ok(bounded.admission.rejected > 0);
  assert.equal(open.sloMet, false);
  assert.equal(bounded.sloMet, true, `bounded TTFT p99 ${bounded.ttftMs.p99} ms`);
  assert.ok(bounded.ttftMs.p99 < open.ttftMs.p99 / 10);
  assert.ok(bounded.admission.goodputRps > open.admission.goodputRps);
  // Refused arrivals are neither completions nor errors (rejected counts measured ones only).
  assert.ok(bounded.completed + bounded.errors + bounded.admission.rejected <= bounded.arrived);
  assert.ok(bounded.completed + bounded.errors < bounded.arrived);
});

test('--max-queue-ms with --search is refused, naming the flag', () => {
  const out = runCli(['sim', '--max-queue-ms', '50', '--search']);
  assert.equal(out.status, 2);
  assert.match(out.stderr, /--max-queue-ms/);
});

test('--max-ttft-ms: 1.5x overload of the seed fleet, the seed SLO met by the admitted requests', () => {
  // The seed workload at 60 req/s on 14 replicas (cost meets 570 ms at 40 req/s there): the
  // queue bound alone lets cold spills and deep owner queues in; the TTFT bound refuses them.
  const [open, bounded] = sim([
    ...['--workload', 'seed', '--replicas', '14', '--rate', '60', '--duration', '120'],
    ...['--warmup', '30', '--max-ttft-ms', '300'],
  ]);
  assert.ok(open && bounded);
  assert.equal(open.admission.maxTtftMs, null);
  assert.equal(bounded.admission.maxTtftMs, 300);
  assert.equal(bounded.admission.maxQueueMs, null);
  assert.equal(open.arrived, bounded.arrived, 'the same arrivals');
  assert.equal(open.sloMet, false);
  assert.ok(bounded.admission.rejected > 0);
  assert.equal(bounded.sloMet, true, `bounded TTFT p99 ${bounded.ttftMs.p99} ms`);
  assert.ok(bounded.ttftMs.p99 <= 570);
  assert.ok(bounded.admission.goodputRps > 40, `goodput ${bounded.admission.goodputRps}`);
  assert.ok(bounded.completed + bounded.errors < bounded.arrived);
});

test('--max-ttft-ms with --search is refused, naming the flag', () => {
  const out = runCli(['sim', '--max-ttft-ms', '300', '--search']);
  assert.equal(out.status, 2);
  assert.match(out.stderr, /--max-ttft-ms compares runs at one replica count/);
});
