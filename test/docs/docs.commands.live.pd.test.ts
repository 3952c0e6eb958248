/**
 * docs/pd.md's live block, run as a new user would type it (test/support/docRunner.ts): a
 * request prefilled on one engine and decoded on another. The other live block (docs/nats.md):
 * docs.commands.live.nats.test.ts. Nothing here measures time.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DocRunner } from '../support/docRunner.ts';
import { readDoc } from '../support/docs.ts';

describe("docs/pd.md's live block", () => {
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
});
