/**
 * Helpers for the flow-control end-to-end tests of the gateway and the picker
 * (test/gateway/gateway.flow*.test.ts, test/epp/epp.flowOwner.test.ts): an `openai` client (of a
 * tenant, by the x-kvroute-tenant header), a metric's sum from /metrics, a completion's status
 * and serving replica, a long stream that holds its replica's one sequence until released, and
 * the owner-release scenario both front ends play.
 */
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { type ReplicaJson, tokens, waitFor, within } from './gateway.harness.ts';

/** Where /metrics and /router/replicas are served: the gateway, or the picker's metrics port. */
export interface RouterAt {
  url: string;
}

/** A client of the OpenAI API at `gw.url`/v1 (the gateway, or the data plane before a picker). */
export function flowClient(gw: RouterAt, timeoutMs: number, tenant?: string): OpenAI {
  return new OpenAI({
    baseURL: `${gw.url}/v1`,
    apiKey: 'unused',
    maxRetries: 0,
    timeout: timeoutMs,
    ...(tenant !== undefined && { defaultHeaders: { 'x-kvroute-tenant': tenant } }),
  });
}

/** Sum of a metric's samples, from /metrics. */
export async function metricSum(gw: RouterAt, name: string): Promise<number> {
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) {
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return sum;
}

/** A completion of `prompt`; its status and the replica that served it. */
export async function served(
  client: OpenAI,
  model: string,
  prompt: number[],
): Promise<{ status: number; replica: string | null }> {
  try {
    const { response } = await client.completions
      .create({ model, prompt, max_tokens: 2 })
      .withResponse();
    return { status: response.status, replica: response.headers.get('x-kvroute-replica') };
  } catch (err) {
    if (err instanceof OpenAI.APIError && err.status !== undefined) {
      return { status: err.status, replica: null };
    }
    throw err;
  }
}

/** A long stream of `prompt` that holds its replica's one sequence until released. */
export async function hold(
  client: OpenAI,
  model: string,
  prompt: number[],
): Promise<{ replica: string | null; release(): Promise<void> }> {
  const controller = new AbortController();
  const { data, response } = await client.completions
    .create({ model, prompt, max_tokens: 4000, stream: true, ignore_eos: true } as never, {
      signal: controller.signal,
    })
    .withResponse();
  const iterator = (data as unknown as AsyncIterable<unknown>)[Symbol.asyncIterator]();
  await iterator.next();
  return {
    replica: response.headers.get('x-kvroute-replica'),
    async release() {
      controller.abort();
      await iterator.return?.().catch(() => {});
    },
  };
}

export async function replicasAt(gw: RouterAt): Promise<ReplicaJson[]> {
  const res = await fetch(`${gw.url}/router/replicas`);
  return ((await res.json()) as { replicas: ReplicaJson[] }).replicas;
}

export async function inFlightOn(gw: RouterAt, name: string): Promise<number> {
  return (await replicasAt(gw)).find((r) => r.name === name)?.inFlight ?? -1;
}

export interface OwnerBusy {
  owner: string;
  other: string;
  /** The third request, sent while the owner is held. */
  third: Promise<{ status: number; replica: string | null }>;
  filler: Promise<{ status: number; replica: string | null }>;
  stream: { release(): Promise<void> };
}

/**
 * Caches `seed`'s prefix (`prefixTokens` long) on one replica, holds that replica (a stream and
 * a request waiting on its engine), then sends a third request of the same prefix.
 */
export async function ownerBusy(
  gw: RouterAt,
  client: OpenAI,
  model: string,
  seed: number,
  prefixTokens: number,
): Promise<OwnerBusy> {
  const prefix = tokens(seed, prefixTokens);
  const on = async (name: string) => (await replicasAt(gw)).find((r) => r.name === name);
  const first = await within(30_000, served(client, model, [...prefix, 1, 2]), 'the first');
  assert.equal(first.status, 200);
  const owner = first.replica!;
  const other = (await replicasAt(gw)).map((r) => r.name).find((n) => n !== owner)!;
  await waitFor(
    async () => ((await on(owner))?.indexedBlocks ?? 0) > 0,
    "the owner's blocks in the router's index",
  );
  const stream = await within(30_000, hold(client, model, [...prefix, 3, 4]), 'the stream');
  assert.equal(stream.replica, owner, 'the stream goes to the prefix owner');
  const filler = served(client, model, [...prefix, 5, 6]);
  await waitFor(
    async () => ((await on(owner))?.queuedPromptTokens ?? 0) > 0,
    'a prompt queued on the owner',
  );
  const third = served(client, model, [...prefix, 7, 8]);
  return { owner, other, third, filler, stream };
}
