/**
 * `kvroute engine` with a `vllm serve` command line: docs/engine.md's launch line runs unchanged
 * (ports aside: read from the guide, its ports made free ones) and the engine answers as that
 * vLLM would; the flag translation on its own. A flag of neither kvroute nor vLLM:
 * engineServerCli.vllm.badFlags.test.ts.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, test } from 'node:test';
import { Dealer, Subscriber } from 'zeromq';
import { ENGINE_FLAGS } from '../../src/cli/engineFlags.ts';
import { catalogModelOf, humanReadableInt, translateVllmArgs } from '../../src/cli/vllmFlags.ts';
import { decodeEventBatch } from '../../src/kv/wire.ts';
import { MODELS } from '../../src/model/catalog.ts';
import { commands, readDoc } from '../support/docs.ts';
import { END_SEQ, seqBytes } from '../support/msgspec.ts';

/** docs/engine.md's vLLM launch line, as argv after `kvroute engine` (single quotes honoured). */
function guideLaunchLine(): string[] {
  const block = readDoc('docs/engine.md').blocks.find((b) => b.text.includes('meta-llama/'));
  assert.ok(block, 'docs/engine.md has a vLLM launch line');
  const line = commands(block).find((l) => l.startsWith('npx kvroute engine meta-llama/'));
  assert.ok(line);
  const argv = [...line.slice('npx kvroute engine '.length).matchAll(/'([^']*)'|(\S+)/g)].map(
    (m) => m[1] ?? m[2]!,
  );
  return argv;
}

const ENGINE_SPEC = {
  ...ENGINE_FLAGS,
  port: { type: 'string' as const },
  'served-model-name': { type: 'string' as const },
  'block-size': { type: 'string' as const },
};

describe('translateVllmArgs', () => {
  const t = (argv: string[]) => translateVllmArgs(argv, ENGINE_SPEC);

  test('model tags map onto the catalog and name the served model', () => {
    assert.equal(catalogModelOf('meta-llama/Llama-3.3-70B-Instruct'), 'llama-3.3-70b');
    assert.equal(catalogModelOf('meta-llama/Meta-Llama-3.1-8B-Instruct'), 'llama-3.1-8b');
    assert.equal(catalogModelOf('Qwen/Qwen2.5-72B-Instruct'), 'qwen2.5-72b');
    assert.equal(catalogModelOf('mistralai/Mixtral-8x7B-Instruct-v0.1'), 'mixtral-8x7b');
    assert.equal(catalogModelOf('llama-3.1-8b'), 'llama-3.1-8b');
    assert.equal(catalogModelOf('meta-llama/Llama-3.1-80B'), null);
    assert.deepEqual(t(['meta-llama/Llama-3.3-70B-Instruct']), {
      args: [
        '--model',
        'llama-3.3-70b',
        '--served-model-name',
        'meta-llama/Llama-3.3-70B-Instruct',
      ],
      warnings: [],
    });
    const unknown = t(['acme/Frontier-1T', '--sim-model', 'llama-3.1-8b']);
    assert.deepEqual(unknown.args, [
      '--model',
      'llama-3.1-8b',
      '--served-model-name',
      'acme/Frontier-1T',
    ]);
    assert.deepEqual(t(['acme/Frontier-1T']).warnings, [
      `'acme/Frontier-1T' is not in the catalog (${Object.keys(MODELS).join(', ')}); simulating the default model (choose one with --sim-model)`,
    ]);
  });

  test("vLLM's names, short forms and human-readable ints become kvroute's flags", () => {
    const r = t([
      '-tp',
      '4',
      '--max-num-seqs=128',
      '--max-num-batched-tokens',
      '2K',
      '--max-model-len',
      '25.6k',
      '--num-gpu-blocks-override',
      '1000',
      '--served-model-name',
      'a',
      'b',
      '--no-enable-prefix-caching',
      '--block-size',
      '32',
    ]);
    assert.deepEqual(r.args, [
      '--tp',
      '4',
      '--max-seqs',
      '128',
      '--budget',
      '2048',
      '--max-model-len',
      '25600',
      '--kv-blocks',
      '1000',
      '--no-enable-prefix-caching',
      '--block-size',
      '32',
      '--served-model-name',
      'a',
      '--served-model-alias',
      'b',
    ]);
    assert.equal(humanReadableInt('x', '1k'), '1000');
    assert.throws(() => humanReadableInt('x', '1.5K'), /whole numbers/);
    assert.deepEqual(t(['--max-model-len', 'auto']).args, []);
  });

  test('--kv-events-config: JSON, or one field at a time; unknown fields warned', () => {
    const json = t([
      '--kv-events-config',
      '{"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5558", "topic": "kv", "buffer_steps": 500, "hwm": 1, "novel": 2}',
    ]);
    assert.deepEqual(json.args, [
      '--kv-events',
      'tcp://*:5557',
      '--kv-replay',
      'tcp://*:5558',
      '--kv-events-topic',
      'kv',
      '--kv-replay-buffer',
      '500',
    ]);
    assert.deepEqual(json.warnings, ['ignoring unknown --kv-events-config fields: novel']);
    // vLLM's publisher defaults to "zmq" once events are on; off means no events.
    assert.deepEqual(
      t(['--kv-events-config.enable_kv_cache_events=true', '--kv-events-config.topic', 'x']).args,
      ['--kv-events', 'tcp://*:5557', '--kv-events-topic', 'x'],
    );
    assert.deepEqual(t(['--kv-events-config', '{"publisher": "zmq"}']).args, []);
    assert.throws(
      () => t(['--kv-events-config', '{"enable_kv_cache_events": true, "publisher": "kafka"}']),
      /Unknown event publisher 'kafka'/,
    );
    assert.throws(() => t(['--kv-events-config', 'nope']), /must be a JSON object/);
  });

  test('vLLM flags without effect here are named in one warning; others pass to the parser', () => {
    const r = t([
      '--trust-remote-code',
      '--dtype',
      'auto',
      '--api-key',
      'k1',
      'k2',
      '--no-enable-log-requests',
      '--compilation-config={"level": 3}',
      '--port',
      '9',
      '--nonsense',
    ]);
    // --api-key is vLLM's nargs="+": each key becomes one kvroute --api-key (auth.ts).
    assert.deepEqual(r.args, ['--api-key', 'k1', '--api-key', 'k2', '--port', '9', '--nonsense']);
    assert.deepEqual(r.warnings, [
      'ignoring vLLM flags that do not change the simulation: --trust-remote-code --dtype --no-enable-log-requests --compilation-config',
    ]);
    assert.throws(() => t(['-dp', '2']), /--data-parallel-size 2 is not supported/);
    assert.deepEqual(t(['-pp', '1']).args, []);
    // Names of Object's prototype are no flag of either: passed on as they are, for the parser
    // to name as unknown (they once read as a renamed flag, or took the next argument).
    for (const name of ['constructor', 'toString', '__proto__']) {
      assert.deepEqual(t([`--${name}`]).args, [`--${name}`], name);
    }
  });
});

