/**
 * Drives a Scheduler over a list of requests with staggered arrivals and checks the scheduler's
 * invariants after every step and at the end. Used by the randomized scheduler tests.
 */
import assert from 'node:assert/strict';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import { BlockPool } from '../../src/kv/blockPool.ts';
import type { KvEvent } from '../../src/kv/events.ts';
import { Scheduler } from '../../src/scheduler/scheduler.ts';
import type { SchedulerConfig, StepPlan } from '../../src/scheduler/types.ts';
import type { Rng } from '../../src/util/rng.ts';

export interface SimRequest {
  id: string;
  promptTokens: number;
  maxNewTokens: number;
  /** Step at which the request is added. */
  arrivalStep: number;
  priority: number;
  tokenIds: number[] | null;
  cacheSalt?: string;
  loraName?: string;
  /** Step at which the request is aborted, if it is still in the scheduler then. */
  abortAtStep?: number;
}

export interface SimSetup {
  sched: SchedulerConfig;
  blockSize: number;
  numBlocks: number;
  caching: boolean;
  requests: SimRequest[];
}

export interface SimResult {
  steps: number;
  preemptions: number;
  prefixHitsTokens: number;
  /** Rolling hash of every plan, for determinism checks. */
  traceHash: number;
  /** Admissions that passed a request held back for its adapter (max_loras). */
  loraPassed: number;
  /** Requests aborted, by where they were: waiting, part way through prefill, decoding. */
  aborts: Record<Phase, number>;
}

type Phase = 'waiting' | 'prefill' | 'decode';

interface Track {
  req: SimRequest;
  phase: Phase;
  emitted: number;
  decodes: number;
  prefillCompletions: number;
  /** Prefill tokens expected and received since the last admission. */
  expectedPrefill: number;
  prefillSinceAdmit: number;
  preempted: boolean;
}

export function applyEvents(cached: Set<number>, events: readonly KvEvent[]): void {
  for (const e of events) {
    if (e.type === 'BlockStored') {
      assert.equal(e.tokenIds.length, e.blockKeys.length * e.blockSize);
      for (const k of e.blockKeys) {
        assert.ok(!cached.has(k), `BlockStored for a key already cached: ${k}`);
        cached.add(k);
      }
    } else if (e.type === 'BlockRemoved') {
      for (const k of e.blockKeys) assert.ok(cached.delete(k), `BlockRemoved for unknown ${k}`);
    } else cached.clear();
  }
}

