/** `kvroute sim --replay-published`: the published figures beside simulated ones, flags checked. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { UsageError } from '../src/cli/args.ts';
import { replayPublished } from '../src/cli/replayPublished.ts';
import { parseSimFlags, run } from '../src/cli/sim.ts';
import { PUBLISHED_RUNS } from '../src/sim/published/index.ts';

describe('sim --replay-published', () => {
  test('sglang-v0.4: 1,024 prompts each, cache-aware beats round robin', () => {
    const setup = parseSimFlags([...PUBLISHED_RUNS['sglang-v0.4']!.simArgs]);
    assert.ok(setup !== 'help');
    const r = replayPublished('sglang-v0.4', setup.base);
    assert.deepEqual(
      r.rows.map((row) => row.simulated.requests),
      [1024, 1024],
    );
    assert.ok(Math.abs(r.published.ratio - 1.92) < 0.01);
    const [rr, ca] = r.rows;
    assert.ok(ca!.simulated.hitRate > rr!.simulated.hitRate);
    assert.ok(Math.abs(ca!.simulated.hitRate - 0.75) < 0.1);
    assert.ok(Math.abs(ca!.simulated.tokensPerS / 158_596 - 1) < 0.25);
    assert.ok(Math.abs(rr!.simulated.tokensPerS / 82_665 - 1) < 0.25);
  });

  test('an unknown name or another flag is a usage error', async () => {
    await assert.rejects(
      run(['--replay-published', 'nope']),
      (e: unknown) =>
        e instanceof UsageError &&
        e.message === "--replay-published must be one of sglang-v0.4; got 'nope'",
    );
    await assert.rejects(
      run(['--replay-published', 'sglang-v0.4', '--replicas', '4']),
      (e: unknown) => e instanceof UsageError && /drop --replicas/.test(e.message),
    );
  });
});
