/**
 * Every guide's first command block that starts servers (the other guides': docs.commands.guideRuns.test.ts), run as a new user would type it
 * (test/support/docRunner.ts): each line exits 0, each curl gets an answer in vLLM's shape. The
 * blocks are independent (own ports, own /tmp), so they run at once. Nothing here measures time.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertAnswered, DocRunner } from '../support/docRunner.ts';
import { commands, guidePaths, readDoc } from '../support/docs.ts';

/** A block that starts a server (a line ending in `&`). */
const startsServer = (path: string) =>
  commands(readDoc(path).blocks[0]!).some((line) => line.endsWith('&'));

describe("every guide's first command block runs", { concurrency: true }, () => {
  for (const path of guidePaths().filter((p) => startsServer(p))) {
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
