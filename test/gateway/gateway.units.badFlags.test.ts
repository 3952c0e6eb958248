/**
 * `kvroute serve`'s bad flags as a user types them: one line naming the flag, exit 2. The
 * gateway's parts on their own (config, flags parsed in process, keys, events):
 * gateway.units.parts.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { runCli } from '../support/cli.ts';

describe('config and flags', () => {
  test('bad flags print one line naming the flag and exit 2', () => {
    for (const [args, flag] of [
      [['--port', 'abc'], '--port'],
      [['--policy', 'fastest'], '--policy'],
      [['--backend', 'ftp://x'], '--backend'],
      [['--kv-threshold', '2'], '--kv-threshold'],
    ] as const) {
      const r = runCli(['serve', ...args]);
      assert.equal(r.status, 2, r.stderr);
      const lines = r.stderr.trim().split('\n');
      assert.equal(lines.length, 1, r.stderr);
      assert.ok(lines[0]!.includes(flag), r.stderr);
    }
  });
});
