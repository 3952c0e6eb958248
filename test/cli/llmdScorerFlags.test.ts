/**
 * `--scorer-weights` and `--prefix-cache-scorer` (src/cli/llmdScorerFlags.ts, parsed by
 * src/serving/configScorers.ts) in `kvroute sim`, `serve` and `epp`, and serve's config keys of the
 * same names: llm-d's EndpointPickerConfig weights and prefix-cache-scorer parameters, each
 * reaching the policy or the approximate record, and a bad value is one line naming the flag (or
 * the key) and its accepted keys.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFlags, UsageError } from '../../src/cli/args.ts';
import { policyLabel } from '../../src/cli/llmdScorerFlags.ts';
import { EPP_OPTIONS } from '../../src/cli/options/epp.ts';
import { SERVE_OPTIONS } from '../../src/cli/options/serve.ts';
import { specOf } from '../../src/cli/options/spec.ts';
import { readServeConfig } from '../../src/cli/serve.ts';
import { parseSimFlags } from '../../src/cli/sim.ts';
import { applyConfigDoc, defaultConfig } from '../../src/serving/config.ts';
import { scorerRouterOptions } from '../../src/serving/configScorers.ts';
import { GatewayError } from '../../src/serving/errors.ts';
import { runCli } from '../support/cli.ts';
import { makePolicy } from '../../src/router/registry.ts';
import type { LlmdPolicy } from '../../src/router/policies/llmd.ts';
import type { LlmdPrecisePolicy } from '../../src/router/policies/llmdPrecise.ts';
import { ReplayTally } from '../../src/sim/published/figures.ts';
import { simulate } from '../../src/sim/run.ts';

function parsed(args: string[]) {
  const p = parseSimFlags(args);
  assert.ok(p !== 'help');
  return p;
}

function usageError(args: string[], message: string) {
  assert.throws(
    () => parseSimFlags(args),
    (e: unknown) => e instanceof UsageError && e.message === message,
  );
}

describe('--scorer-weights', () => {
  test("sets the llmd family's weights; a key left out keeps each policy's default", () => {
    const p = parsed([
      '--policy',
      'llmd,llmd-precise',
      '--scorer-weights',
      'prefix=1,kv=1,queue=1',
    ]);
    const options = p.base.router.policyOptions!;
    const llmd = makePolicy('llmd', options) as LlmdPolicy;
    assert.deepEqual(
      [llmd.tunables.prefixWeight, llmd.tunables.kvWeight, llmd.tunables.queueWeight],
      [1, 1, 1],
    );
    const precise = makePolicy('llmd-precise', options) as LlmdPrecisePolicy;
    assert.deepEqual(
      [
        precise.tunables.precisePrefixWeight,
        precise.tunables.preciseKvWeight,
        precise.tunables.preciseQueueWeight,
      ],
      [1, 1, 1],
    );
    const some = parsed(['--policy', 'llmd-precise', '--scorer-weights', 'prefix=3']);
    const p3 = makePolicy('llmd-precise', some.base.router.policyOptions) as LlmdPrecisePolicy;
    assert.deepEqual(
      [
        p3.tunables.precisePrefixWeight,
        p3.tunables.preciseKvWeight,
        p3.tunables.preciseQueueWeight,
      ],
      [3, 1, 1],
    );
    // Without the flag, no policy options at all (every run as before).
    assert.equal(parsed([]).base.router.policyOptions, undefined);
  });

  test('bad keys, values and policies are usage errors naming the flag', () => {
    usageError(
      ['--scorer-weights', 'prefix=1,lora=2'],
      "--scorer-weights takes KEY=VALUE pairs, keys prefix, kv, queue; got 'lora=2'",
    );
    usageError(
      ['--scorer-weights', 'prefix'],
      "--scorer-weights takes KEY=VALUE pairs, keys prefix, kv, queue; got 'prefix'",
    );
    usageError(['--scorer-weights', 'kv=-1'], "--scorer-weights: kv takes a weight >= 0, got '-1'");
    usageError(['--scorer-weights', 'kv='], "--scorer-weights: kv takes a weight >= 0, got ''");
    usageError(['--scorer-weights', 'kv=1,kv=2'], '--scorer-weights gives kv twice');
    usageError(
      ['--policy', 'random,cost', '--scorer-weights', 'prefix=1'],
      '--scorer-weights weighs the scorers of llmd, llmd-precise; --policy names none of them (random, cost)',
    );
  });
});

describe('--prefix-cache-scorer', () => {
  test("plugin.go's parameters over its defaults, with --approx-forget llmd or peer", () => {
    const p = parsed([
      ...['--index', 'approx', '--approx-forget', 'peer'],
      ...['--prefix-cache-scorer', 'hashBlockSize=256,lruCapacityPerServer=2200'],
    ]);
    assert.deepEqual(p.base.router.llmdPrefix, {
      hashBlockSize: 256,
      maxPrefixBlocksToMatch: 256,
      lruCapacityPerServer: 2200,
    });
    assert.equal(parsed([]).base.router.llmdPrefix, undefined);
  });

  test('bad keys, values, or no llm-d record are usage errors naming the flag', () => {
    const forget = ['--approx-forget', 'llmd'];
    usageError(
      [...forget, '--prefix-cache-scorer', 'blockSize=64'],
      '--prefix-cache-scorer takes KEY=VALUE pairs, keys hashBlockSize, maxPrefixBlocksToMatch, ' +
        "lruCapacityPerServer; got 'blockSize=64'",
    );
    usageError(
      [...forget, '--prefix-cache-scorer', 'lruCapacityPerServer=0'],
      "--prefix-cache-scorer: lruCapacityPerServer takes an integer >= 1, got '0'",
    );
    usageError(
      [...forget, '--prefix-cache-scorer', 'hashBlockSize=2.5'],
      "--prefix-cache-scorer: hashBlockSize takes an integer >= 1, got '2.5'",
    );
    usageError(
      ['--prefix-cache-scorer', 'hashBlockSize=64'],
      "--prefix-cache-scorer sets llm-d's approximate record: give it with --approx-forget llmd " +
        'or peer (and --index approx), got --approx-forget kvroute (default)',
    );
  });

  test("a smaller LRU forgets: llm-d's picker on its own record keeps fewer hits", () => {
    const args = [
      ...['--workload', 'shared-prefix', '--num-groups', '16', '--num-prompts-per-group', '4'],
      ...['--system-prompt-len', '2000', '--question-len', '200', '--output-len', '20'],
      ...['--replicas', '2', '--concurrency', '8', '--duration', '20', '--warmup', '0'],
      ...['--index', 'approx', '--approx-forget', 'peer'],
    ];
    const hitRate = (extra: string[]) => {
      const p = parsed([...args, ...extra]);
      const tally = new ReplayTally(20);
      simulate({
        ...p.base,
        router: { ...p.base.router, policy: 'llmd' },
        onRequest: (r) => tally.add(r),
      });
      return tally.figures().hitRate;
    };
    const plenty = hitRate([]);
    // 200 blocks of 64 characters (16 tokens): under two groups' prefixes a pod.
    const small = hitRate(['--prefix-cache-scorer', 'lruCapacityPerServer=200']);
    assert.ok(small < plenty, `hit rate with a 200-block LRU ${small} vs 31,250 ${plenty}`);
  });
});

/** `kvroute serve`'s (or epp's) config from its flags, as the command reads them. */
function serveConfig(argv: string[], spec = specOf(SERVE_OPTIONS)) {
  const flags = readFlags(argv, spec);
  assert.ok(flags !== 'help');
  return readServeConfig(flags);
}

