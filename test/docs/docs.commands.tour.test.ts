/**
 * The README's tour, run as a new user would type it (test/support/docRunner.ts says what is
 * changed for a shared test machine: ports, /tmp, npx): servers start and answer, curl gets an
 * answer in vLLM's shape, the `openai` example finds its shared prefix cached, the simulator
 * prints the README's table byte for byte, the planner its verdict. Nothing here measures time.
 * (Every guide's first block: docs.commands.guide*.test.ts; the live NATS and P/D blocks:
 * docs.commands.live.*.test.ts.)
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertAnswered, DocRunner } from '../support/docRunner.ts';
import { type CodeBlock, readDoc } from '../support/docs.ts';

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
