/**
 * LoRA in the engine core and on `kvroute engine`'s command line: the load time a step pays for an
 * adapter that is not resident, residency and its eviction, separate caches per adapter, and
 * vLLM's LoRA flags.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  readEngineOptions,
  FLAGS as ENGINE_SERVER_FLAGS,
  parseLoraModule,
} from '../../src/cli/engine.ts';
import { ENGINE_FLAGS } from '../../src/cli/engineFlags.ts';
import { readFlags, UsageError } from '../../src/cli/args.ts';
import { translateVllmArgs } from '../../src/cli/vllmFlags.ts';
import { EngineCore } from '../../src/engine/core.ts';
import { loraAdapterBytes, loraLoadMs, resolveLoraConfig } from '../../src/engine/lora.ts';
import { EngineError, type StepResult } from '../../src/engine/types.ts';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import { toWireHash } from '../../src/kv/blockKey.ts';
import type { KvEvent } from '../../src/kv/events.ts';
import { decodeEventBatch, encodeEventBatch } from '../../src/kv/wire.ts';
import { makeReplicaSpec, mixedStepMs, prefillUsPerToken } from '../../src/model/index.ts';
import { Router } from '../../src/router/router.ts';
import { encode, make, type Py, PyFloat, V025, V026 } from '../support/msgspec.ts';

const spec = makeReplicaSpec();

function makeEngine(maxLoras: number, maxCpuLoras?: number): EngineCore {
  return new EngineCore({
    spec,
    budgetTokens: 8192,
    maxSeqs: 64,
    kvPolicy: 'paged',
    blockSize: 16,
    kvBlocks: 4000,
    lora: { maxLoras, ...(maxCpuLoras !== undefined && { maxCpuLoras }) },
  });
}

const prompt = Array.from({ length: 640 }, (_, i) => i);
let ids = 0;
function run(engine: EngineCore, loraName?: string): { steps: StepResult[]; cached: number } {
  const id = `q${ids++}`;
  engine.add({
    id,
    promptTokens: prompt,
    maxNewTokens: 2,
    arrivalMs: 0,
    ...(loraName && { loraName }),
  });
  const steps: StepResult[] = [];
  while (engine.hasWork()) steps.push(engine.step());
  return { steps, cached: steps.flatMap((s) => s.finished).find((f) => f.id === id)!.cachedTokens };
}

test('the load time formula: a rank-16 Llama 3.3 70B adapter is 167.8 MB, 83.9 ms, 1,177 prefill tokens', () => {
  const config = resolveLoraConfig({ maxLoras: 1 });
  assert.equal(loraAdapterBytes(spec.model, 16), 167_772_160);
  assert.equal(loraLoadMs(spec.model, config).toFixed(1), '83.9');
  assert.equal(Math.round((loraLoadMs(spec.model, config) * 1000) / prefillUsPerToken(spec)), 1177);
  assert.equal(
    loraLoadMs(spec.model, resolveLoraConfig({ maxLoras: 1, maxLoraRank: 64 })).toFixed(1),
    '335.5',
  );
});

test('a step that first runs an adapter pays its load time; a resident adapter does not', () => {
  const engine = makeEngine(1, 2);
  // A rank-16 adapter of Llama 3.3 70B is 167,772,160 B, read at 2 GB/s: 83.88608 ms.
  const loadMs = 83.88608;
  assert.ok(Math.abs(engine.loraLoadMs - loadMs) < 1e-9, `${engine.loraLoadMs}`);
  const first = run(engine, 'sql').steps[0]!;
  assert.ok(Math.abs(first.durationMs - mixedStepMs(spec, first.plan as never) - loadMs) < 1e-9);
  const again = run(engine, 'sql').steps[0]!;
  assert.equal(again.durationMs, mixedStepMs(spec, again.plan as never), 'resident: no load');
  run(engine, 'chat');
  assert.deepEqual(engine.counters().lora?.resident, ['sql', 'chat']);
  // A third adapter evicts the least recently used one (sql), which then loads again.
  run(engine, 'code');
  assert.deepEqual(engine.counters().lora?.resident, ['chat', 'code']);
  const back = run(engine, 'sql').steps[0]!;
  assert.ok(Math.abs(back.durationMs - mixedStepMs(spec, back.plan as never) - loadMs) < 1e-9);
  assert.equal(engine.counters().lora?.loads, 4);
  // The base model never loads anything.
  const base = run(engine).steps[0]!;
  assert.equal(base.durationMs, mixedStepMs(spec, base.plan as never));
});

test('loadAdapter makes an adapter resident up front (vLLM loads --lora-modules at start)', () => {
  const engine = makeEngine(1);
  engine.loadAdapter('sql');
  const first = run(engine, 'sql').steps[0]!;
  assert.equal(first.durationMs, mixedStepMs(spec, first.plan as never));
  assert.equal(engine.unloadAdapter('sql'), true);
  assert.equal(engine.unloadAdapter('sql'), false);
  assert.throws(
    () => new EngineCore({ ...makeEngineConfigWithoutLora() }).loadAdapter('x'),
    EngineError,
  );
});

function makeEngineConfigWithoutLora() {
  return {
    spec,
    budgetTokens: 512,
    maxSeqs: 8,
    kvPolicy: 'paged' as const,
    blockSize: 16,
    kvBlocks: 100,
  };
}

test('an adapter keys its own cache: no hits across adapters or with the base model', () => {
  const engine = makeEngine(2);
  assert.equal(run(engine, 'sql').cached, 0);
  assert.equal(run(engine, 'chat').cached, 0);
  assert.equal(run(engine).cached, 0);
  assert.equal(run(engine, 'sql').cached, 624);
  assert.equal(run(engine, 'chat').cached, 624);
});

test('max_loras holds requests of a second adapter back while the first runs', () => {
  const engine = makeEngine(1);
  engine.add({ id: 'a', promptTokens: prompt, maxNewTokens: 50, arrivalMs: 0, loraName: 'x' });
  engine.add({ id: 'b', promptTokens: prompt, maxNewTokens: 5, arrivalMs: 1, loraName: 'y' });
  engine.add({ id: 'c', promptTokens: prompt, maxNewTokens: 5, arrivalMs: 2 });
  const first = engine.step();
  assert.deepEqual((first.plan as { admitted: string[] }).admitted, ['a', 'c']);
  assert.deepEqual(engine.counters().lora, {
    maxLoras: 1,
    running: ['x'],
    waiting: ['y'],
    resident: ['x'],
    loads: 1,
  });
});

test('LoRA config is checked with vLLM messages', () => {
  assert.throws(() => makeEngine(2, 1), /max_cpu_loras \(1\) must be >= max_loras \(2\)/);
  assert.throws(() => makeEngine(0), /max_loras must be an integer >= 1/);
  assert.throws(
    () => resolveLoraConfig({ maxLoras: 1, maxLoraRank: 12 }),
    /max_lora_rank must be one of/,
  );
});

test("vLLM's LoRA flags: --enable-lora, --lora-modules in both forms, --max-loras and friends", () => {
  const spec = { ...ENGINE_SERVER_FLAGS, ...ENGINE_FLAGS };
  const vllm = translateVllmArgs(
    [
      'meta-llama/Llama-3.3-70B-Instruct',
      '--enable-lora',
      '--lora-modules',
      'sql=/adapters/sql',
      '{"name": "chat", "path": "/adapters/chat", "base_model_name": "meta-llama/Llama-3.3-70B-Instruct"}',
      '--max-loras',
      '4',
      '--max-lora-rank',
      '64',
      '--max-cpu-loras',
      '8',
    ],
    spec,
  );
  assert.deepEqual(vllm.warnings, []);
  const flags = readFlags(vllm.args, ENGINE_SERVER_FLAGS, ENGINE_FLAGS);
  assert.notEqual(flags, 'help');
  const options = readEngineOptions(flags as Exclude<typeof flags, 'help'>);
  assert.equal(options.enableLora, true);
  assert.deepEqual(options.loraModules, [
    { name: 'sql', path: '/adapters/sql' },
    { name: 'chat', path: '/adapters/chat', baseModelName: 'meta-llama/Llama-3.3-70B-Instruct' },
  ]);
  assert.deepEqual(options.lora, { maxLoras: 4, maxCpuLoras: 8, maxLoraRank: 64 });
  assert.throws(() => parseLoraModule('nope'), /Invalid JSON format for --lora-modules: nope/);
  assert.throws(
    () => parseLoraModule('{"name": "a", "path": "/a", "rank": 8}'),
    /Invalid fields for --lora-modules: .* - unexpected keyword argument 'rank'/,
  );
  assert.throws(() => parseLoraModule('{"name": "a"}'), UsageError);
  const bad = readFlags(
    ['--max-loras', '4', '--max-cpu-loras', '2'],
    ENGINE_SERVER_FLAGS,
    ENGINE_FLAGS,
  );
  assert.throws(
    () => readEngineOptions(bad as Exclude<typeof bad, 'help'>),
    /--max-cpu-loras: max_cpu_loras \(2\) must be >= max_loras \(4\)/,
  );
});

/**
 * vLLM's BlockStored for a LoRA request, from its definitions (vllm/v1/core/block_pool.py,
 * cache_full_blocks): lora_id = lora_request.adapter_id, lora_name = lora_request.name, and
 * extra_keys one entry per stored block, generate_block_hash_extra_keys in
 * vllm/v1/core/kv_cache_utils.py: (lora_name, multimodal keys..., cache_salt on the prompt's
 * first block only), a tuple (a msgpack array).
 */