function hashString(h: number, text: string): number {
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

export function assertPoolConsistent(pool: BlockPool): void {
  let used = 0;
  for (let b = 0; b < pool.numBlocks; b++) {
    const refs = pool.refCount(b);
    assert.ok(refs >= 0, `block ${b} has ref count ${refs}`);
    if (refs > 0) used++;
  }
  assert.equal(used, pool.usedBlocks);
  assert.equal(pool.freeOrder().length, pool.freeBlocks);
  assert.equal(pool.usedBlocks + pool.freeBlocks, pool.numBlocks);
}

export function runSim(setup: SimSetup): SimResult {
  const pool = new BlockPool({
    numBlocks: setup.numBlocks,
    blockSize: setup.blockSize,
    enableCaching: setup.caching,
  });
  const sched = new Scheduler(setup.sched, pool);
  const budget = setup.sched.budgetTokens;
  const paged = setup.sched.kvPolicy === 'paged';
  const tracks = new Map<string, Track>();
  const arrivals = [...setup.requests].sort((a, b) => a.arrivalStep - b.arrivalStep);
  const firstAdmits: string[] = [];
  const replayed = new Set<number>();
  let next = 0;
  let traceHash = 0x811c9dc5;
  let steps = 0;
  let preemptions = 0;
  let loraPassed = 0;
  const aborts: Record<Phase, number> = { waiting: 0, prefill: 0, decode: 0 };
  const aborted = new Set<string>();

  /** Aborts `t` and checks what must hold right after: its KV back, its counts gone. */
  const abortNow = (t: Track): void => {
    const id = t.req.id;
    const usedBefore = pool.usedBlocks;
    const record = sched.abort(id);
    assert.ok(record, `${id} is in the scheduler`);
    assert.equal(record.reason, 'abort');
    assert.equal(record.id, id);
    assert.equal(record.outputTokens, t.emitted, `${id}: the tokens it had emitted`);
    assert.equal(sched.abort(id), null, 'a second abort finds nothing');
    aborts[t.phase]++;
    tracks.delete(id);
    aborted.add(id);
    assert.ok(!sched.runningIds().includes(id) && !sched.waitingIds().includes(id));
    // The queues and the per-adapter counts are those of the requests still tracked.
    const live = [...tracks.values()].filter((x) => arrivals.indexOf(x.req) < next);
    const runningTracks = live.filter((x) => x.phase !== 'waiting');
    const c = sched.counters();
    assert.equal(c.running, runningTracks.length, 'running after an abort');
    assert.equal(c.waiting, live.length - runningTracks.length, 'waiting after an abort');
    const count = (xs: Track[]) => {
      const m = new Map<string, number>();
      for (const x of xs) {
        if (x.req.loraName !== undefined) m.set(x.req.loraName, (m.get(x.req.loraName) ?? 0) + 1);
      }
      return [...m].sort();
    };
    const lora = sched.loraCounts();
    assert.deepEqual([...lora.running].sort(), count(runningTracks), 'running adapters');
    assert.deepEqual(
      [...lora.waiting].sort(),
      count(live.filter((x) => x.phase === 'waiting')),
      'waiting adapters',
    );
    // Partial prefills: those left are the tracked ones (the cap is checked on the next plan).
    if (setup.sched.maxPartialPrefills !== undefined) {
      assert.ok(live.filter((x) => x.phase === 'prefill').length <= setup.sched.maxPartialPrefills);
    }
    // KV: nothing more held than before; all of it back when nothing else runs.
    assert.ok(pool.usedBlocks <= usedBefore, `${pool.usedBlocks} > ${usedBefore} blocks`);
    if (t.phase === 'waiting') assert.equal(pool.usedBlocks, usedBefore, 'a waiting one held none');
    if (runningTracks.length === 0) assert.equal(pool.usedBlocks, 0, 'every block back');
    assertPoolConsistent(pool);
    if (setup.caching) {
      applyEvents(replayed, pool.takeEvents());
      assert.equal(replayed.size, pool.cachedBlocks);
    }
  };

  for (let step = 0; ; step++) {
    if (!sched.hasWork()) {
      if (next >= arrivals.length) break;
      step = Math.max(step, arrivals[next]!.arrivalStep);
    }
    while (next < arrivals.length && arrivals[next]!.arrivalStep <= step) {
      const req = arrivals[next++]!;
      tracks.set(req.id, {
        req,
        phase: 'waiting',
        emitted: 0,
        decodes: 0,
        prefillCompletions: 0,
        expectedPrefill: 0,
        prefillSinceAdmit: 0,
        preempted: false,
      });
      sched.add({
        id: req.id,
        promptTokens: req.promptTokens,
        maxNewTokens: req.maxNewTokens,
        priority: req.priority,
        arrivalMs: req.arrivalStep * 10,
        ...(req.loraName !== undefined && { loraName: req.loraName }),
        ...(req.tokenIds && {
          tokenIds: req.tokenIds,
          blockKeys: computeBlockKeys(req.tokenIds, setup.blockSize, {
            cacheSalt: req.cacheSalt,
            loraName: req.loraName,
          }),
          cacheSalt: req.cacheSalt,
        }),
      });
    }
    for (const t of [...tracks.values()]) {
      if (t.req.abortAtStep !== undefined && t.req.abortAtStep <= step) abortNow(t);
    }
    if (!sched.hasWork()) continue;
    const readyDecodes = sched.runningIds().filter((id) => tracks.get(id)!.phase === 'decode');
    const queued = setup.sched.maxLoras !== undefined ? sched.waitingIds() : [];
    const plan = sched.schedule();
    checkPlan(plan, budget, readyDecodes, setup.sched);
    if (setup.sched.maxLoras !== undefined) {
      const running = new Set<string>();
      for (const id of sched.runningIds()) {
        const lora = tracks.get(id)!.req.loraName;
        if (lora !== undefined) running.add(lora);
      }
      assert.ok(running.size <= setup.sched.maxLoras, `${running.size} adapters running`);
      assert.deepEqual([...sched.loraCounts().running.keys()].sort(), [...running].sort());
      // Only a request whose adapter is not running, with every slot taken, is passed over.
      const admitted = new Set(plan.admitted);
      let last = queued.length - 1;
      while (last >= 0 && !admitted.has(queued[last]!)) last--;
      for (const id of queued.slice(0, Math.max(last, 0))) {
        if (admitted.has(id)) continue;
        const lora = tracks.get(id)!.req.loraName;
        assert.ok(lora !== undefined && !running.has(lora), `${id} was passed over`);
        assert.equal(running.size, setup.sched.maxLoras);
        loraPassed++;
      }
    }
    traceHash = hashString(traceHash, JSON.stringify(plan));
    steps++;
    if (!paged) assert.equal(plan.preempted.length, 0, 'reserve mode never preempts');
    if (plan.preempted.length > 0)
      assert.equal(plan.admitted.length, 0, 'admitted after preempting');
    for (const id of plan.preempted) {
      const t = tracks.get(id)!;
      t.phase = 'waiting';
      t.preempted = true;
      preemptions++;
    }
    for (const id of plan.admitted) {
      const t = tracks.get(id)!;
      if (!t.preempted) firstAdmits.push(id);
      t.phase = 'prefill';
      const cached = sched.cachedTokensOf(id)!;
      assert.equal(cached % setup.blockSize, 0);
      t.expectedPrefill = t.req.promptTokens + t.emitted - cached;
      assert.ok(t.expectedPrefill >= 1, 'a hit leaves at least one token to compute');
      t.prefillSinceAdmit = 0;
    }
    if (setup.sched.maxPartialPrefills !== undefined) {
      let prefilling = 0;
      for (const t of tracks.values()) if (t.phase === 'prefill') prefilling++;
      assert.ok(prefilling <= setup.sched.maxPartialPrefills, 'partial prefill cap');
    }
    for (const e of plan.entries) {
      const t = tracks.get(e.id)!;
      if (e.kind === 'decode') {
        assert.equal(t.phase, 'decode');
        t.decodes++;
      } else {
        assert.equal(t.phase, 'prefill');
        t.prefillSinceAdmit += e.tokens;
      }
    }
    const outcome = sched.complete(plan);
    for (const { id, index } of outcome.emitted) {
      const t = tracks.get(id)!;
      assert.equal(index, t.emitted, `${id} emitted token ${index} out of order`);
      t.emitted++;
      if (t.phase === 'prefill') {
        assert.equal(t.prefillSinceAdmit, t.expectedPrefill, `${id} prefill tokens`);
        t.prefillCompletions++;
        t.phase = 'decode';
      }
    }
    for (const f of outcome.finished) {
      const t = tracks.get(f.id)!;
      assert.equal(f.outputTokens, t.req.maxNewTokens);
      assert.equal(t.emitted, t.req.maxNewTokens);
      assert.equal(t.decodes + t.prefillCompletions, t.req.maxNewTokens);
      if (!t.preempted) {
        assert.equal(t.prefillCompletions, 1);
        assert.equal(t.decodes, t.req.maxNewTokens - 1);
      }
      tracks.delete(f.id);
    }
    const c = sched.counters();
    assert.ok(c.running <= setup.sched.maxSeqs, 'slot limit');
    assert.ok(pool.freeBlocks >= 0);
    assert.equal(pool.usedBlocks + pool.freeBlocks, pool.numBlocks);
    if (setup.caching) {
      applyEvents(replayed, pool.takeEvents());
      assert.equal(replayed.size, pool.cachedBlocks);
    }
    if (steps % 64 === 0) assertPoolConsistent(pool);
    assert.ok(steps < 500_000, 'the simulation does not finish');
  }

  assert.equal(tracks.size, 0, 'every request finished');
  assert.equal(sched.counters().waiting, 0);
  assertPoolConsistent(pool);
  assert.equal(pool.freeBlocks, pool.numBlocks, 'every block is free');
  for (let b = 0; b < pool.numBlocks; b++) assert.equal(pool.refCount(b), 0);
  if (setup.caching) assert.deepEqual(new Set(pool.cachedKeys()), replayed);
  // First admissions follow arrival order within each priority level (and adapter: a request
  // held back for its adapter lets others of the same level pass).
  const groupOf = (r: SimRequest) => `${r.priority}/${r.loraName ?? ''}`;
  const groups = new Set(setup.requests.map(groupOf));
  for (const group of groups) {
    // An aborted request never admitted has no place in that order.
    const arrived = arrivals
      .filter((r) => groupOf(r) === group)
      .map((r) => r.id)
      .filter((id) => !aborted.has(id) || firstAdmits.includes(id));
    const admitted = firstAdmits.filter((id) => arrived.includes(id));
    assert.deepEqual(admitted, arrived, `admission order, priority/adapter ${group}`);
  }
  const c = sched.counters();
  return {
    steps,
    preemptions,
    prefixHitsTokens: c.prefixHitsTokens,
    traceHash,
    loraPassed,
    aborts,
  };
}

function checkPlan(
  plan: StepPlan,
  budget: number,
  readyDecodes: string[],
  config: SchedulerConfig,
): void {
  let total = 0;
  let decodes = 0;
  const seen = new Set<string>();
  for (const e of plan.entries) {
    assert.ok(e.tokens >= 1, 'no empty entries');
    assert.ok(!seen.has(e.id), 'one entry per request');
    seen.add(e.id);
    total += e.tokens;
    if (e.kind === 'decode') {
      assert.equal(e.tokens, 1);
      decodes++;
    }
    if (e.kind === 'prefill' && config.longPrefillThreshold) {
      assert.ok(e.tokens <= config.longPrefillThreshold, 'long prefill threshold');
    }
  }
  assert.ok(total <= budget, `scheduled ${total} tokens, budget ${budget}`);
  assert.equal(plan.prefillTokens + plan.decodeTokens, total);
  assert.equal(plan.decodeTokens, decodes);
  // Decodes come first in the plan, and are the oldest ready ones up to the budget.
  const planned = plan.entries.filter((e) => e.kind === 'decode').map((e) => e.id);
  assert.deepEqual(
    plan.entries.slice(0, decodes).map((e) => e.id),
    planned,
  );
  if (!config.rotateDecodes) {
    const preempted = new Set(plan.preempted);
    const expected = readyDecodes.filter((id) => !preempted.has(id)).slice(0, budget);
    assert.deepEqual(planned, expected, 'decodes are the oldest ready ones up to the budget');
  }
}

/** Random requests: prompts of 1..maxPrompt tokens, some sharing prefixes, staggered arrivals. */
export function makeRequests(
  rng: Rng,
  count: number,
  options: {
    maxPrompt: number;
    maxNew: number;
    priorities: number;
    withTokens: boolean;
    /** Adapters the requests are spread over (absent: all for the base model). */
    loras?: number;
  },
): SimRequest[] {
  const bases = [0, 1, 2].map(() => Array.from({ length: options.maxPrompt }, () => rng.int(50)));
  const out: SimRequest[] = [];
  let step = 0;
  for (let i = 0; i < count; i++) {
    step += rng.int(4) === 0 ? 0 : rng.int(12);
    const promptTokens = rng.range(1, options.maxPrompt);
    let tokenIds: number[] | null = null;
    if (options.withTokens) {
      const base = rng.pick(bases);
      const shared = rng.int(2) === 0 ? rng.int(promptTokens + 1) : 0;
      tokenIds = Array.from({ length: promptTokens }, (_, j) =>
        j < shared ? base[j]! : rng.int(50),
      );
    }
    out.push({
      id: `r${i}`,
      promptTokens,
      maxNewTokens: rng.range(1, options.maxNew),
      arrivalStep: step,
      priority: rng.int(options.priorities),
      tokenIds,
      ...(options.withTokens && rng.int(5) === 0 && { cacheSalt: `s${rng.int(2)}` }),
    });
    if (options.loras) {
      const lora = rng.int(options.loras + 1);
      if (lora > 0) out[i]!.loraName = `lora${lora}`;
    }
  }
  return out;
}
