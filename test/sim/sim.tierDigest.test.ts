/**
 * `kvroute sim` with a CPU tier pinned byte for byte: the digests were recorded from the build
 * before the tier's LRU moved from a Map (whose oldest key was found by iterating past every
 * deleted entry) to a linked list with an index, so the faster tier keeps the same order of
 * stores, loads and evictions. Each run is also compared with the same run without a tier, so
 * a tier that stopped mattering fails here too. Runs without a tier are pinned by
 * test/sim/sim.digest.test.ts. The third run is bench/simTier.ts's shape (a tier large enough that
 * each replica's keeps growing for most of the minute), recorded before that bench's round of
 * tier speed-ups (one lookup a block for the tier walk, a leaner and presized tier LRU).
 * The first and third runs' digests were re-recorded once, when the owner tracker stopped
 * counting a CPU-tier copy of a prefix as ownership (src/sim/owners.ts): only the report's
 * `owners` series changed, every other field of the JSON stayed as it was.
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
  assert.equal(sha256(tier), 'fefa6944afdb39999fa0644129eab3e6ba9a96a50ed75ac666471c3c26d71085');
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
  assert.equal(sha256(tier), 'bc92e5ae95987605ab8dad4f8193e6656aeead4a0378fcfce6f520159549dccb');
  const approx = sim([...args, '--cpu-kv-gib', '100', '--index', 'approx']);
  assert.equal(sha256(approx), '95f5ffe121031a8128603ef4d66b3f10e0c63d13a6670a7737f84d721ddc8b43');
});
