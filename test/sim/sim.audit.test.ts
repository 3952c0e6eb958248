/**
 * The audit in the simulator: the same arrivals without a fault, with one replica's cache
 * emptied silently every 10 s (the audit watching), and with the audit's repairs. Counts and
 * verdicts, never times: no false alarm anywhere without the fault, the fault detected on its
 * replica only, and the repairs taken.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseSimFlags } from '../../src/cli/sim.ts';
import { simulateAudited } from '../../src/sim/audit.ts';

function parsed(extra: string[]) {
  const p = parseSimFlags([
    ...['--workload', 'groups', '--replicas', '4', '--duration', '40', '--warmup', '5'],
    ...extra,
  ]);
  assert.notEqual(p, 'help');
  return p as Exclude<typeof p, 'help'>;
}

test('flags: the faults and their replicas, checked', () => {
  const p = parsed(['--fault-silent-reset-s', '10', '--fault-replicas', '0,2']);
  assert.deepEqual(p.auditFaults, { replicas: [0, 2], silentResetS: 10 });
  assert.equal(parsed([]).auditFaults, null);
  assert.throws(
    () => parsed(['--fault-drop-events', 'removed', '--fault-replicas', '4']),
    /--fault-replicas/,
  );
  assert.throws(() => parsed(['--fault-replicas', '1']), /needs --fault-drop-events/);
  assert.throws(() => parsed(['--fault-drop-events', 'x']), /--fault-drop-events.*removed/);
});

test('a silently reset replica: detected there only, and repaired; no alarm without the fault', () => {
  const p = parsed(['--fault-silent-reset-s', '10']);
  const base = { ...p.base, router: { ...p.base.router, policy: p.policies[0]! } };
  const faults = p.auditFaults!;
  const clean = simulateAudited(base, faults, 'no-fault');
  assert.equal(clean.audit.verdictChanges, 0);
  assert.equal(clean.audit.falseAlarms, 0);
  assert.equal(clean.audit.detection.onsets, 0);
  assert.ok(clean.audit.judged > 100);

  const watched = simulateAudited(base, faults, 'audit-off');
  assert.equal(watched.audit.falseAlarms, 0);
  assert.ok(watched.audit.detection.onsets >= 1);
  assert.ok(watched.audit.detection.detected >= 1);
  assert.deepEqual(watched.audit.repairs, { replays: 0, fallbacks: 0, retries: 0 });
  // The same arrivals: every request is judged in each run.
  assert.equal(watched.audit.judged, clean.audit.judged);

  const repaired = simulateAudited(base, faults, 'audit-on');
  assert.equal(repaired.audit.falseAlarms, 0);
  assert.ok(repaired.audit.repairs.fallbacks >= 1);
  // A silent reset leaves the replay as wrong as the live stream: no replay mends it.
  assert.equal(repaired.audit.repairs.replays, 0);
  assert.ok(repaired.run.hitRate! >= watched.run.hitRate!);
  assert.ok(clean.run.hitRate! > watched.run.hitRate!);
});

/** The first policy's config and the faults of these flags, over 4 replicas from t = 0. */
function setup(extra: string[]) {
  const p = parseSimFlags(['--replicas', '4', '--warmup', '0', ...extra]);
  assert.notEqual(p, 'help');
  const q = p as Exclude<typeof p, 'help'>;
  return { base: { ...q.base, router: { ...q.base.router, policy: q.policies[0]! } }, q };
}

test('a consistent liar (fake stores, no removals, cached_tokens = prompt) is flagged within 60 of its requests', () => {
  const { base, q } = setup([
    '--workload',
    'seed',
    '--rate',
    '8',
    '--duration',
    '30',
    '--fault-lie',
  ]);
  assert.deepEqual(q.auditFaults, { replicas: [0], lie: true });
  const watched = simulateAudited(base, q.auditFaults!, 'audit-off');
  assert.equal(watched.audit.falseAlarms, 0);
  assert.ok(watched.audit.detection.detected >= 1, 'the liar was never flagged');
  assert.ok(watched.audit.detection.maxRequests! <= 60, `${watched.audit.detection.maxRequests}`);
  const repaired = simulateAudited(base, q.auditFaults!, 'audit-on');
  assert.equal(repaired.audit.falseAlarms, 0);
  assert.ok(repaired.audit.repairs.fallbacks >= 1);
});

test('a replica dropping BlockRemoved is flagged within 60 of its requests (its index outgrows its pool)', () => {
  const { base, q } = setup([
    ...['--workload', 'groups', '--duration', '30', '--kv-blocks', '2048'],
    ...['--fault-drop-events', 'removed'],
  ]);
  const watched = simulateAudited(base, q.auditFaults!, 'audit-off');
  assert.equal(watched.audit.falseAlarms, 0);
  assert.equal(watched.audit.detection.detected, 1);
  assert.ok(watched.audit.detection.maxRequests! <= 60, `${watched.audit.detection.maxRequests}`);
});

test('honest engines with a 64-block pool are never repaired (10 seeds)', () => {
  // 512-token prompts at 40 req/s: a pool of 64 blocks holds two of them, so it churns between
  // route and admission; counted alone, those over-predictions repaired every replica.
  for (let seed = 1; seed <= 10; seed++) {
    const { base } = setup([
      ...['--workload', 'shared-prefix', '--system-prompt-len', '256', '--question-len', '256'],
      ...['--num-groups', '16', '--rate', '40', '--duration', '20', '--kv-blocks', '64'],
      ...['--seed', String(seed)],
    ]);
    // Repairs on, no fault anywhere.
    const run = simulateAudited(base, { replicas: [] }, 'audit-on');
    assert.ok(run.audit.judged > 500, `seed ${seed}: ${run.audit.judged} judged`);
    assert.deepEqual(run.audit.repairs, { replays: 0, fallbacks: 0, retries: 0 }, `seed ${seed}`);
  }
});
