/**
 * `kvroute plan --search-fleet` (the other parts: test/model/plan.fleet.*.test.ts; the shared
 * search: test/support/planFleet.ts): bad input is one line naming the flag and the
 * accepted values (exit 2).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { runCli } from '../support/cli.ts';

describe('bad input: one line naming the flag and the accepted values (exit 2)', () => {
  const plan = (...args: string[]) =>
    runCli(['plan', '--search-fleet', '--gpus', 'h200', '--tp', '4', ...args]);
  const cases: [string[], RegExp][] = [
    [['--gpus', 'h300'], /^kvroute plan: --gpus: unknown GPU 'h300'; accepted: h100-sxm, h200, /],
    [['--tp', '3'], /^kvroute plan: --tp: '3' is not a power of two; accepted: 1, 2, 4, 8/],
    [
      ['--tp', '128'],
      /^kvroute plan: --tp 128 does not divide Llama 3\.3 70B Instruct's 64 attention heads/,
    ],
    [['--price', 'h200=abc'], /^kvroute plan: --price h200=abc: \$\/h must be a positive number/],
    [['--price', 'tpu=2'], /^kvroute plan: --price: unknown GPU 'tpu' in 'tpu=2'; accepted: /],
    [['--shard', '2/2'], /^kvroute plan: --shard must be i\/n with 0 <= i < n/],
    [
      ['--transfer-gbps', '10'],
      /^kvroute plan: --transfer-gbps and --transfer-latency-ms go with --pd/,
    ],
    [
      ['--pd', '--transfer-gbps', '0'],
      /^kvroute plan: --transfer-gbps must be greater than 0, got 0/,
    ],
    [
      ['--pd', '--transfer-latency-ms', 'x'],
      /^kvroute plan: --transfer-latency-ms must be a number, got 'x'/,
    ],
  ];
  for (const [args, message] of cases) {
    test(args.join(' '), () => {
      // The later --gpus / --tp stand in for the earlier ones.
      const r = plan(...args);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, message);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    });
  }

  test('--merge-shards with --pd: the parts say whether the search had P/D', () => {
    const r = runCli(['plan', '--merge-shards', 'a.json', '--pd']);
    assert.equal(r.status, 2);
    assert.match(
      r.stderr,
      /^kvroute plan: --merge-shards reads the parts of a search; drop --search-fleet, --shard and --pd\n$/,
    );
  });

  test('--merge-shards of a file that is not a part', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvroute-merge-'));
    try {
      const r = runCli(['plan', '--merge-shards', join(dir, 'none.json')]);
      assert.equal(r.status, 2);
      assert.match(r.stderr, /^kvroute plan: --merge-shards: cannot read /);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
