/**
 * `kvroute epp`'s flags as a user types them: a bad value is one line naming the flag (exit 2,
 * no stack trace), and --help names the protocol version. The protocol's messages, endpoint
 * names and health service: epp.protocol.messages.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { runCli } from '../support/cli.ts';

describe('kvroute epp flags', () => {
  test('bad values name the flag and exit 2', () => {
    for (const [args, pattern] of [
      [['--pool-backends', '10.0.0.1:8000,'], /--pool-backends/],
      [['--pool-backends', 'ftp://10.0.0.1'], /--pool-backends/],
      [['--pool-events-port', '5557'], /--pool-events-port .* need --pool-backends/],
      [['--health-port', '-1'], /--health-port/],
      [['--policy', 'nope'], /--policy/],
    ] as const) {
      const r = runCli(['epp', ...args]);
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, pattern);
      assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    }
    const help = runCli(['epp', '--help']);
    assert.equal(help.status, 0);
    assert.match(help.stdout, /v1\.0\.0/);
  });
});
