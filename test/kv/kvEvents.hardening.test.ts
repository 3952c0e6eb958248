/**
 * KV events against hostile or misconfigured publishers: malformed BlockStored events refused
 * (nothing indexed), a publisher whose sequence goes back many times a second distrusted until
 * it behaves, restarts logged rate-limited, the replay socket bound whatever its address, bind
 * failures as one line naming the flag, a central bound SUB socket (`kv-events-bind`) whose
 * batches are attributed by llm-d's topic `kv@<pod-ip>@<model>`, and the warnings about
 * backends whose events do not arrive.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { Writable } from 'node:stream';
import { after, describe, test } from 'node:test';
import { pack } from 'msgpackr';
import OpenAI from 'openai';
import { Dealer, Publisher } from 'zeromq';
import { KvEventPublisher } from '../../src/engine/server/publisher.ts';
import { CentralEvents, podOfTopic } from '../../src/serving/centralEvents.ts';
import { defaultConfig } from '../../src/serving/config.ts';
import { type GatewayHandle, startGateway } from '../../src/gateway/gateway.ts';
import { makeLogger, silentLogger } from '../../src/serving/log.ts';
import { EventSubscriber } from '../../src/serving/subscriber.ts';
import {
  decodeEventBatch,
  encodeEventBatch,
  encodeSeq,
  readReplayReply,
} from '../../src/kv/wire.ts';
import type { ForeignKvEvent } from '../../src/router/index.ts';
import { startEngine, tokens, waitFor } from '../support/gateway.harness.ts';
import { freePort } from '../support/ports.ts';

type Line = Record<string, unknown> & { level: string; msg: string };

function capture(): { lines: Line[]; logger: ReturnType<typeof makeLogger> } {
  const lines: Line[] = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l) as Line);
      done();
    },
  });
  return { lines, logger: makeLogger({ level: 'info', destination, pretty: false }) };
}

/** A stored event as vLLM >= 0.26 writes it (map form), with the fields given overriding. */
function stored(fields: Record<string, unknown>): Record<string, unknown> {
  return {
    type: 'BlockStored',
    block_hashes: [11, 12],
    parent_block_hash: null,
    token_ids: [1, 2, 3, 4],
    block_size: 2,
    lora_id: null,
    medium: 'GPU',
    ...fields,
  };
}

const batchOf = (...events: unknown[]): Buffer => pack([1.5, events, 0]);

