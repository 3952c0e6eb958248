/**
 * The slowdown SLO: its reference (a prompt's time to first token on an idle engine) against the
 * engine itself, its per-request limit, the CLI's flags, and a trace with 100k-token prompts
 * where a fixed TTFT target is out of reach for every replica count and the slowdown is not.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { EngineCore } from '../../src/engine/core.ts';
import { idlePrefillMs, makeIdlePrefill } from '../../src/engine/idlePrefill.ts';
import { ENGINE_DEFAULTS, makeEngineConfig } from '../../src/engine/options.ts';
import type { EngineConfig } from '../../src/engine/types.ts';
import { meetsSlo, ttftLimitMs } from '../../src/results/slo.ts';
import { POLICY_NAMES } from '../../src/router/registry.ts';
import { makeSyntheticTrace } from '../../src/workload/trace.ts';
import { runCli } from '../support/cli.ts';

/** Steps an engine holding one request until its first token; the sum of the step times. */
function engineTtftMs(config: EngineConfig, prompt: number[], warmup?: number[]): number {
  const engine = new EngineCore(config);
  if (warmup) {
    engine.add({ id: 'w', promptTokens: warmup, maxNewTokens: 1, arrivalMs: 0 });
    while (engine.hasWork()) engine.step();
  }
  engine.add({ id: 'r', promptTokens: prompt, maxNewTokens: 2, arrivalMs: 1 });
  let ms = 0;
  for (let i = 0; i < 10_000; i++) {
    const step = engine.step();
    ms += step.durationMs;
    if (step.emitted.some((t) => t.id === 'r')) return ms;
  }
  throw new Error('no first token');
}

const tokens = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);

test('idle prefill time is what an idle engine takes to the first token', () => {
  const configs: EngineConfig[] = [
    makeEngineConfig(ENGINE_DEFAULTS),
    { ...makeEngineConfig({ ...ENGINE_DEFAULTS, budgetTokens: 512 }), alignChunksToBlocks: true },
    { ...makeEngineConfig(ENGINE_DEFAULTS), longPrefillThreshold: 1000 },
  ];
  for (const config of configs) {
    for (const n of [1, 15, 16, 2047, 2048, 2049, 8000, 33_333]) {
      const expected = engineTtftMs(config, tokens(n));
      assert.ok(
        Math.abs(idlePrefillMs(config, n) - expected) < 1e-9,
        `${n} tokens, budget ${config.budgetTokens}: ${idlePrefillMs(config, n)} vs ${expected}`,
      );
    }
    // A cached prefix: 6,000 of 8,000 tokens were prefilled by an earlier request.
    const shared = tokens(6000);
    const warm = engineTtftMs(config, [...shared, ...tokens(2000, 90_000)], shared);
    assert.ok(Math.abs(idlePrefillMs(config, 8000, 6000) - warm) < 1e-9, `${warm}`);
  }
  const seed = makeIdlePrefill(makeEngineConfig(ENGINE_DEFAULTS));
  // The router seed's figure: 8,000 cold tokens at 71.3 us each.
  assert.ok(Math.abs(seed(8000) - 570.4) < 0.5, `${seed(8000)}`);
  // Warm: 2,000 uncached tokens x 71.3 us = 142.6 ms (the seed's 143 ms); the cache counts whole
  // blocks only, so 6,015 cached tokens are 375 blocks = 6,000 tokens, the same figure.
  assert.ok(Math.abs(seed(8000, 6000) - 142.6) < 0.5, `${seed(8000, 6000)}`);
  assert.equal(seed(8000, 6015), seed(8000, 6000));
  assert.ok(seed(8000, 6016) < seed(8000, 6000), 'a 376th cached block saves its 16 tokens');
});

