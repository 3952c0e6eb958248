/**
 * A huge prompt must not freeze either server (issue #15, item 1): a 2 MB completion prompt used
 * to be tokenized whole, in one go, before the context window was checked (24 s of a blocked
 * event loop through the gateway, 15 s for 1 MB straight to an engine). Now a cheap length bound
 * comes first, tokenizing stops once past the window, and it yields every few milliseconds.
 * Gateway and engine run in this process, so the event loop measured here is theirs. Asserted is
 * the shape, which does not depend on the host's speed: every /health probe sent meanwhile is
 * answered 200, and no single stall of the loop covers most of the work (the old code's one stall
 * was the whole work; both figures come from the same run, so a slow host scales both). The figure, the longest stall in ms, is `npm run bench:tokenize`.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { after, test } from 'node:test';
import {
  complete,
  type EngineServerHandle,
  type GatewayHandle,
  startEngine,
  startGatewayFor,
  waitFor,
} from '../support/gateway.harness.ts';

/** The longest stall of the loop over the work's whole duration: under this share. */
const MAX_STALL_SHARE = 0.5;

let engine: EngineServerHandle;
let gateway: GatewayHandle;

after(async () => {
  await gateway?.close();
  await engine?.close();
});

/** Runs `work`, probing /health meanwhile; the event loop's worst stall and /health's worst wait. */
async function whileHealthy<T>(
  healthUrl: string,
  work: () => Promise<T>,
): Promise<{
  result: T;
  loopMaxMs: number;
  healthMaxMs: number;
  probes: number;
  workMs: number;
}> {
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  let done = false;
  let healthMaxMs = 0;
  let probes = 0;
  const probing = (async () => {
    while (!done) {
      const startedMs = performance.now();
      const res = await fetch(healthUrl);
      await res.arrayBuffer();
      assert.equal(res.status, 200);
      healthMaxMs = Math.max(healthMaxMs, performance.now() - startedMs);
      probes++;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  try {
    const startedMs = performance.now();
    const result = await work();
    const workMs = performance.now() - startedMs;
    return { result, loopMaxMs: loop.max / 1e6, healthMaxMs, probes, workMs };
  } finally {
    done = true;
    await probing;
    loop.disable();
  }
}

test('a 2 MB prompt is refused by the gateway without freezing it', {
  timeout: 600_000,
}, async () => {
  engine = await startEngine();
  gateway = await startGatewayFor([engine]);
  // The agreement check brings the gateway each backend's context window.
  await waitFor(async () => {
    const res = await fetch(`${gateway.url}/router/replicas`);
    const json = (await res.json()) as { replicas: { tokenizer: string }[] };
    return json.replicas[0]?.tokenizer === 'agrees';
  }, 'the tokenizer check');

  // Base64 (a pasted file): short pieces, many of them. 'x' repeated: one 2 MB word to merge.
  const prompts = {
    base64: randomBytes(1_500_000).toString('base64'),
    'one long word': 'x'.repeat(2_000_000),
  };
  for (const [shape, prompt] of Object.entries(prompts)) {
    const run = await whileHealthy(`${gateway.url}/health`, () =>
      complete(gateway.url, { prompt, max_tokens: 4 }),
    );
    const { status, json } = run.result;
    assert.equal(status, 400, `${shape}: ${JSON.stringify(json)}`);
    assert.equal(json?.error?.code, 400);
    assert.match(json?.error?.message ?? '', /maximum context length is 131072 tokens/);
    assert.ok(
      run.loopMaxMs < run.workMs * MAX_STALL_SHARE,
      `${shape}: the event loop stalled ${run.loopMaxMs.toFixed(0)} ms of ${run.workMs.toFixed(0)} ms (/health waited up to ${run.healthMaxMs.toFixed(0)} ms over ${run.probes} probes)`,
    );
  }
});

test('a 1 MB prompt straight to an engine is refused without freezing it', {
  timeout: 600_000,
}, async () => {
  engine ??= await startEngine();
  for (const prompt of [randomBytes(750_000).toString('base64'), 'y'.repeat(1_000_000)]) {
    const run = await whileHealthy(`${engine.url}/health`, () =>
      complete(engine.url, { prompt, max_tokens: 4 }),
    );
    assert.equal(run.result.status, 400, run.result.text.slice(0, 300));
    assert.ok(
      run.loopMaxMs < run.workMs * MAX_STALL_SHARE,
      `the event loop stalled ${run.loopMaxMs.toFixed(0)} ms of ${run.workMs.toFixed(0)} ms`,
    );
  }
  // What fits is still served, and /tokenize of a big prompt answers (sliced, no limit).
  const ok = await complete(engine.url, { prompt: 'short and fine', max_tokens: 2 });
  assert.equal(ok.status, 200);
  const res = await fetch(`${engine.url}/tokenize`, {
    method: 'POST',
    body: JSON.stringify({ prompt: `word${' word'.repeat(199_999)}` }),
  });
  assert.equal(((await res.json()) as { count: number }).count, 200_000);
});