describe('malformed BlockStored events', () => {
  test('block_size 0, a token count off the blocks, non-integer or negative ids: refused', () => {
    const cases = [
      stored({ block_size: 0 }),
      stored({ block_size: 3 }),
      stored({ block_size: 1.5 }),
      stored({ token_ids: [1, 2, 3, 4.5] }),
      stored({ token_ids: [1, -2, 3, 4] }),
      stored({ token_ids: [1, 'x', 3, 4] }),
      stored({ block_size: null, token_ids: [1, 2, 3] }),
    ];
    const good = stored({ block_hashes: [21], token_ids: [7, 8] });
    const batch = decodeEventBatch(batchOf(...cases, good));
    assert.equal(batch.malformedEvents, cases.length);
    assert.match(batch.malformedReason ?? '', /block_size 0/);
    assert.equal(batch.events.length, 1, 'the well-formed event of the batch still counts');
    const only = batch.events[0]!;
    assert.deepEqual(only.type === 'BlockStored' && only.tokenIds, [7, 8]);
  });

  test('each refusal names what was wrong; ids sent as 64-bit integers still count', () => {
    const reasons = [
      [stored({ token_ids: [1, 2, 3, 4.5] }), /token id 4.5 \(integers >= 0\)/],
      [stored({ token_ids: [1, -2, 3, 4] }), /token id -2 /],
      [stored({ token_ids: [1, 'x', 3, 4] }), /token id of type string/],
      // The block size is judged before the ids, as it was.
      [stored({ block_size: 0, token_ids: [1, -2, 3, 4] }), /block_size 0/],
      [stored({ token_ids: [1, 2, 3] }), /3 token ids for 2 blocks of 2/],
    ] as const;
    for (const [event, reason] of reasons) {
      const batch = decodeEventBatch(batchOf(event));
      assert.equal(batch.malformedEvents, 1);
      assert.match(batch.malformedReason ?? '', reason);
    }
    const wide = decodeEventBatch(batchOf(stored({ token_ids: [1n, 2, 3n, 4] })));
    assert.equal(wide.malformedEvents, 0);
    const only = wide.events[0]!;
    assert.deepEqual(only.type === 'BlockStored' && only.tokenIds, [1, 2, 3, 4]);
  });

  test("an array-form event tagged with a name of Object's prototype is skipped, not the batch", () => {
    const good = ['BlockStored', [21], null, [7, 8], 2];
    for (const tag of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      const batch = decodeEventBatch(batchOf([tag, [11], null, [1, 2], 2], good));
      assert.equal(batch.skippedEvents, 1, tag);
      assert.equal(batch.events.length, 1, tag);
      assert.equal(batch.events[0]!.type, 'BlockStored');
    }
  });

  test('the subscriber indexes nothing from them and counts them', async () => {
    const pub = new Publisher({ linger: 0 });
    await pub.bind('tcp://127.0.0.1:*');
    const seen: ForeignKvEvent[] = [];
    const errors: string[] = [];
    const sub = new EventSubscriber([{ replica: 0, events: pub.lastEndpoint!, replay: null }], {
      onEvents: (_r, events) => seen.push(...events),
      onRestart: () => {},
      onDecodeError: (_r, err) => errors.push(err.message),
    });
    sub.start();
    try {
      let seq = 0n;
      await waitFor(async () => {
        await pub.send([Buffer.alloc(0), encodeSeq(seq++), batchOf(stored({ block_size: 0 }))]);
        return (sub.stats(0)?.malformedEvents ?? 0) > 0;
      }, 'the subscriber to join');
      await pub.send([
        Buffer.alloc(0),
        encodeSeq(seq++),
        batchOf(stored({ token_ids: [1.5, 2, 3, 4] }), { type: 'AllBlocksCleared' }),
      ]);
      await waitFor(() => seen.length > 0, 'the clear after the refused event');
      assert.deepEqual(seen, [{ type: 'AllBlocksCleared' }], 'no BlockStored got through');
      assert.ok(sub.stats(0)!.malformedEvents >= 2);
      assert.equal(sub.stats(0)!.decodeErrors, 0, 'the batches themselves decoded');
      assert.match(errors[0]!, /refused: BlockStored with block_size 0/);
    } finally {
      await sub.close();
      pub.close();
    }
  });
});

