/**
 * What kvroute must know of an engine kind to route to it, one file per kind (like the
 * policies): how to read its load (running, waiting, KV usage), how to ask its tokenizer,
 * where the router learns its cache (KV events, its slots, or the router's own record), and
 * what names its model. A dialect is pure: it parses text and builds request bodies; the
 * gateway's shells do the HTTP.
 */

export const ENGINE_KINDS = ['vllm', 'llamacpp', 'sglang', 'openai'] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];

export function isEngineKind(v: unknown): v is EngineKind {
  return typeof v === 'string' && (ENGINE_KINDS as readonly string[]).includes(v);
}

/** An engine's load, as the router's guards and policies read it. */
export interface LoadReport {
  /** Fraction of its KV in use, 0..1. */
  kvUsage: number;
  /** Requests it is running now. */
  running: number;
  /** Requests it holds back (queued, deferred). */
  waiting: number;
}

/**
 * Where the router learns an engine's cache: its KV events (`events`), a model of its slot
 * caches kept by the router (`slots`), or the router's record of what it routed (`ledger`).
 */
export type CacheSource = 'events' | 'slots' | 'ledger';

/** A tokenize request as the gateway builds it: vLLM's `/tokenize` body. */
export type TokenizeBody = Record<string, unknown>;

/** One HTTP POST the dialect asks its shell to make: status and parsed JSON (null if none). */
export type Post = (
  path: string,
  body: Record<string, unknown>,
) => Promise<{ status: number; json: unknown }>;

export interface TokenizeAnswer {
  ids: number[];
  /** The engine's context window when its answer says (vLLM's `max_model_len`). */
  maxModelLen: number | null;
}

/** A tokenize call the engine refused (400): the client's prompt is at fault. */
export class TokenizeRefused extends Error {
  readonly param: string | null;
  constructor(message: string, param: string | null) {
    super(message);
    this.param = param;
  }
}

/** One HTTP GET the dialect asks its shell to make; throws when the backend cannot be reached. */
export type Get = (path: string) => Promise<{ status: number; text: string }>;

/** What the gateway learned of the engine when it joined (llama.cpp's `/props`). */
export interface EngineShape {
  /** Parallel slots, when it has slots. */
  slots: number | null;
}

export interface EngineDialect {
  readonly kind: EngineKind;
  /** The page its load is read from (`GET`), or null: its load is the router's ledger. */
  readonly loadPath: string | null;
  /** Its load out of that page's text; null when the page holds none of its gauges. */
  parseLoad(text: string): LoadReport | null;
  /** Reads its load through `get` (the load page, and a fallback where it has one). */
  readLoad(get: Get, shape: EngineShape): Promise<LoadReport | null>;
  readonly cacheSource: CacheSource;
  /** Whether it has a tokenizer endpoint at all. */
  readonly tokenizes: boolean;
  /** Its token ids for a vLLM-shaped tokenize body, asked through `post`. */
  tokenize(body: TokenizeBody, post: Post): Promise<TokenizeAnswer>;
  /** Where its health is asked (`GET`, 200 = healthy). */
  readonly healthPath: string;
}

/** Prometheus text to `name -> values` (label sets summed by the caller's choice). */
export function readGauges(text: string, names: ReadonlySet<string>): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const line of text.split('\n')) {
    if (line.length === 0 || line.charCodeAt(0) === 35 /* # */) continue;
    const brace = line.indexOf('{');
    const space = line.indexOf(' ');
    const nameEnd = brace >= 0 && brace < space ? brace : space;
    if (nameEnd <= 0) continue;
    const name = line.slice(0, nameEnd);
    if (!names.has(name)) continue;
    const afterLabels = brace >= 0 && brace < space ? line.indexOf('}', brace) + 1 : nameEnd;
    const value = Number(line.slice(afterLabels).trim().split(/\s+/)[0]);
    if (!Number.isFinite(value)) continue;
    const list = out.get(name);
    if (list) list.push(value);
    else out.set(name, [value]);
  }
  return out;
}

export const sum = (values: readonly number[] | undefined): number | null =>
  values === undefined ? null : values.reduce((a, b) => a + b, 0);
export const max = (values: readonly number[] | undefined): number | null =>
  values === undefined ? null : Math.max(...values);

/** The ids of a `{tokens: [...]}` answer, or null when it has none. */
export function tokenIds(json: unknown): number[] | null {
  const tokens = (json as { tokens?: unknown } | null)?.tokens;
  if (!Array.isArray(tokens)) return null;
  // llama-server's `with_pieces` answers `{id, piece}` objects; plain ids otherwise.
  const ids = tokens.map((t) =>
    typeof t === 'object' && t !== null ? (t as { id?: unknown }).id : t,
  );
  return ids.every(Number.isInteger) ? (ids as number[]) : null;
}

/** An OpenAI-style error answer's message and param, for a 400. */
export function refusal(json: unknown, fallback: string): TokenizeRefused {
  const error = (json as { error?: { message?: unknown; param?: unknown } } | null)?.error;
  return new TokenizeRefused(
    typeof error?.message === 'string' ? error.message : fallback,
    typeof error?.param === 'string' ? error.param : null,
  );
}

/**
 * A tokenize endpoint's answer: a 400 is the backend's refusal (the client's prompt is at
 * fault); a 200 is read by `read` (null: it holds no token ids); anything else is an error.
 */
export function readTokenizeAnswer<T>(
  path: string,
  answer: { status: number; json: unknown },
  read: (json: unknown) => T | null,
): T {
  const { status, json } = answer;
  if (status === 400) throw refusal(json, 'the backend refused the prompt');
  const read_ = status === 200 ? read(json) : null;
  if (read_ === null) {
    throw new Error(`${path} answered ${status}${status === 200 ? ' without token ids' : ''}`);
  }
  return read_;
}

/** `readLoad` for an engine whose load is its `/metrics` page alone. */
export function metricsLoad(parse: (text: string) => LoadReport | null): EngineDialect['readLoad'] {
  return async (get) => {
    const page = await get('/metrics');
    return page.status === 200 ? parse(page.text) : null;
  };
}
