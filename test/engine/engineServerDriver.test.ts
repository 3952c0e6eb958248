import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type SteppableEngine, WallClockDriver } from '../../src/engine/server/driver.ts';
import { startTestEngine } from '../support/engineServerHelpers.ts';
import type { EngineCounters, EngineRequest, StepResult } from '../../src/engine/types.ts';

/** A core whose every step takes `stepMs` and emits one token per live request. */
class FakeCore implements SteppableEngine {
  readonly live = new Map<string, { left: number; next: number }>();
  constructor(readonly stepMs: number) {}
  add(req: EngineRequest): void {
    this.live.set(req.id, { left: req.maxNewTokens, next: 0 });
  }
  abort(id: string): void {
    this.live.delete(id);
  }
  hasWork(): boolean {
    return this.live.size > 0;
  }
  step(): StepResult {
    const result: StepResult = {
      plan: null,
      durationMs: this.stepMs,
      prefillTokens: 0,
      decodeTokens: this.live.size,
      emitted: [],
      finished: [],
      preempted: [],
      events: [],
    };
    for (const [id, r] of this.live) {
      result.emitted.push({ id, index: r.next++, handle: -1 });
      if (--r.left === 0) {
        this.live.delete(id);
        result.finished.push({
          id,
          promptTokens: 1,
          cachedTokens: 0,
          outputTokens: r.next,
          reason: 'length',
        });
      }
    }
    return result;
  }
  counters(): EngineCounters {
    return {
      running: this.live.size,
      waiting: 0,
      kvUsage: 0,
      kvBlocksTotal: 1,
      kvBlocksFree: 1,
      prefixCacheQueriesTokens: 0,
      prefixCacheHitsTokens: 0,
      preemptions: 0,
      promptTokens: 0,
      generationTokens: 0,
    };
  }
}

test('step due times never drift, even across a stall (injected clock)', async () => {
  // The clock jumps 30 ms forward at step 50, as if the process had been descheduled.
  let offsetMs = 0;
  // The driver's own reading of the clock just before it calls step(): what it computes each
  // step's lateness from (the driver reads the clock nowhere else while it steps a plain core).
  let lastReadMs = 0;
  const clock = () => {
    lastReadMs = performance.now() + offsetMs;
    return lastReadMs;
  };
  const core = new FakeCore(2);
  const startedAt: number[] = [];
  const step = core.step.bind(core);
  core.step = () => {
    startedAt.push(lastReadMs);
    if (startedAt.length === 50) offsetMs += 30;
    return step();
  };
  const lags: number[] = [];
  const driver = new WallClockDriver(core, {
    speedup: 1,
    nowMs: clock,
    onStepEnd: (_r, lagMs) => lags.push(lagMs),
  });
  await new Promise<void>((resolve, reject) =>
    driver.submit(
      { id: 'a', promptTokens: [1], maxNewTokens: 150 },
      { onToken: () => {}, onFinish: () => resolve(), onFail: reject },
    ),
  );
  assert.equal(startedAt.length, 150);
  assert.equal(lags.length, 150);
  // Each step's due start is the first one's plus the modeled durations before it: no error
  // accumulates, however late the host runs (only rounding of the sums). A loop that re-armed
  // from "now" would be off by the 30 ms stall plus every timer's lateness, growing each step.
  const due = startedAt.map((t, k) => t - lags[k]!);
  due.forEach((d, k) => {
    assert.ok(
      Math.abs(d - due[0]! - 2 * k) < 1e-6,
      `step ${k} due at +${(d - due[0]!).toFixed(6)} ms`,
    );
  });
  assert.ok(lags[50]! >= 28, `the stall shows as lag: ${lags[50]}`);
  assert.ok(Math.min(...lags.slice(51)) < lags[50]!, 'and the loop runs early steps to catch up');
});

