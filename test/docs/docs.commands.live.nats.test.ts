/**
 * docs/nats.md's live block, run as a new user would type it (test/support/docRunner.ts): two
 * gateways sharing state over NATS, a third following a registered engine. The other live block
 * (docs/pd.md): docs.commands.live.pd.test.ts. Nothing here measures time.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DocRunner } from '../support/docRunner.ts';
import { readDoc } from '../support/docs.ts';

describe("docs/nats.md's live block", () => {
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
});
