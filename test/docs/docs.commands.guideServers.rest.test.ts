/**
 * The first command block of every guide that starts servers and that no part names
 * (test/support/guideBlocks.ts), run as a new user would type it: each line exits 0, each curl
 * gets an answer in vLLM's shape. The named parts: docs.commands.guideServers.*.test.ts; the
 * guides whose first block starts no server: docs.commands.guideRuns.*.test.ts. Here too: the
 * parts name guides that exist and start servers, each once. Nothing here measures time.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { guidePaths } from '../support/docs.ts';
import {
  guideBlockTests,
  SERVER_GUIDE_PARTS,
  serverGuides,
  startsServer,
} from '../support/guideBlocks.ts';

test('the parts name guides whose first block starts servers, each once', () => {
  const named: string[] = Object.values(SERVER_GUIDE_PARTS).flat();
  assert.equal(new Set(named).size, named.length, `named twice: ${named.join(', ')}`);
  const guides = new Set(guidePaths());
  for (const path of named) {
    assert.ok(guides.has(path), `${path}: no such guide`);
    assert.ok(startsServer(path), `${path}: its first block starts no server`);
  }
});

guideBlockTests(
  "a server guide's first command block runs (the guides no part names)",
  serverGuides('rest'),
  true,
);
