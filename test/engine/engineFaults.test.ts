import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readFlags } from '../../src/cli/args.ts';
import { ENGINE_FAULT_FLAGS, readEngineFaultFlags } from '../../src/cli/engineFaultFlags.ts';
import { EngineCore } from '../../src/engine/core.ts';
import { withDroppedEvents } from '../../src/engine/server/faults.ts';
import type { KvEvent } from '../../src/kv/events.ts';
import { makeReplicaSpec } from '../../src/model/index.ts';

const stored: KvEvent = {
  type: 'BlockStored',
  blockKeys: [1, 2],
  parentBlockKey: null,
  tokenIds: [],
  blockSize: 16,
} as unknown as KvEvent;
const removed: KvEvent = { type: 'BlockRemoved', blockKeys: [1] };
const cleared: KvEvent = { type: 'AllBlocksCleared' };

test('dropped event kinds: removed, stored, all', () => {
  const events = [stored, removed, cleared];
  assert.deepEqual(withDroppedEvents(events, undefined), events);
  assert.deepEqual(withDroppedEvents(events, 'removed'), [stored, cleared]);
  assert.deepEqual(withDroppedEvents(events, 'stored'), [removed, cleared]);
  assert.deepEqual(withDroppedEvents(events, 'all'), []);
});

test('a silent reset empties the prefix cache and records no event', () => {
  const core = new EngineCore({
    spec: makeReplicaSpec(),
    budgetTokens: 8192,
    maxSeqs: 8,
    kvPolicy: 'paged',
    blockSize: 16,
    kvBlocks: 64,
  });
  const prompt = Array.from({ length: 160 }, (_, i) => i + 1);
  core.add({ id: 'a', promptTokens: prompt, maxNewTokens: 2, arrivalMs: 0 });
  const events: KvEvent[] = [];
  while (core.hasWork()) events.push(...core.step().events);
  assert.ok(events.some((e) => e.type === 'BlockStored'));
  assert.equal(core.cachedBlockKeys().length, 10);
  assert.equal(core.forgetCacheSilently(), 10);
  assert.equal(core.cachedBlockKeys().length, 0);
  assert.deepEqual(core.takeEvents(), []);
  // The same prompt again finds nothing cached, and its blocks are stored again.
  core.add({ id: 'b', promptTokens: prompt, maxNewTokens: 2, arrivalMs: 1 });
  const again: KvEvent[] = [];
  while (core.hasWork()) again.push(...core.step().events);
  assert.equal(core.cachedTokensOf('b') ?? 0, 0);
  assert.ok(again.some((e) => e.type === 'BlockStored'));
});

test('fault flags: values checked, the flag and the accepted values named', () => {
  const read = (...argv: string[]) => {
    const flags = readFlags(argv, ENGINE_FAULT_FLAGS);
    assert.notEqual(flags, 'help');
    return readEngineFaultFlags(flags as Exclude<typeof flags, 'help'>);
  };
  assert.equal(read(), undefined);
  assert.deepEqual(read('--fault-drop-events', 'removed', '--fault-silent-reset-s', '30'), {
    dropEvents: 'removed',
    silentResetS: 30,
  });
  assert.throws(() => read('--fault-drop-events', 'some'), /--fault-drop-events.*removed/);
  assert.throws(() => read('--fault-silent-reset-s', '-1'), /--fault-silent-reset-s/);
  assert.throws(
    () => read('--fault-chat-template', '/no/such/file.jinja'),
    /--fault-chat-template/,
  );
});

test('the engine server empties its cache silently every N modelled seconds', async () => {
  const { startEngineServer } = await import('../../src/engine/server/server.ts');
  const prompt = Array.from({ length: 160 }, (_, i) => 1000 + i);
  const ask = async (url: string) => {
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt, max_tokens: 1 }),
    });
    const json = (await res.json()) as {
      usage: { prompt_tokens_details: { cached_tokens: number } };
    };
    return json.usage.prompt_tokens_details.cached_tokens;
  };
  // 1 modelled second at speedup 20: a reset every 50 ms of wall time.
  const faulty = await startEngineServer({ speedup: 20, faults: { silentResetS: 1 } });
  const healthy = await startEngineServer({ speedup: 20 });
  try {
    for (const e of [faulty, healthy]) assert.equal(await ask(e.url), 0);
    await new Promise((r) => setTimeout(r, 250));
    assert.equal(await ask(healthy.url), 144);
    assert.equal(await ask(faulty.url), 0);
  } finally {
    await faulty.close();
    await healthy.close();
  }
});
