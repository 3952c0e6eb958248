/**
 * llm-d's scorer settings live: gateways started from `kvroute serve`'s flags (or its config
 * file) with `--policy llmd --index approx` in front of three simulated engines, the openai
 * client sending one prompt again and again, one request at a time. With llmd's own weights the
 * replica that served it first keeps it (its prefix scores 3 there, 0 elsewhere); with
 * `--scorer-weights prefix=0,kv=0,queue=1` the warm prefix no longer attracts it, and neither
 * does it once `--prefix-cache-scorer` gives llm-d's record an LRU of one block (the prompt's
 * first block is forgotten at once, so nothing matches). Both are read at start: a reload that
 * changes them says so.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { readFlags } from '../../src/cli/args.ts';
import { SERVE_OPTIONS } from '../../src/cli/options/serve.ts';
import { specOf } from '../../src/cli/options/spec.ts';
import { readServeConfig } from '../../src/cli/serve.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import { type EngineServerHandle, startEngines, tokens } from '../support/gateway.harness.ts';

const MODEL = 'llama-3.3-70b';
const REQUESTS = 8;
/** Twelve blocks of 16 tokens, the same prompt every time. */
const PROMPT = tokens(7, 192);

describe("llm-d's scorer weights through the gateway", () => {
  let engines: EngineServerHandle[] = [];
  let dir = '';
  before(async () => {
    engines = await startEngines(3, { speedup: 1_000 });
    dir = mkdtempSync(join(tmpdir(), 'kvroute-scorers-'));
  });
  after(async () => {
    await Promise.all(engines.map((e) => e.close()));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const backendFlags = () =>
    engines.flatMap((e) => ['--backend', `${e.url},events=${e.eventsEndpoint}`]);

  /** A gateway from serve's flags; the replicas that served the prompt, one request at a time. */
  async function served(argv: string[]): Promise<string[]> {
    const flags = readFlags(
      ['--port', '0', '--host', '127.0.0.1', '--policy', 'llmd', '--index', 'approx', ...argv],
      specOf(SERVE_OPTIONS),
    );
    assert.ok(flags !== 'help');
    const gw = await startGateway(readServeConfig(flags));
    try {
      const client = new OpenAI({
        baseURL: `${gw.url}/v1`,
        apiKey: 'unused',
        maxRetries: 0,
        timeout: 60_000,
      });
      const replicas: string[] = [];
      for (let i = 0; i < REQUESTS; i++) {
        const { response } = await client.completions
          .create({ model: MODEL, prompt: PROMPT, max_tokens: 1 })
          .withResponse();
        const replica = response.headers.get('x-kvroute-replica');
        assert.ok(replica, 'the replica header is present');
        replicas.push(replica);
      }
      return replicas;
    } finally {
      await gw.close();
    }
  }

  test("llmd's own weights: the warm replica keeps the prompt", async () => {
    const replicas = await served(backendFlags());
    assert.equal(new Set(replicas).size, 1, `served by ${replicas.join(', ')}`);
  });

  test('--scorer-weights prefix=0,kv=0,queue=1: the warm prefix no longer attracts it', async () => {
    const replicas = await served([
      ...backendFlags(),
      ...['--scorer-weights', 'prefix=0,kv=0,queue=1'],
    ]);
    assert.ok(new Set(replicas).size > 1, `served by ${replicas.join(', ')}`);
  });

  test('the config file key does the same', async () => {
    const file = join(dir, 'weights.yaml');
    writeFileSync(
      file,
      `scorer-weights: {prefix: 0, kv: 0, queue: 1}\nbackends:\n${engines
        .map((e) => `  - {url: '${e.url}', events: '${e.eventsEndpoint}'}\n`)
        .join('')}`,
    );
    const replicas = await served(['--config', file]);
    assert.ok(new Set(replicas).size > 1, `served by ${replicas.join(', ')}`);
  });

  test('--prefix-cache-scorer lruCapacityPerServer=1: the record forgets the prefix', async () => {
    const replicas = await served([
      ...backendFlags(),
      ...['--prefix-cache-scorer', 'lruCapacityPerServer=1'],
    ]);
    assert.ok(new Set(replicas).size > 1, `served by ${replicas.join(', ')}`);
  });

  test('a reload that changes them names them as needing a restart', async () => {
    const flags = readFlags(
      ['--port', '0', '--host', '127.0.0.1', '--policy', 'llmd', ...backendFlags()],
      specOf(SERVE_OPTIONS),
    );
    assert.ok(flags !== 'help');
    const config = readServeConfig(flags);
    const gw = await startGateway(config);
    try {
      const result = gw.reload({
        ...config,
        scorerWeights: { prefix: 0 },
        prefixCacheScorer: {
          hashBlockSize: 64,
          maxPrefixBlocksToMatch: 8,
          lruCapacityPerServer: 8,
        },
      });
      assert.deepEqual(result.needsRestart, ['prefix-cache-scorer', 'scorer-weights']);
    } finally {
      await gw.close();
    }
  });
});