function start(args: string[]) {
  const child = spawn(process.execPath, ['bin/kvroute.js', 'engine', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d: string) => {
    err += d;
  });
  return { child, stderr: () => err };
}

test("docs/engine.md's vLLM launch line runs unchanged and answers as that vLLM would", async () => {
  const guide = guideLaunchLine();
  assert.equal(guide[guide.indexOf('--port') + 1], '8000');
  assert.match(guide[guide.indexOf('--kv-events-config') + 1]!, /"endpoint": "tcp:\/\/\*:5557"/);
  // Ports aside: the port and the two endpoints made free ones on the loopback.
  const args = guide.map((a) =>
    a === '8000'
      ? '0'
      : a
          .replaceAll('tcp://*:5557', 'tcp://127.0.0.1:*')
          .replaceAll('tcp://*:5558', 'tcp://127.0.0.1:*'),
  );
  const { child, stderr } = start([
    ...args,
    // Flags a vLLM launch line often carries, which change nothing in a simulation.
    '--trust-remote-code',
    '--disable-log-requests',
    '--speedup',
    '50',
  ]);
  let sub: Subscriber | null = null;
  try {
    let out = '';
    child.stdout.setEncoding('utf8');
    for await (const chunk of child.stdout) {
      out += chunk;
      if (out.includes('\n')) break;
    }
    const m = /url=(\S+) model=llama-70b events=(tcp:\/\/\S+) replay=(tcp:\/\/\S+)\n$/.exec(out);
    assert.ok(m, `${out} ${stderr()}`);
    const [, url, events, replay] = m;
    assert.equal(
      stderr(),
      'kvroute engine: ignoring vLLM flags that do not change the simulation: --trust-remote-code --disable-log-requests\n',
    );
    const models = (await (await fetch(`${url}/v1/models`)).json()) as {
      data: { id: string; max_model_len: number }[];
    };
    assert.deepEqual(
      models.data.map((d) => [d.id, d.max_model_len]),
      [['llama-70b', 32768]],
    );
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /vllm:cache_config_info\{[^}]*block_size="16"[^}]*\} 1/);
    assert.match(metrics, /gpu_memory_utilization="0.92"/);
    assert.match(metrics, /enable_prefix_caching="True"/);

    sub = new Subscriber({ linger: 0 });
    sub.connect(events!);
    sub.subscribe('kv');
    const first = (async () => {
      for await (const [topic, seq, payload] of sub) return { topic, seq, payload };
    })();
    // Send prompts until the subscriber hears one (PUB/SUB drops what precedes the join).
    let heard: Awaited<typeof first> | undefined;
    first.then((h) => {
      heard = h;
    });
    for (let i = 0; i < 100 && !heard; i++) {
      const res = await fetch(`${url}/v1/completions`, {
        method: 'POST',
        body: JSON.stringify({
          model: 'llama-70b',
          prompt: Array.from({ length: 40 }, (_, t) => 100 + i * 50 + t),
          max_tokens: 1,
        }),
      });
      await res.text();
      await new Promise((r) => setTimeout(r, 30));
    }
    assert.ok(heard, 'events arrive on the configured topic');
    assert.equal(heard.topic!.toString(), 'kv');
    const batch = decodeEventBatch(heard.payload!);
    assert.equal(batch.events[0]?.type, 'BlockStored');

    // Replay as vLLM's own test reads it: delimiter, topic, sequence, payload.
    const dealer = new Dealer({ linger: 0, receiveTimeout: 3_000 });
    dealer.connect(replay!);
    try {
      await dealer.send([Buffer.alloc(0), seqBytes(0)]);
      for (;;) {
        const frames = await dealer.receive();
        assert.equal(frames.length, 4);
        const [delimiter, topic, sequence, payload] = frames;
        assert.equal(delimiter!.length, 0);
        if (sequence!.equals(END_SEQ)) {
          assert.equal(topic!.length, 0);
          assert.equal(payload!.length, 0);
          break;
        }
        assert.equal(topic!.toString(), 'kv');
        decodeEventBatch(payload!);
      }
    } finally {
      dealer.close();
    }
  } finally {
    sub?.close();
    child.kill('SIGTERM');
  }
  const [code] = await once(child, 'exit');
  assert.equal(code, 0);
});
