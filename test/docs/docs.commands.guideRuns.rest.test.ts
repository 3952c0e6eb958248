/**
 * The first command block of every guide that starts no server, only commands that end, and that
 * no part names (test/support/guideBlocks.ts), run as a new user would type it: each line exits
 * 0, each curl gets an answer in vLLM's shape. The named parts: docs.commands.guideRuns.*.test.ts;
 * the guides whose first block starts servers: docs.commands.guideServers.*.test.ts. Here too: the
 * parts name guides that exist and start no server, each once. These blocks are CPU-bound
 * (plans, calibration), so they run one after another: at once on a busy 2-core host they only
 * share its CPU and can outlast the runner's hang guard. Nothing here measures time.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { guidePaths } from '../support/docs.ts';
import {
  guideBlockTests,
  RUN_GUIDE_PARTS,
  runGuides,
  startsServer,
} from '../support/guideBlocks.ts';

test('the parts name guides whose first block starts no server, each once', () => {
  const named: string[] = Object.values(RUN_GUIDE_PARTS).flat();
  assert.equal(new Set(named).size, named.length, `named twice: ${named.join(', ')}`);
  const guides = new Set(guidePaths());
  for (const path of named) {
    assert.ok(guides.has(path), `${path}: no such guide`);
    assert.ok(!startsServer(path), `${path}: its first block starts a server`);
  }
});

guideBlockTests("every guide's first command block runs", runGuides('rest'), false);
