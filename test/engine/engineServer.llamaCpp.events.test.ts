/**
 * The KV events of a real engine decode into the gateway's index: the gateway's subscriber reads
 * them off ZMQ, the router's foreign-key map keys them on their token ids, and the events index
 * then holds exactly the blocks the gateway computes for the prompts (Hugging Face's Llama 3
 * tokenizer, the one the gateway uses) while the engine holds them, and drops a prompt's blocks
 * once its only sequence was overwritten.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { EngineServerHandle } from '../../src/engine/server/server.ts';
import { EventSubscriber } from '../../src/serving/subscriber.ts';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import { EventIndex } from '../../src/router/index/eventIndex.ts';
import { ForeignKeyMap } from '../../src/router/index/foreignKeys.ts';
import { loadPromptTokenizer } from '../../src/tokenizer/promptTokenizer.ts';
import { clientFor, waitFor } from '../support/engineServerHelpers.ts';
import { startLlamaEngine } from '../support/llamaEngine.ts';
import { LLAMA3_DIR } from '../support/tokenizerFixtures.ts';

const BLOCK = 16;
const FIRST =
  'Routing by cached prefix needs to know what each engine holds, block by block, as the ' +
  'engine publishes it: stored when a block of a prompt is computed, removed when it is gone.';
const SECOND =
  'A different conversation altogether, which shares no block with the first one, long ' +
  'enough to fill several blocks of sixteen tokens each in the only sequence there is, and ' +
  'then some more words so that it surely spans more than two of them.';

let engine: EngineServerHandle;
let subscriber: EventSubscriber;
const index = new EventIndex(1);
const foreign = new ForeignKeyMap();
let batches = 0;

before(async () => {
  // One sequence and no idle ones: a second prompt overwrites the first's KV.
  engine = await startLlamaEngine(
    { maxSeqs: 1, kvEvents: 'tcp://127.0.0.1:*', kvReplay: 'tcp://127.0.0.1:*' },
    { cacheSequences: 0 },
  );
  subscriber = new EventSubscriber(
    [{ replica: 0, events: engine.eventsEndpoint!, replay: engine.replayEndpoint }],
    {
      onEvents: (replica, events) => {
        batches++;
        index.applyEvents(replica, foreign.translate(events), foreign.sharedKeys);
      },
      onRestart: (replica) => index.clearReplica(replica),
    },
  );
  subscriber.start();
});

after(async () => {
  await subscriber?.close();
  await engine?.close();
});

async function complete(prompt: string): Promise<number> {
  const res = await clientFor(engine).completions.create({
    model: 'tiny',
    prompt,
    max_tokens: 2,
    temperature: 0,
  });
  return res.usage!.prompt_tokens;
}

test("a real engine's BlockStored and BlockRemoved events keep the gateway's index exact", async () => {
  const hf = loadPromptTokenizer({ tokenizer: LLAMA3_DIR, chatTemplate: null });
  const firstKeys = computeBlockKeys(hf.encodePrompt(FIRST), BLOCK);
  const secondKeys = computeBlockKeys(hf.encodePrompt(SECOND), BLOCK);
  assert.ok(
    firstKeys.length >= 2 && secondKeys.length >= 2,
    `${firstKeys.length}, ${secondKeys.length} blocks`,
  );
  assert.equal(await complete(FIRST), hf.encodePrompt(FIRST).length, 'the same ids on both sides');
  await waitFor(
    () => firstKeys.every((k) => index.blocks.has(k, 0)),
    30_000,
    "the first prompt's blocks in the index",
  );
  assert.equal(index.blockCount(0), firstKeys.length);
  await complete(SECOND);
  await waitFor(
    () =>
      secondKeys.every((k) => index.blocks.has(k, 0)) && index.blockCount(0) === secondKeys.length,
    30_000,
    "only the second prompt's blocks in the index",
  );
  assert.ok(
    firstKeys.every((k) => !index.blocks.has(k, 0)),
    'the overwritten blocks were removed',
  );
  assert.equal(foreign.unresolvedBlocks, 0);
  assert.ok(batches >= 2);
});
