/**
 * `kvroute plan --search-fleet` (the other parts: test/model/plan.fleet.*.test.ts; the shared
 * search: test/support/planFleet.ts) as a user runs it: `--pd --shard i/n` parts, then
 * `--merge-shards`, print what the unsharded search prints, as text and as --json.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { runCli } from '../support/cli.ts';

describe('kvroute plan --search-fleet --pd --shard i/n, then --merge-shards', () => {
  test('the parts merge to what the unsharded search prints, text and --json', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvroute-pd-shards-'));
    try {
      const args = [
        ...['plan', '--search-fleet', '--pd', '--gpus', 'h100-sxm', '--tp', '8'],
        ...['--duration', '6', '--warmup', '1', '--rate', '2', '--max-replicas', '4'],
        ...['--threads', '1', '--quiet'],
      ];
      const parts = [0, 1].map((i) => join(dir, `part-${i}.json`));
      parts.forEach((out, i) => {
        const r = runCli([...args, '--shard', `${i}/2`, '--out', out]);
        assert.equal(r.status, 0, r.stderr);
      });
      for (const json of [[], ['--json']]) {
        const merged = runCli(['plan', '--merge-shards', parts.join(','), ...json]);
        assert.equal(merged.status, 0, merged.stderr);
        const whole = runCli([...args, ...json]);
        assert.equal(whole.status, 0, whole.stderr);
        assert.equal(merged.stdout, whole.stdout);
        if (json.length === 0) {
          assert.match(whole.stdout, /^h100-sxm TP8 +aggregated /m);
          assert.match(whole.stdout, /^h100-sxm TP8 +P:D (\d+:\d+|-) /m);
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
