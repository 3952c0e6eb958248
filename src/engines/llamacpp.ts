/**
 * llama.cpp's `llama-server` (tools/server/server-context.cpp, server-http.cpp):
 * - load: `/metrics` (only with `--metrics`) exports `llamacpp:requests_processing` (slots
 *   busy) and `llamacpp:requests_deferred` (tasks waiting for a slot); it exports no KV usage.
 *   `/slots` (on by default, `--no-slots` hides it) lists each slot with `is_processing`.
 *   A slot has its own context, so "KV full" is "every slot busy": kvUsage is busy / slots.
 * - tokens: `POST /tokenize {content, add_special, parse_special}` -> `{tokens}`; a chat is
 *   rendered first by `POST /apply-template {messages}` -> `{prompt}`, and served as the
 *   completions endpoint does: the rendered prompt tokenized with add_special (BOS) on.
 * - cache: `n_slots` prompt caches, one prompt each (plus the host prompt cache of
 *   `--cache-ram`): the router's slot model (router/index/slotCache.ts).
 * - facts: `GET /props` -> `total_slots`, `default_generation_settings.n_ctx` (per slot).
 */
import type {
  EngineDialect,
  EngineShape,
  Get,
  LoadReport,
  Post,
  TokenizeAnswer,
  TokenizeBody,
} from './dialect.ts';
import { readGauges, readTokenizeAnswer, refusal, sum, tokenIds } from './dialect.ts';

export const LLAMACPP_RUNNING = 'llamacpp:requests_processing';
export const LLAMACPP_WAITING = 'llamacpp:requests_deferred';
/** Older builds (before 2025) exported it; read when present. */
export const LLAMACPP_KV_USAGE_OLD = 'llamacpp:kv_cache_usage_ratio';
const NAMES = new Set([LLAMACPP_RUNNING, LLAMACPP_WAITING, LLAMACPP_KV_USAGE_OLD]);

/** What `/props` says that routing needs. */
export interface LlamaProps {
  /** Parallel slots (`-np`). */
  slots: number;
  /** Context per slot, tokens. */
  slotContextTokens: number | null;
  modelPath: string | null;
}

/**
 * Load out of `/metrics` text. `slots` (from `/props`) turns busy slots into kvUsage; without
 * it the old ratio gauge or 0. Null when the page holds neither gauge.
 */
export function parseLlamaLoad(text: string, slots: number | null = null): LoadReport | null {
  const g = readGauges(text, NAMES);
  const running = sum(g.get(LLAMACPP_RUNNING));
  const waiting = sum(g.get(LLAMACPP_WAITING));
  if (running === null && waiting === null) return null;
  const old = g.get(LLAMACPP_KV_USAGE_OLD)?.[0];
  const kvUsage =
    old !== undefined ? old : slots !== null && slots > 0 ? Math.min(1, (running ?? 0) / slots) : 0;
  return { kvUsage, running: running ?? 0, waiting: waiting ?? 0 };
}

/** Load out of a `/slots` answer (an array of slots with `is_processing`); waiting unknown: 0. */
export function parseLlamaSlots(json: unknown): LoadReport | null {
  if (!Array.isArray(json) || json.length === 0) return null;
  let busy = 0;
  for (const s of json) {
    if (typeof s !== 'object' || s === null) return null;
    if ((s as { is_processing?: unknown }).is_processing === true) busy++;
  }
  return { kvUsage: busy / json.length, running: busy, waiting: 0 };
}

/** `/props`: null when it is not llama-server's (no `total_slots`). */
export function parseLlamaProps(json: unknown): LlamaProps | null {
  const p = json as {
    total_slots?: unknown;
    model_path?: unknown;
    default_generation_settings?: { n_ctx?: unknown };
  } | null;
  if (!p || !Number.isInteger(p.total_slots) || (p.total_slots as number) < 1) return null;
  const nCtx = p.default_generation_settings?.n_ctx;
  return {
    slots: p.total_slots as number,
    slotContextTokens: Number.isInteger(nCtx) ? (nCtx as number) : null,
    modelPath: typeof p.model_path === 'string' ? p.model_path : null,
  };
}

/** The `/tokenize` body for a completion prompt or a rendered chat: BOS added as serving does. */
export function llamaTokenizeBody(content: string): Record<string, unknown> {
  return { content, add_special: true, parse_special: true };
}

/**
 * A vLLM-shaped tokenize body (`{prompt}` or `{messages, ...}`) asked of llama-server: a chat is
 * rendered by `/apply-template` first. Token id prompts are their own ids.
 */
export async function llamaTokenize(body: TokenizeBody, post: Post): Promise<TokenizeAnswer> {
  let content: string;
  if (Array.isArray(body.messages)) {
    const { messages, tools, chat_template_kwargs } = body;
    const rendered = await post('/apply-template', {
      messages,
      ...(tools !== undefined && { tools }),
      ...(chat_template_kwargs !== undefined && { chat_template_kwargs }),
    });
    if (rendered.status === 400) throw refusal(rendered.json, 'the backend refused the chat');
    const prompt = (rendered.json as { prompt?: unknown } | null)?.prompt;
    if (rendered.status !== 200 || typeof prompt !== 'string') {
      throw new Error(`/apply-template answered ${rendered.status} without a prompt`);
    }
    content = prompt;
  } else if (typeof body.prompt === 'string') {
    content = body.prompt;
  } else if (Array.isArray(body.prompt) && body.prompt.every(Number.isInteger)) {
    return { ids: body.prompt as number[], maxModelLen: null };
  } else {
    throw new Error('nothing to tokenize: neither prompt nor messages');
  }
  const answer = await post('/tokenize', llamaTokenizeBody(content));
  const ids = readTokenizeAnswer('/tokenize', answer, tokenIds);
  return { ids, maxModelLen: null };
}

/** `/metrics` when served (`--metrics`), else `/slots` (on unless `--no-slots`). */
export async function readLlamaLoad(get: Get, shape: EngineShape): Promise<LoadReport | null> {
  const metrics = await get('/metrics');
  const fromMetrics = metrics.status === 200 ? parseLlamaLoad(metrics.text, shape.slots) : null;
  if (fromMetrics) return fromMetrics;
  const slots = await get('/slots');
  if (slots.status !== 200) return null;
  try {
    return parseLlamaSlots(JSON.parse(slots.text));
  } catch {
    return null;
  }
}

export const llamacpp: EngineDialect = {
  kind: 'llamacpp',
  loadPath: '/metrics',
  parseLoad: (text) => parseLlamaLoad(text),
  readLoad: readLlamaLoad,
  cacheSource: 'slots',
  tokenizes: true,
  tokenize: llamaTokenize,
  healthPath: '/health',
};
