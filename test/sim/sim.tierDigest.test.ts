/**
 * `kvroute sim` with a CPU tier pinned byte for byte: the digests were recorded from the build
 * before the tier's LRU moved from a Map (whose oldest key was found by iterating past every
 * deleted entry) to a linked list with an index, so the faster tier keeps the same order of
 * stores, loads and evictions. Each run is also compared with the same run without a tier, so
 * a tier that stopped mattering fails here too. Runs without a tier are pinned by
 * test/sim/sim.digest.test.ts. The third run is bench/simTier.ts's shape (a tier large enough that
 * each replica's keeps growing for most of the minute), recorded before that bench's round of
 * tier speed-ups (one lookup a block for the tier walk, a leaner and presized tier LRU).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT, runCli } from '../support/cli.ts';

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

function sim(args: string[]): string {
  const out = runCli(['sim', '--quiet', '--json', '--threads', '1', ...args], 300_000);
  assert.equal(out.status, 0, out.stderr);
  return out.stdout;
}

/** The seed workload over 8 replicas for 40 s: a 4 GiB tier fills and evicts. */
const SEED = [
  ...['--workload', 'seed', '--policy', 'cost,llmd', '--replicas', '8'],
  ...['--rate', '40', '--duration', '40'],
];
/** The 300-request trace fixture, approximate index, a GPU pool of 3,000 blocks. */
const TRACE = [
  ...['--trace', join(ROOT, 'test/fixtures/digest-trace.jsonl'), '--policy', 'cost,sglang'],
  ...['--index', 'approx', '--replicas', '3', '--kv-blocks', '3000'],
];

test('sim with a CPU tier: seed workload, events index, output unchanged', () => {
  const tier = sim([...SEED, '--cpu-kv-gib', '4']);
  assert.equal(sha256(tier), '9769f719c12885f6b94b746970920cd71e0541c5abca091f3ba0124433e175ef');
  assert.notEqual(sha256(tier), sha256(sim(SEED)), 'the tier changes the run');
});

test('sim with a CPU tier: trace, approximate index with tiers, output unchanged', () => {
  const tier = sim([...TRACE, '--cpu-kv-gib', '1']);
  assert.equal(sha256(tier), '27c09ae97f92e3ee6e390f1f34d5bfe36f0868a7f96bbaff2ff65b2b0a8707b0');
  assert.notEqual(sha256(tier), sha256(sim(TRACE)), 'the tier changes the run');
});

test('sim with a CPU tier: the tier bench shape, 100 GiB a replica, output unchanged', () => {
  const args = [
    ...['--workload', 'seed', '--policy', 'cost,round-robin', '--replicas', '8'],
    ...['--rate', '40', '--duration', '60'],
  ];
  const tier = sim([...args, '--cpu-kv-gib', '100']);
  assert.equal(sha256(tier), 'e202e9ef6b60391c642cda602c8f9304e5a4dd10178ebc74894264092f7235e1');
  const approx = sim([...args, '--cpu-kv-gib', '100', '--index', 'approx']);
  assert.equal(sha256(approx), 'f4ed1b6d049bc11c60b169359b6862fa455dccdff27b28a9cb1c93452b413ad4');
});
