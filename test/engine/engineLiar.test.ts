import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Dealer } from 'zeromq';
import { readFlags } from '../../src/cli/args.ts';
import { ENGINE_FAULT_FLAGS, readEngineFaultFlags } from '../../src/cli/engineFaultFlags.ts';
import { liarStoredEvent } from '../../src/engine/server/faults.ts';
import { startEngineServer } from '../../src/engine/server/server.ts';
import { computeBlockKeys, toWireHash } from '../../src/kv/blockKey.ts';
import { decodeEventBatch, encodeSeq, type WireEvent } from '../../src/kv/wire.ts';

const BLOCK = 16;

/** Every buffered batch's events, asked of the replay socket from seq 0 (no timing involved). */
async function replayedEvents(endpoint: string): Promise<WireEvent[]> {
  const dealer = new Dealer({ linger: 0, receiveTimeout: 3_000 });
  dealer.connect(endpoint);
  try {
    await dealer.send([Buffer.alloc(0), encodeSeq(0n)]);
    const events: WireEvent[] = [];
    for (;;) {
      const [, , seq, payload] = await dealer.receive();
      if (seq!.equals(Buffer.alloc(8, 0xff))) return events;
      events.push(...decodeEventBatch(payload!).events);
    }
  } finally {
    dealer.close();
  }
}

async function ask(url: string, prompt: number[]): Promise<{ prompt: number; cached: number }> {
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: 1 }),
  });
  assert.equal(res.status, 200);
  const json = (await res.json()) as {
    usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };
  };
  return {
    prompt: json.usage.prompt_tokens,
    cached: json.usage.prompt_tokens_details.cached_tokens,
  };
}

test('--fault-lie is read as the lie fault', () => {
  const flags = readFlags(['--fault-lie'], ENGINE_FAULT_FLAGS);
  assert.notEqual(flags, 'help');
  assert.deepEqual(readEngineFaultFlags(flags as Exclude<typeof flags, 'help'>), { lie: true });
});

test("the liar's stored event: every full block of the prompt, from the root", () => {
  const prompt = Array.from({ length: 40 }, (_, i) => i + 7);
  const e = liarStoredEvent(prompt, BLOCK, { cacheSalt: null, loraName: null })!;
  assert.deepEqual(e.blockKeys, computeBlockKeys(prompt, BLOCK));
  assert.equal(e.parentKey, null);
  assert.deepEqual([...e.tokenIds], prompt.slice(0, 32));
  assert.equal(
    liarStoredEvent(prompt.slice(0, 10), BLOCK, { cacheSalt: null, loraName: null }),
    null,
  );
});

test('a lying engine publishes every prompt as stored, never a removal, and reports it cached', async () => {
  // A pool of 16 blocks and prompts of 10 blocks each: a truthful engine evicts after two.
  const prompts = Array.from({ length: 6 }, (_, p) =>
    Array.from({ length: 10 * BLOCK }, (_, i) => 1000 * (p + 1) + i),
  );
  const start = (lie: boolean) =>
    startEngineServer({
      speedup: 50,
      kvBlocks: 16,
      kvEvents: 'tcp://127.0.0.1:*',
      kvReplay: 'tcp://127.0.0.1:*',
      ...(lie && { faults: { lie: true } }),
    });
  const liar = await start(true);
  const honest = await start(false);
  try {
    for (const prompt of prompts) {
      const lied = await ask(liar.url, prompt);
      assert.deepEqual(lied, { prompt: prompt.length, cached: prompt.length });
      const told = await ask(honest.url, prompt);
      assert.equal(told.cached, 0, 'a fresh prompt is not cached on a truthful engine');
    }
    const lies = await replayedEvents(liar.replayEndpoint!);
    assert.equal(lies.filter((e) => e.type === 'BlockRemoved').length, 0);
    const storedHashes = new Set(
      lies.flatMap((e) => (e.type === 'BlockStored' ? e.blockHashes.map(String) : [])),
    );
    for (const prompt of prompts) {
      for (const key of computeBlockKeys(prompt, BLOCK)) {
        assert.ok(storedHashes.has(String(toWireHash(key))), 'every block published as stored');
      }
    }
    const truth = await replayedEvents(honest.replayEndpoint!);
    assert.ok(
      truth.some((e) => e.type === 'BlockRemoved'),
      'the truthful engine evicts',
    );
  } finally {
    await liar.close();
    await honest.close();
  }
});
