/**
 * Helpers for the gateway's flow-control end-to-end tests (test/gateway/gateway.flow*.test.ts):
 * an `openai` client (of a tenant, by the x-kvroute-tenant header), a metric's sum from
 * /metrics, a completion's status and serving replica, and a long stream that holds its
 * replica's one sequence until released.
 */
import OpenAI from 'openai';
import type { GatewayHandle } from './gateway.harness.ts';

export function flowClient(gw: GatewayHandle, timeoutMs: number, tenant?: string): OpenAI {
  return new OpenAI({
    baseURL: `${gw.url}/v1`,
    apiKey: 'unused',
    maxRetries: 0,
    timeout: timeoutMs,
    ...(tenant !== undefined && { defaultHeaders: { 'x-kvroute-tenant': tenant } }),
  });
}

/** Sum of a metric's samples, from the gateway's /metrics. */
export async function metricSum(gw: GatewayHandle, name: string): Promise<number> {
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
