/**
 * The README's tour and every guide's first command block, run as a new user would type them
 * (test/support/docRunner.ts says what is changed for a shared test machine: ports, /tmp, npx):
 * servers start and answer, curl gets an answer in vLLM's shape, the `openai` example finds its
 * shared prefix cached, the simulator prints the README's table byte for byte, the planner its
 * verdict. Nothing here measures time.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DocRunner, type LineResult } from '../support/docRunner.ts';
import { type CodeBlock, guidePaths, readDoc } from '../support/docs.ts';

/** curl's output is JSON, and no error. */
function assertAnswered(results: LineResult[]): void {
  for (const r of results.filter((x) => x.line.startsWith('curl'))) {
    const body = JSON.parse(r.stdout);
    assert.equal(body.error, undefined, `${r.line}: ${r.stdout}`);
  }
}

describe("the README's five-minute tour", () => {
  const readme = readDoc('README.md');
  const tour = readme.text.slice(
    readme.text.indexOf('## A five-minute tour'),
    readme.text.indexOf('\n## ', readme.text.indexOf('## A five-minute tour') + 1),
  );
  const blocks = readme.blocks.filter((b) => tour.includes(b.text));
  const shell = blocks.filter((b) => b.lang === 'sh');

  test('start, curl, the openai client, sim and plan, in order', async () => {
    assert.equal(shell.length, 4, 'start+curl, the example, sim, plan');
    const runner = new DocRunner();
    try {
      const [start, example, sim, plan] = shell as [CodeBlock, CodeBlock, CodeBlock, CodeBlock];
      const started = await runner.run(start);
      assertAnswered(started);
      const chat = JSON.parse(started[1]!.stdout);
      assert.equal(chat.object, 'chat.completion');
      assert.equal(chat.usage.completion_tokens, 16);
      assert.equal(JSON.parse(started[2]!.stdout).replicas.length, 4);

      // Two chats sharing a long system prompt: the second finds it cached.
      const [chats] = await runner.run(example);
      const counts = [...chats!.stdout.matchAll(/(\d+) prompt tokens, (\d+) cached/g)].map((m) => [
        Number(m[1]),
        Number(m[2]),
      ]);
      assert.equal(counts.length, 2, chats!.stdout);
      assert.equal(counts[0]![1], 0, 'the first chat finds nothing cached');
      assert.ok(
        counts[1]![1]! >= counts[1]![0]! / 2,
        `the second finds its prefix: ${chats!.stdout}`,
      );

      // The simulator prints the table the README shows, byte for byte (same seed, same output).
      const [table] = await runner.run(sim);
      const shown = blocks[blocks.indexOf(sim) + 1]!;
      assert.equal(shown.lang, '');
      assert.ok(table!.stdout.startsWith(`${shown.text}\n`), table!.stdout);

      const [planned] = await runner.run(plan);
      assert.match(
        planned!.stdout,
        /^Verdict: affinity is worth having: .* it needs 22 replicas instead of 45\.$/m,
      );
      // The gateway's whole start-up text, the dashboard's URL in it (the lines above ran
      // synchronously: give the event loop turns to read what the server wrote meanwhile).
      for (let i = 0; i < 100 && !started[0]!.stdout.includes('dashboard:'); i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.match(started[0]!.stdout, /dashboard: http:\/\/127\.0\.0\.1:\d+\//);
    } finally {
      await runner.close();
    }
  });
});

describe("every guide's first command block runs", () => {
  for (const path of guidePaths()) {
    test(path, async () => {
      const block = readDoc(path).blocks[0]!;
      const runner = new DocRunner();
      try {
        const results = await runner.run(block);
        assert.ok(results.length > 0);
        assertAnswered(results);
      } finally {
        await runner.close();
      }
    });
  }
});

test('docs/nats.md: two gateways share their state over NATS, a third follows a registered engine', async () => {
  const block = readDoc('docs/nats.md').blocks.find((b) => b.text.startsWith('nats-server'));
  assert.ok(block, 'the live block');
  const runner = new DocRunner();
  try {
    const results = await runner.run(block);
    const bench = results.find((r) => r.line.includes('kvroute bench'))!;
    assert.match(bench.stdout, /hit rate/);
    const state = JSON.parse(results.find((r) => r.line.startsWith('curl'))!.stdout);
    assert.equal(state.sync.connected, true);
    assert.equal(state.sync.peers.length, 1, 'the other gateway is its peer');
    assert.ok(state.sync.applied > 0, `records applied: ${JSON.stringify(state.sync)}`);
    // The gateway without --backend adds the engine that registered (bounded poll).
    const follower = `http://127.0.0.1:${runner.port('8082')}/router/replicas`;
    const engine = `127.0.0.1:${runner.port('8002')}`;
    let names: string[] = [];
    for (let i = 0; i < 240 && !names.includes(engine); i++) {
      const replicas = (await (await fetch(follower)).json()) as { replicas: { name: string }[] };
      names = replicas.replicas.map((r) => r.name);
      if (!names.includes(engine)) await new Promise((resolve) => setTimeout(resolve, 250));
    }
    assert.deepEqual(names, [engine]);
  } finally {
    await runner.close();
  }
});

test('docs/pd.md: a request prefilled on the prefill engine, decoded on the decode engine', async () => {
  const block = readDoc('docs/pd.md').blocks.find((b) => b.text.includes('role=prefill'));
  assert.ok(block, 'the live block');
  const runner = new DocRunner();
  try {
    const results = await runner.run(block);
    const [head, body] = results.find((r) => r.line.startsWith('curl'))!.stdout.split('\r\n\r\n');
    assert.match(head!, /^HTTP\/1\.1 200/);
    // Labels in --backend order, not addresses (docs/security.md).
    assert.match(head!, /x-kvroute-prefill-replica: replica-0(\r|$)/i);
    assert.match(head!, /x-kvroute-replica: replica-1(\r|$)/i);
    assert.equal(JSON.parse(body!).usage.completion_tokens, 8);
  } finally {
    await runner.close();
  }
});
