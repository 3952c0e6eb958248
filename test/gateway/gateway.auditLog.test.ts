/**
 * The audit's log lines name the index in use (`index: "events" | "approx"`), and where the
 * index can only be approximate a repair clears the replica's entries: no line speaks of a
 * replay, and no replay is asked for.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { pino } from 'pino';
import { type AuditActions, PoolAudit } from '../../src/serving/audit/poolAudit.ts';

interface Line {
  msg: string;
  index?: string;
  action?: string;
  cause?: string;
}

function setup(index: 'events' | 'approx') {
  const lines: Line[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l) as Line);
      done();
    },
  });
  const calls: string[] = [];
  const actions: AuditActions = {
    async replay(replica) {
      calls.push(`replay ${replica}`);
      return 'unchanged';
    },
    distrust: (replica) => calls.push(`distrust ${replica}`),
    trust: (replica) => calls.push(`trust ${replica}`),
    clear: (replica) => calls.push(`clear ${replica}`),
    async diagnose(replica, approxOnly) {
      calls.push(`diagnose ${replica} ${approxOnly}`);
      return approxOnly ? "the router's own record" : 'event stream lossy';
    },
  };
  const audit = new PoolAudit({
    model: 'm',
    blockSize: 16,
    logger: pino({ base: null }, sink),
    actions,
    indexSource: () => index,
    approxOnly: () => index === 'approx',
    windowRequests: 8,
  });
  return { audit, lines, calls };
}

const settle = () => new Promise((r) => setImmediate(r));

for (const index of ['events', 'approx'] as const) {
  test(`${index} index: every audit line names it; over- and under-predicting repaired`, async () => {
    const { audit, lines, calls } = setup(index);
    // Over-predicts: the router said 256 cached, the engine 0, until flagged.
    for (let i = 0; i < 8; i++) {
      audit.record('r', { predictedTokens: 256, reportedTokens: 0, promptTokens: 256 });
    }
    // Under-predicts on another replica.
    for (let i = 0; i < 8; i++) {
      audit.record('u', { predictedTokens: 0, reportedTokens: 256, promptTokens: 256 });
    }
    await settle();
    await settle();
    const audited = lines.filter((l) => l.msg.startsWith('cache audit'));
    assert.ok(audited.length >= 3, JSON.stringify(lines));
    for (const l of audited) assert.equal(l.index, index, JSON.stringify(l));
    assert.ok(
      audited.some((l) => l.cause !== undefined),
      'the diagnosis is logged',
    );
    if (index === 'approx') {
      for (const l of audited) {
        assert.doesNotMatch(`${l.msg} ${l.cause ?? ''}`, /replay/i, JSON.stringify(l));
      }
      assert.ok(calls.includes('clear r'), calls.join(', '));
      assert.ok(!calls.some((c) => c.startsWith('replay')), calls.join(', '));
      assert.ok(calls.includes('diagnose u true'));
    } else {
      assert.ok(calls.includes('replay r'), calls.join(', '));
      assert.ok(audited.some((l) => /replay/.test(l.msg)));
      assert.ok(calls.includes('diagnose u false'));
    }
  });
}