function vllmLoraStored(
  era: typeof V025 | typeof V026,
  s: Extract<KvEvent, { type: 'BlockStored' }>,
  loraId: number,
  loraName: string,
  salt: string | null,
) {
  const extraKeys = s.blockKeys.map((_, b): Py => {
    const keys: Py[] = [loraName];
    if (salt !== null && b === 0 && s.parentKey === null) keys.push(salt);
    return keys;
  });
  return make(era.BlockStored, {
    block_hashes: Array.from(s.blockKeys, toWireHash),
    parent_block_hash: s.parentKey === null ? null : toWireHash(s.parentKey),
    token_ids: Array.from(s.tokenIds),
    block_size: s.blockSize,
    lora_id: loraId,
    medium: 'GPU',
    lora_name: loraName,
    extra_keys: extraKeys,
    ...(era === V026 && { group_idx: 0, kv_cache_spec_kind: 'full_attention' }),
  });
}

test("KV events of an adapter are vLLM's bytes: lora_id, lora_name, the name in extra_keys", () => {
  for (const salt of [null, 'tenant-a']) {
    const engine = makeEngine(1);
    engine.add({
      id: 'e',
      promptTokens: prompt,
      maxNewTokens: 1,
      arrivalMs: 0,
      loraName: 'sql',
      ...(salt !== null && { cacheSalt: salt }),
    });
    const events = engine.step().events;
    const stored = events.filter((e) => e.type === 'BlockStored');
    assert.deepEqual(
      stored.flatMap((e) => e.blockKeys).length,
      640 / 16,
      'the 40 full blocks of the prompt',
    );
    for (const [format, era] of [
      ['map', V026],
      ['array', V025],
    ] as const) {
      const ours = encodeEventBatch(events, {
        tsS: 1,
        dpRank: 0,
        format,
        loraIdOf: (n) => (n === 'sql' ? 7 : null),
      });
      const expected = encode(
        make(era.EventBatch, {
          ts: new PyFloat(1),
          events: events.map((e) => {
            if (e.type !== 'BlockStored') throw new Error(`unexpected ${e.type}`);
            return vllmLoraStored(era, e, 7, 'sql', salt);
          }),
          data_parallel_rank: 0,
        }),
      );
      assert.equal(ours.toString('hex'), expected.toString('hex'), `${format}, salt ${salt}`);
    }
  }
});