test('a slowdown SLO bounds each request by its own idle time; the p99 decides', () => {
  const slo = { ttftSlowdown: 3, tpotP99Ms: 100 };
  assert.equal(ttftLimitMs(slo, 200), 600);
  assert.equal(ttftLimitMs({ ttftP99Ms: 570, tpotP99Ms: 100 }, 200), 570);
  const p = (p99: number) => ({ p50: p99, p90: p99, p99, mean: p99, count: 100 });
  const run = { errors: 0, ttftMs: p(10_000), tpotMs: p(50) };
  assert.equal(meetsSlo({ ...run, ttftSlowdown: p(2.9) }, slo), true);
  assert.equal(meetsSlo({ ...run, ttftSlowdown: p(3.1) }, slo), false);
  // Judged by a slowdown, a run that did not measure one cannot pass.
  assert.equal(meetsSlo(run, slo), false);
});

test('kvroute sim: the two TTFT targets are alternatives, a slowdown is at least 1', () => {
  const both = runCli(['sim', '--slo-ttft-slowdown', '3', '--slo-ttft-p99-ms', '900']);
  assert.equal(both.status, 2);
  assert.match(both.stderr, /--slo-ttft-p99-ms and --slo-ttft-slowdown/);
  const low = runCli(['sim', '--slo-ttft-slowdown', '0.5']);
  assert.equal(low.status, 2);
  assert.match(low.stderr, /--slo-ttft-slowdown must be at least 1/);
});

/**
 * 120 requests at 1/s over 8 shared 2,048-token roots, every 25th with 196 more blocks: a
 * ~102,000-token prompt (within Llama 3.3 70B's 131,072-token context), 7.3 s of prefill alone.
 */
function longPromptTrace(dir: string): string {
  const path = join(dir, 'long.jsonl');
  writeFileSync(
    path,
    makeSyntheticTrace({
      seed: 5,
      requests: 120,
      ratePerS: 1,
      roots: 8,
      sharedBlocks: 4,
      maxUniqueBlocks: 8,
      outputTokens: 50,
      longPromptEvery: 25,
      longPromptBlocks: 196,
    }),
  );
  return path;
}

interface SearchJson {
  policy: string;
  minReplicas: number | null;
  unmet: { reason: string } | null;
  probes: unknown[];
}

function searchTrace(trace: string, args: string[]): SearchJson[] {
  const out = runCli(
    [
      ...['sim', '--quiet', '--trace', trace, '--replicas', '4', '--warmup', '5', '--search'],
      ...['--json', ...args],
    ],
    180_000,
  );
  assert.equal(out.status, 0, out.stderr);
  return (JSON.parse(out.stdout) as { search: SearchJson[] }).search;
}

test('100k-token prompts: a fixed TTFT target is out of reach, a slowdown finds counts', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-slo-'));
  try {
    const trace = longPromptTrace(dir);
    // 570 ms: the long prompts' own prefill (7.3 s) is over 1 % of the requests. Proven before
    // any probe, for every policy.
    const fixed = searchTrace(trace, ['--policy', 'all', '--max-replicas', '8']);
    assert.equal(fixed.length, POLICY_NAMES.length);
    for (const s of fixed) {
      assert.equal(s.minReplicas, null, s.policy);
      assert.equal(s.unmet?.reason, 'out-of-reach', s.policy);
      assert.deepEqual(s.probes, []);
    }
    // Slowdown 3: a load-aware rule finds a count; consistent hashing keeps a root's requests on
    // the replica prefilling a long prompt of that root, at any count (head-of-line blocking).
    const tight = searchTrace(trace, [
      ...['--policy', 'delay-cost,consistent-hash', '--max-replicas', '16'],
      ...['--slo-ttft-slowdown', '3'],
    ]);
    assert.ok((tight[0]!.minReplicas ?? 99) <= 4, JSON.stringify(tight[0]));
    assert.equal(tight[1]!.minReplicas, null);
    assert.equal(tight[1]!.unmet?.reason, 'not-met');
    // Room for one long prefill ahead of a request (7.3 s over ~0.3 s) and for decodes sharing
    // its 146 ms steps: every policy meets it at some count.
    const loose = searchTrace(trace, [
      ...['--policy', 'all', '--max-replicas', '8'],
      ...['--slo-ttft-slowdown', '25', '--slo-tpot-p99-ms', '200'],
    ]);
    for (const s of loose) assert.ok(s.minReplicas !== null, JSON.stringify(s));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