describe('a publisher whose sequence keeps going back', () => {
  test('is distrusted once, its batches ignored, and trusted again after sending in order', async () => {
    const pub = new Publisher({ linger: 0 });
    await pub.bind('tcp://127.0.0.1:*');
    const seen: ForeignKvEvent[] = [];
    let broken = 0;
    let trusted = 0;
    let restarts = 0;
    const sub = new EventSubscriber(
      [{ replica: 0, events: pub.lastEndpoint!, replay: null }],
      {
        onEvents: (_r, events) => seen.push(...events),
        onRestart: () => restarts++,
        onBroken: () => broken++,
        onTrusted: () => trusted++,
      },
      {},
      { maxRestarts: 3, windowMs: 60_000, recoverMs: 50 },
    );
    sub.start();
    const cleared = encodeEventBatch([{ type: 'AllBlocksCleared' }], { tsS: 1 });
    const send = (seq: bigint) => pub.send([Buffer.alloc(0), encodeSeq(seq), cleared]);
    try {
      await waitFor(async () => {
        await send(0n);
        return seen.length > 0;
      }, 'the subscriber to join');
      // 5, 0, 5, 0, ...: every other batch goes back.
      for (let i = 0; i < 20; i++) await send(i % 2 === 0 ? 5n : 0n);
      await waitFor(() => broken === 1 && sub.stats(0)!.batchesIgnored > 0, 'the broken verdict');
      await waitFor(() => sub.stats(0)!.batchesIgnored >= 10, 'the rest ignored');
      const stats = sub.stats(0)!;
      assert.equal(stats.distrusted, true);
      assert.equal(stats.brokenEpisodes, 1);
      assert.equal(broken, 1, 'said once');
      assert.ok(restarts <= 4, `restarts counted until the verdict, then ignored: ${restarts}`);
      const before = seen.length;
      // In order from now on: trusted again once they have come in order for recoverMs.
      let seq = 100n;
      await waitFor(async () => {
        await send(seq++);
        return trusted === 1;
      }, 'trusted again');
      await send(seq++);
      await waitFor(() => seen.length > before, 'its events applied again');
      assert.equal(sub.stats(0)!.distrusted, false);
    } finally {
      await sub.close();
      pub.close();
    }
  });

  test('the gateway logs restarts rate-limited and the broken publisher once', async () => {
    const pub = new Publisher({ linger: 0 });
    await pub.bind('tcp://127.0.0.1:*');
    const backend = createFakeBackend();
    const url = await backend.listen();
    const { lines, logger } = capture();
    const gw = await startGateway(
      {
        ...defaultConfig(),
        port: 0,
        backends: [{ url, events: pub.lastEndpoint!, replay: null, model: 'fake', apiKey: null }],
      },
      { logger },
    );
    try {
      const cleared = encodeEventBatch([{ type: 'AllBlocksCleared' }], { tsS: 1 });
      await waitFor(async () => {
        await pub.send([Buffer.alloc(0), encodeSeq(0n), cleared]);
        return gw.router.snapshot().replicas[0]!.lastEventAtMs !== null;
      }, 'the subscriber to join');
      // A garbage flood: random sequence numbers, half of the payloads not msgpack.
      let x = 7n;
      for (let i = 0; i < 2_000; i++) {
        x = (x * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
        await pub.send([
          Buffer.alloc(0),
          encodeSeq(x >> 1n),
          i % 2 === 0 ? cleared : Buffer.from('garbage'),
        ]);
      }
      await waitFor(() => lines.some((l) => /broken KV event publisher/.test(l.msg)), 'broken');
      await waitFor(async () => {
        const r = (await (await fetch(`${gw.url}/router/replicas`)).json()) as {
          replicas: { subscriber: { batchesIgnored: number } }[];
        };
        return r.replicas[0]!.subscriber.batchesIgnored > 100;
      }, 'the flood ignored');
      const restartLines = lines.filter((l) => /engine restarted/.test(l.msg));
      assert.ok(restartLines.length <= 1, `restart lines: ${restartLines.length}`);
      assert.equal(lines.filter((l) => /broken KV event publisher/.test(l.msg)).length, 1);
      assert.ok(lines.length < 20, `${lines.length} lines for 2,000 garbage batches`);
    } finally {
      await gw.close();
      await backend.close();
      pub.close();
    }
  });
});

describe('the engine publisher', () => {
  test('binds its replay socket whatever its address (vLLM binds it always)', async () => {
    const port = await freePort();
    const publisher = await KvEventPublisher.open({
      endpoint: 'tcp://127.0.0.1:*',
      replayEndpoint: `tcp://127.0.0.1:${port}`,
    });
    const dealer = new Dealer({ linger: 0, receiveTimeout: 5_000 });
    try {
      publisher.publish([{ type: 'AllBlocksCleared' }]);
      assert.equal(publisher.replayEndpoint, `tcp://127.0.0.1:${port}`);
      dealer.connect(`tcp://127.0.0.1:${port}`);
      await dealer.send([Buffer.alloc(0), encodeSeq(0n)]);
      const first = readReplayReply(await dealer.receive());
      assert.equal(first.kind, 'batch');
      assert.equal(readReplayReply(await dealer.receive()).kind, 'end');
    } finally {
      dealer.close();
      await publisher.close();
    }
  });

  test('a bind that fails is one line naming the flag', async () => {
    // 192.0.2.0/24 is TEST-NET-1: no host has it.
    await assert.rejects(
      KvEventPublisher.open({ endpoint: 'tcp://*:*', replayEndpoint: 'tcp://192.0.2.1:5558' }),
      (err: Error & { code?: string }) =>
        err.code === 'ERR_CONFIG' &&
        /^--kv-replay tcp:\/\/192\.0\.2\.1:5558: cannot bind/.test(err.message),
    );
    await assert.rejects(
      CentralEvents.bind('tcp://192.0.2.1:5557', silentLogger()),
      /^GatewayError: --kv-events-bind tcp:\/\/192\.0\.2\.1:5557: cannot bind/,
    );
    // IPv6 loopback: bound where IPv6 is on, else the line says IPv6 looks off.
    try {
      const pub = await KvEventPublisher.open({ endpoint: 'tcp://[::1]:*' });
      await pub.close();
    } catch (err) {
      assert.match((err as Error).message, /^--kv-events tcp:\/\/\[::1\]:\*: cannot bind: .*IPv6/);
    }
  });
});

describe('a central bound socket (kv-events-bind)', () => {
  const closers: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const c of closers.reverse()) await c();
  });

  test("llm-d's topic form", () => {
    assert.equal(podOfTopic('kv@10.0.0.5@meta-llama/Llama-3.1-8B'), '10.0.0.5');
    assert.equal(podOfTopic('kv@10.0.0.5'), null);
    assert.equal(podOfTopic(''), null);
  });

  test('engines that connect are attributed by topic; unknown topics are counted, not indexed', async () => {
    const { lines, logger } = capture();
    // The gateway binds first, on a port of its choosing (nothing can take it in between), with
    // a backend nothing serves; the engines connect to what it bound, then a reload names them.
    const config = {
      ...defaultConfig(),
      port: 0,
      kvEventsBind: 'tcp://127.0.0.1:*',
      backends: [
        { url: 'http://127.0.0.1:9', events: null, replay: null, model: null, apiKey: null },
      ],
    };
    const gw: GatewayHandle = await startGateway(config, { logger });
    closers.push(() => gw.close());
    type Snap = {
      replicas: { url: string; indexedBlocks: number; subscriber: { batches: number } }[];
      kvEventsBind: {
        endpoint: string;
        batches: number;
        unknownTopics: Record<string, number>;
      };
    };
    const snap = async () => (await (await fetch(`${gw.url}/router/replicas`)).json()) as Snap;
    const bind = (await snap()).kvEventsBind.endpoint;
    assert.match(bind, /^tcp:\/\/127\.0\.0\.1:\d+$/);
    // The engines publish to the gateway's endpoint (no *: they connect), as llm-d's pods do:
    // one under llm-d's topic (its URL's host:port as the pod), one under its topic= key.
    const p0 = await freePort();
    const e0 = await startEngine({
      seed: 0,
      speedup: 100,
      port: p0,
      kvEvents: bind,
      kvReplay: 'tcp://127.0.0.1:*',
      kvEventsTopic: `kv@127.0.0.1:${p0}@llama-3.3-70b`,
    });
    const e1 = await startEngine({
      seed: 1,
      speedup: 100,
      kvEvents: bind,
      kvReplay: 'tcp://127.0.0.1:*',
      kvEventsTopic: 'pod-b',
    });
    const stranger = await startEngine({
      seed: 2,
      speedup: 100,
      kvEvents: bind,
      kvEventsTopic: 'kv@10.9.9.9@llama-3.3-70b',
    });
    closers.push(
      () => e0.close(),
      () => e1.close(),
      () => stranger.close(),
    );
    const reloaded = gw.reload({
      ...config,
      backends: [
        { url: e0.url, events: null, replay: e0.replayEndpoint, model: null, apiKey: null },
        {
          url: e1.url,
          events: null,
          replay: e1.replayEndpoint,
          model: null,
          apiKey: null,
          topic: 'pod-b',
        },
      ],
    });
    assert.deepEqual(reloaded.added, [e0.url, e1.url]);
    await waitFor(
      () => gw.backends().every((b) => b.url !== 'http://127.0.0.1:9'),
      'the placeholder backend drained',
    );
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const strangerClient = new OpenAI({
      baseURL: `${stranger.url}/v1`,
      apiKey: 'x',
      maxRetries: 0,
    });
    let seed = 0;
    await waitFor(async () => {
      // The publishers' connections come up asynchronously: send until each replica has indexed.
      for (const e of [e0, e1]) {
        await fetch(`${e.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ prompt: tokens(seed++, 64), max_tokens: 1 }),
        });
      }
      await strangerClient.completions.create({
        model: stranger.servedModelName,
        prompt: tokens(seed++, 64),
        max_tokens: 1,
      });
      const s = await snap();
      return (
        s.replicas.every((r) => r.indexedBlocks > 0) &&
        Object.keys(s.kvEventsBind.unknownTopics).length > 0
      );
    }, 'both replicas indexed through the bound socket');
    const s = await snap();
    assert.ok(s.kvEventsBind.batches >= 2);
    assert.deepEqual(Object.keys(s.kvEventsBind.unknownTopics), ['kv@10.9.9.9@llama-3.3-70b']);
    const total = s.replicas.reduce((a, r) => a + r.indexedBlocks, 0);
    // A completion through the gateway is served with its prefix cached where it was indexed.
    const prompt = tokens(999, 96);
    await client.completions.create({ model: e0.servedModelName, prompt, max_tokens: 1 });
    await waitFor(async () => {
      const now = await snap();
      return now.replicas.reduce((a, r) => a + r.indexedBlocks, 0) > total;
    }, 'the routed request indexed');
    const unknownLines = lines.filter((l) => /topic that names no backend/.test(l.msg));
    assert.equal(unknownLines.length, 1, 'logged once a minute at most');
    assert.equal(unknownLines[0]!.topic, 'kv@10.9.9.9@llama-3.3-70b');
  });
});

describe('backends whose KV events do not arrive are warned about', () => {
  test('an events endpoint nobody binds, and no batch while serving', async () => {
    const backend = createFakeBackend();
    const url = await backend.listen();
    const { lines, logger } = capture();
    const port = await freePort();
    const gw = await startGateway(
      {
        ...defaultConfig(),
        port: 0,
        eventsCheckMs: 100,
        // An engine started with --kv-events tcp://127.0.0.1:P connects too: nothing binds P.
        backends: [
          { url, events: `tcp://127.0.0.1:${port}`, replay: null, model: 'fake', apiKey: null },
        ],
      },
      { logger },
    );
    try {
      const warned = await waitFor(
        () => lines.find((l) => /nothing accepts a connection/.test(l.msg)),
        'the unconnected warning',
      );
      assert.equal(warned.level, 'warn');
      assert.equal(warned.events, `tcp://127.0.0.1:${port}`);
      // Now something binds there but never publishes, and the backend serves a request.
      const pub = new Publisher({ linger: 0 });
      await pub.bind(`tcp://127.0.0.1:${port}`);
      try {
        await waitFor(async () => {
          const r = (await (await fetch(`${gw.url}/router/replicas`)).json()) as {
            replicas: { subscriber: { connected: boolean } }[];
          };
          return r.replicas[0]!.subscriber.connected;
        }, 'the subscriber to connect');
        const res = await fetch(`${gw.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          // A full block of prompt at least: its prefill stores a block, so a KV event is due.
          body: JSON.stringify({ model: 'fake', prompt: 'hello '.repeat(40), stream: true }),
        });
        await res.text();
        const noBatch = await waitFor(
          () => lines.find((l) => /no batch from this backend while it served/.test(l.msg)),
          'the no-batch warning',
        );
        assert.equal(noBatch.served, 1);
      } finally {
        pub.close();
      }
    } finally {
      await gw.close();
      await backend.close();
    }
  });
});

/** A backend that answers /metrics, /health, /v1/models and streams one completion. */
function createFakeBackend() {
  const SSE =
    'data: {"id":"x","object":"text_completion","choices":[{"index":0,"text":"hi","finish_reason":"length"}]}\n\ndata: [DONE]\n\n';
  const server = createServer((req, res) => {
    if (req.url === '/metrics') {
      res.end('vllm:kv_cache_usage_perc 0.1\nvllm:num_requests_running 0\n');
      return;
    }
    if (req.url === '/health') return void res.end();
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(SSE);
    });
  });
  return {
    async listen(): Promise<string> {
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    },
    async close(): Promise<void> {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
