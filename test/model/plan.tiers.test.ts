/**
 * `kvroute plan --cpu-kv-gib`: the seed's "does the prefix set fit" check over the GPU pool and a
 * CPU tier, and the CPU flags of `kvroute sim` / `kvroute engine` refused as the project refuses
 * bad flags (one line naming the flag, exit 2).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { cpuBlocksOf } from '../../src/engine/options.ts';
import { kvBytesPerToken } from '../../src/model/cost.ts';
import { planRouter, SEED_LOAD } from '../../src/model/plan.ts';
import { makeReplicaSpec } from '../../src/model/spec.ts';
import { planTiers } from '../../src/model/tierPlan.ts';
import { runCli } from '../support/cli.ts';

const spec = makeReplicaSpec();
const router = planRouter(spec, SEED_LOAD);

describe('two-tier fit for the seed replica', () => {
  const t = planTiers(spec, SEED_LOAD, router, { cpuKvGiB: 400, cpuKvGbps: 63, blockSize: 16 });

  test('400 GiB of 327,680-byte tokens: 81,920 blocks, 218 prefixes beside the GPU pool 70', () => {
    assert.equal(kvBytesPerToken(spec.model, spec.kvDtype), 327_680);
    assert.equal(cpuBlocksOf(400, 327_680, 16), 81_920);
    assert.equal(t.cpuTierTokens, 1_310_720);
    assert.equal(t.gpuPrefixesPerReplica, 70);
    assert.equal(t.cpuPrefixesPerReplica, 218);
    assert.equal(t.prefixesPerReplica, 288);
    assert.equal(t.prefixSetFitsOneReplica, true);
    assert.equal(t.replicasToHoldSetGpu, 3);
    assert.equal(t.replicasToHoldSet, 1);
  });

  test('a reload costs 6,000 x 327,680 B / 63 GB/s = 31.2 ms, 7.3 % of the 428 ms a hit saves', () => {
    assert.ok(Math.abs(t.reloadMs - 31.2076) < 1e-3);
    assert.ok(Math.abs(t.reloadShareOfMiss - 0.07295) < 1e-4);
  });

  test('a small tier: 16 GiB holds 8 prefixes and the set still needs 3 replicas', () => {
    const small = planTiers(spec, SEED_LOAD, router, {
      cpuKvGiB: 16,
      cpuKvGbps: 63,
      blockSize: 16,
    });
    assert.equal(small.cpuPrefixesPerReplica, 8);
    assert.equal(small.replicasToHoldSet, 3);
    assert.equal(small.prefixSetFitsOneReplica, false);
  });
});

describe('the CLI', () => {
  test('plan --cpu-kv-gib prints the two-tier lines and a "tiers" JSON key', () => {
    const text = runCli(['plan', '--cpu-kv-gib', '400']);
    assert.equal(text.status, 0, text.stderr);
    assert.match(text.stdout, /70 on the GPU \+ 218 in the CPU tier = 288 prefixes/);
    const json = runCli(['plan', '--cpu-kv-gib', '400', '--json']);
    assert.equal(JSON.parse(json.stdout).tiers.cpuPrefixesPerReplica, 218);
  });

  test('bad CPU flags: one line naming the flag, exit 2', () => {
    for (const args of [
      ['plan', '--cpu-kv-gbps', '10'],
      ['plan', '--cpu-kv-gib', '-1'],
      ['sim', '--cpu-kv-gib', 'lots'],
      ['sim', '--cpu-kv-gbps', '10'],
    ]) {
      const r = runCli(args);
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /--cpu-kv-gi?bp?s?/);
      assert.doesNotMatch(r.stderr, /\n\s+at /);
    }
  });
});
