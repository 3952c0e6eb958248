/**
 * `kvroute engine`'s ways to a CPU tier, as vLLM spells them: `--kv-offloading-size GiB`
 * (CacheConfig.kv_offloading_size: GiB x 2^30 bytes), `--kv-transfer-config` naming the
 * OffloadingConnector with `num_cpu_blocks` (vLLM's first CPUOffloadingSpec) or
 * `cpu_bytes_to_use` (later ones), and kvroute's `--cpu-kv-gib`; each reaches the engine core as
 * the same tier. Bad values are one line naming the field.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { UsageError } from '../../src/cli/args.ts';
import { readEngineArgv, readEngineOptions } from '../../src/cli/engine.ts';
import { resolveEngineOptions } from '../../src/engine/server/options.ts';

function tierOf(argv: string[]) {
  const { flags } = readEngineArgv(argv);
  assert.notEqual(flags, 'help');
  const options = readEngineOptions(flags as Exclude<typeof flags, 'help'>);
  return resolveEngineOptions(options).engineConfig.cpuOffload;
}

test('--kv-offloading-size 400 is 400 GiB: 81,920 blocks of the seed replica', () => {
  assert.deepEqual(tierOf(['--kv-offloading-size', '400']), { cpuBlocks: 81_920 });
  assert.deepEqual(tierOf(['--cpu-kv-gib', '400', '--cpu-kv-gbps', '32']), {
    cpuBlocks: 81_920,
    cpuKvGbps: 32,
  });
});

test('--kv-transfer-config with the OffloadingConnector: num_cpu_blocks or cpu_bytes_to_use', () => {
  const json = (extra: object) =>
    JSON.stringify({
      kv_connector: 'OffloadingConnector',
      kv_role: 'kv_both',
      kv_connector_extra_config: extra,
    });
  assert.deepEqual(tierOf(['--kv-transfer-config', json({ num_cpu_blocks: 512 })]), {
    cpuBlocks: 512,
  });
  assert.deepEqual(tierOf(['--kv-transfer-config', json({ cpu_bytes_to_use: 400 * 2 ** 30 })]), {
    cpuBlocks: 81_920,
  });
  assert.deepEqual(
    tierOf([
      '--kv-transfer-config.kv_connector=OffloadingConnector',
      '--kv-transfer-config.kv_role=kv_both',
      '--kv-transfer-config.kv_connector_extra_config.num_cpu_blocks=64',
    ]),
    { cpuBlocks: 64 },
  );
  for (const [extra, field] of [
    [{}, /num_cpu_blocks or cpu_bytes_to_use/],
    [{ num_cpu_blocks: -3 }, /num_cpu_blocks must be an integer >= 0/],
    [{ cpu_bytes_to_use: 'lots' }, /cpu_bytes_to_use must be a number >= 0/],
  ] as const) {
    assert.throws(
      () => tierOf(['--kv-transfer-config', json(extra)]),
      (err: Error) => {
        assert.ok(err instanceof UsageError);
        assert.match(err.message, field);
        return true;
      },
    );
  }
});

test('no tier without the flags', () => {
  assert.equal(tierOf([]), undefined);
});