test('KV events of an adapter carry lora_id and lora_name; a router keys them with the adapter', () => {
  const engine = makeEngine(1);
  engine.add({ id: 'e', promptTokens: prompt, maxNewTokens: 1, arrivalMs: 0, loraName: 'sql' });
  const events = engine.step().events;
  for (const era of [V026, V025]) {
    // The bytes a vLLM engine sends for these blocks, built from vLLM's definitions.
    const payload = encode(
      make(era.EventBatch, {
        ts: new PyFloat(1),
        events: events.flatMap((e) =>
          e.type === 'BlockStored' ? [vllmLoraStored(era, e, 7, 'sql', null)] : [],
        ),
        data_parallel_rank: 0,
      }),
    );
    const stored = decodeEventBatch(payload).events.filter((e) => e.type === 'BlockStored');
    assert.ok(stored.length > 0);
    for (const s of stored) {
      assert.equal(s.loraId, 7);
      assert.equal(s.loraName, 'sql');
      assert.equal(s.cacheSalt, null, 'the LoRA name in extra_keys is not a salt');
    }
    // A router reading these as a foreign engine's (its own hash over the token ids) keys them as
    // computeBlockKeys with the adapter does, and not as the base model's.
    const router = new Router({ replicas: ['a', 'b'], overlayTtlMs: 0 });
    router.applyForeignEvents(
      'b',
      stored.map((s) => ({ ...s, blockHashes: s.blockHashes })),
      0,
    );
    const route = (loraName?: string) =>
      router.route(
        {
          id: `x${loraName ?? ''}`,
          blockKeys: computeBlockKeys(prompt, 16, { loraName }),
          promptTokens: prompt.length,
          blockSize: 16,
        },
        0,
      );
    const hit = route('sql');
    assert.equal(hit.replica, 'b');
    assert.equal(hit.cachedTokens, 640);
    assert.equal(route().cachedTokens, 0, 'the base model does not match the adapter blocks');
  }
});