test('sub-millisecond steps at a high speedup still keep the schedule', async () => {
  // 33 ms decode steps at speedup 100: 0.33 ms each, below timer resolution. The clock is the
  // test's: it stands still unless moved, so what the driver delivers depends on the schedule
  // alone. Step k is due at k x 0.33 ms and its token goes out when step k + 1 is due.
  let nowMs = 0;
  const core = new FakeCore(33);
  const driver = new WallClockDriver(core, { speedup: 100, nowMs: () => nowMs });
  let delivered = 0;
  let finished = false;
  driver.submit(
    { id: 'a', promptTokens: [1], maxNewTokens: 300 },
    {
      onToken: () => delivered++,
      onFinish: () => {
        finished = true;
      },
      onFail: (err) => {
        throw err;
      },
    },
  );
  const turns = (n: number) =>
    (async () => {
      for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
    })();
  const until = async (check: () => boolean, what: string) => {
    for (let i = 0; i < 5_000 && !check(); i++) await turns(1);
    assert.ok(check(), what);
  };
  await turns(20);
  assert.equal(delivered, 0, 'the clock has not moved: step 0 has not ended');
  assert.equal(driver.steps, 1);
  // At 50 ms: steps 0..151 have started (151 x 0.33 = 49.83 <= 50 < 50.16), 0..150 ended.
  nowMs = 50;
  await until(() => delivered >= 151, 'the tokens due by 50 ms');
  await turns(50);
  assert.equal(delivered, 151, 'nothing ahead of its time');
  assert.equal(driver.steps, 152);
  // At 100 ms every one of the 300 steps (the last ends at 99 ms) has ended.
  nowMs = 100;
  await until(() => finished, 'all 300 steps');
  assert.equal(delivered, 300);
  assert.equal(driver.steps, 300);
  driver.close();
});

test('an idle driver does not step; a new request wakes it', async () => {
  const core = new FakeCore(1);
  const driver = new WallClockDriver(core, { speedup: 1 });
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(driver.steps, 0);
  const done = new Promise<void>((resolve) =>
    driver.submit(
      { id: 'x', promptTokens: [1], maxNewTokens: 3 },
      { onToken: () => {}, onFinish: () => resolve(), onFail: () => {} },
    ),
  );
  await done;
  assert.equal(driver.steps, 3);
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(driver.steps, 3, 'idle again');
  driver.close();
});

test('a core that throws fails its requests, turns /health to 503 and refuses new work', async () => {
  const core = new FakeCore(1);
  core.step = () => {
    throw new Error('boom');
  };
  const server = await startTestEngine({ makeCore: () => core });
  try {
    const body = JSON.stringify({ prompt: 'hi', max_tokens: 2 });
    const failed = await fetch(`${server.url}/v1/completions`, { method: 'POST', body });
    assert.equal(failed.status, 503);
    assert.match(((await failed.json()) as { error: { message: string } }).error.message, /boom/);
    assert.equal((await fetch(`${server.url}/health`)).status, 503);
    const refused = await fetch(`${server.url}/v1/completions`, { method: 'POST', body });
    assert.equal(refused.status, 503);
    await refused.text();
  } finally {
    await server.close();
  }
});

test('a sink that throws loses its own request only', async () => {
  const core = new FakeCore(1);
  const driver = new WallClockDriver(core, { speedup: 1 });
  let failed: Error | null = null;
  driver.submit(
    { id: 'bad', promptTokens: [1], maxNewTokens: 5 },
    {
      onToken: () => {
        throw new Error('socket gone');
      },
      onFinish: () => assert.fail('never finishes'),
      onFail: (err) => {
        failed = err;
      },
    },
  );
  let tokens = 0;
  await new Promise<void>((resolve, reject) =>
    driver.submit(
      { id: 'good', promptTokens: [1], maxNewTokens: 5 },
      { onToken: () => tokens++, onFinish: () => resolve(), onFail: reject },
    ),
  );
  assert.equal(tokens, 5);
  assert.match(String(failed), /socket gone/);
  assert.ok(!core.live.has('bad'), 'its request was aborted in the core');
  assert.equal(driver.dead, null);
  driver.close();
});