function serveUsageError(argv: string[], message: string, spec = specOf(SERVE_OPTIONS)) {
  assert.throws(
    () => serveConfig(argv, spec),
    (e: unknown) => e instanceof UsageError && e.message === message,
  );
}

function configError(doc: Record<string, unknown>, message: string) {
  assert.throws(
    () => applyConfigDoc(doc, defaultConfig()),
    (e: unknown) => e instanceof GatewayError && e.message === message,
  );
}

describe('serve and epp: --scorer-weights and --prefix-cache-scorer', () => {
  test("the flags reach the pool's router: the weights, llm-d's record and its prefix cap", () => {
    for (const spec of [specOf(SERVE_OPTIONS), specOf(EPP_OPTIONS)]) {
      const c = serveConfig(
        [
          ...['--policy', 'llmd', '--index', 'approx', '--scorer-weights', 'prefix=0,queue=1'],
          ...['--prefix-cache-scorer', 'hashBlockSize=128,maxPrefixBlocksToMatch=8'],
        ],
        spec,
      );
      assert.deepEqual(c.scorerWeights, { prefix: 0, queue: 1 });
      assert.deepEqual(c.prefixCacheScorer, {
        hashBlockSize: 128,
        maxPrefixBlocksToMatch: 8,
        lruCapacityPerServer: 31_250,
      });
      const router = scorerRouterOptions(c, c.index, c.blockSize);
      const llmd = makePolicy('llmd', router.policyOptions) as LlmdPolicy;
      assert.deepEqual(
        [llmd.tunables.prefixWeight, llmd.tunables.kvWeight, llmd.tunables.queueWeight],
        [0, 2, 1],
      );
      // 128 characters are 32 tokens, two 16-token blocks: 8 of them hash 16 engine blocks.
      assert.equal(router.approxForgetting?.maxPrefixBlocks, 16);
      assert.equal(router.approxForgetting?.capacityBlocks, 62_500);
      assert.equal(
        policyLabel(c),
        'llmd, scorer weights prefix=0,queue=1, prefix-cache-scorer ' +
          'hashBlockSize=128,maxPrefixBlocksToMatch=8,lruCapacityPerServer=31250',
      );
    }
    // Without them, nothing changes.
    const plain = serveConfig([]);
    assert.equal(plain.scorerWeights, undefined);
    assert.equal(plain.prefixCacheScorer, undefined);
    assert.equal(policyLabel(plain), 'delay-cost');
    assert.deepEqual(scorerRouterOptions(plain, plain.index, plain.blockSize), {
      policyOptions: {},
    });
  });

  test('bad keys, values, policies and indexes are usage errors naming the flag', () => {
    for (const spec of [specOf(SERVE_OPTIONS), specOf(EPP_OPTIONS)]) {
      const llmd = ['--policy', 'llmd'];
      serveUsageError(
        [...llmd, '--scorer-weights', 'prefix=1,lora=2'],
        "--scorer-weights takes KEY=VALUE pairs, keys prefix, kv, queue; got 'lora=2'",
        spec,
      );
      serveUsageError(
        [...llmd, '--scorer-weights', 'kv=x'],
        "--scorer-weights: kv takes a weight >= 0, got 'x'",
        spec,
      );
      serveUsageError(
        ['--scorer-weights', 'prefix=1'],
        '--scorer-weights weighs the scorers of llmd, llmd-precise; --policy names none of them (delay-cost)',
        spec,
      );
      serveUsageError(
        [...llmd, '--index', 'approx', '--prefix-cache-scorer', 'blockSize=64'],
        '--prefix-cache-scorer takes KEY=VALUE pairs, keys hashBlockSize, maxPrefixBlocksToMatch, ' +
          "lruCapacityPerServer; got 'blockSize=64'",
        spec,
      );
      serveUsageError(
        [...llmd, '--prefix-cache-scorer', 'hashBlockSize=64'],
        "--prefix-cache-scorer sets llm-d's approximate record: give it with --index approx " +
          '(or index: approx in the config), got events',
        spec,
      );
    }
  });

  test('the config keys: the text or a mapping; the flags over them, key by key', () => {
    const c = applyConfigDoc(
      {
        policy: 'llmd',
        index: 'approx',
        'scorer-weights': { prefix: 0, kv: 0, queue: 1 },
        'prefix-cache-scorer': 'lruCapacityPerServer=2200',
      },
      defaultConfig(),
    );
    assert.deepEqual(c.scorerWeights, { prefix: 0, kv: 0, queue: 1 });
    assert.equal(c.prefixCacheScorer?.lruCapacityPerServer, 2200);
    assert.deepEqual(
      applyConfigDoc({ 'prefix-cache-scorer': { hashBlockSize: 256 } }, defaultConfig())
        .prefixCacheScorer,
      { hashBlockSize: 256, maxPrefixBlocksToMatch: 256, lruCapacityPerServer: 31_250 },
    );
    const dir = mkdtempSync(join(tmpdir(), 'kvroute-scorers-'));
    try {
      const file = join(dir, 'kvroute.yaml');
      writeFileSync(
        file,
        'policy: llmd\nindex: approx\nscorer-weights: {prefix: 0, kv: 0, queue: 1}\n' +
          'prefix-cache-scorer: {lruCapacityPerServer: 2200}\n',
      );
      const merged = serveConfig([
        ...['--config', file, '--scorer-weights', 'queue=2'],
        ...['--prefix-cache-scorer', 'hashBlockSize=128'],
      ]);
      assert.deepEqual(merged.scorerWeights, { prefix: 0, kv: 0, queue: 2 });
      assert.deepEqual(merged.prefixCacheScorer, {
        hashBlockSize: 128,
        maxPrefixBlocksToMatch: 256,
        lruCapacityPerServer: 2200,
      });
      // The file's weights with a policy they do not weigh: refused as the flag is.
      assert.throws(
        () => serveConfig(['--config', file, '--policy', 'cost']),
        /--scorer-weights weighs the scorers of llmd, llmd-precise; --policy names none of them \(cost\)/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('bad config values name the key and the accepted keys', () => {
    configError(
      { 'scorer-weights': { prefix: 1, lora: 2 } },
      "config: scorer-weights takes keys prefix, kv, queue; got 'lora'",
    );
    configError(
      { 'scorer-weights': { kv: -1 } },
      "config: scorer-weights: kv takes a weight >= 0, got '-1'",
    );
    configError(
      { 'scorer-weights': 3 },
      'config: scorer-weights takes KEY=VALUE pairs, keys prefix, kv, queue, or a mapping of them',
    );
    configError(
      { 'prefix-cache-scorer': { lruCapacityPerServer: 0.5 } },
      "config: prefix-cache-scorer: lruCapacityPerServer takes an integer >= 1, got '0.5'",
    );
    configError(
      { 'prefix-cache-scorer': 'hashBlockSize=64,hashBlockSize=32' },
      'config: prefix-cache-scorer gives hashBlockSize twice',
    );
  });

  test('the commands print one line naming the flag and exit 2', () => {
    for (const [command, args, pattern] of [
      [
        'serve',
        ['--policy', 'llmd', '--scorer-weights', 'prefix=-1'],
        /--scorer-weights: prefix takes a weight >= 0/,
      ],
      [
        'epp',
        ['--policy', 'llmd', '--prefix-cache-scorer', 'x=1'],
        /--prefix-cache-scorer takes KEY=VALUE pairs, keys hashBlockSize, maxPrefixBlocksToMatch, lruCapacityPerServer; got 'x=1'/,
      ],
    ] as const) {
      const r = runCli([command, ...args], 120_000);
      assert.equal(r.status, 2, `${command} ${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, pattern);
      assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    }
  });
});
