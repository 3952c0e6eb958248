/**
 * One streamed completion, timed from the client: POST /v1/completions with `stream: true` and
 * `stream_options.include_usage`, read the server-sent events as they arrive, and note when
 * each token chunk came. Every failure (refused connection, HTTP error, reset socket, a stream
 * that ends without `[DONE]`) comes back as an outcome with an error kind, never as a throw:
 * the load generator counts them and carries on.
 */
import { type Dispatcher, errors, request } from 'undici';
import { SseError, SseFramer } from '../openai/sse.ts';

/** kvroute's gateway names the replica that served a response (`src/gateway/generate.ts`). */
const REPLICA_HEADER = 'x-kvroute-replica';

export interface CompletionRequest {
  /** Base URL, e.g. http://127.0.0.1:8080 (no trailing slash). */
  url: string;
  /** Text, or token ids (vLLM and kvroute engine take either). */
  prompt: string | readonly number[];
  maxTokens: number;
  model: string | null;
  apiKey: string | null;
  dispatcher: Dispatcher;
  signal?: AbortSignal;
  /** Called as each token chunk arrives, with how many have (a caller waiting for a stream). */
  onToken?: (tokens: number) => void;
}

export interface StreamOutcome {
  /** performance.now() when the request was written, and of each token chunk and the end. */
  sentAt: number;
  tokenTimes: number[];
  endAt: number;
  /** From the usage chunk, when the server sent one. */
  promptTokens: number | null;
  completionTokens: number | null;
  /** `usage.prompt_tokens_details.cached_tokens`; null when the server does not report it. */
  cachedTokens: number | null;
  /** The replica that served it, from kvroute's `x-kvroute-replica` header; null without one. */
  replica: string | null;
  /** null on success; otherwise a stable kind such as `http-500`, `dropped`, `truncated`. */
  error: string | null;
  /** A short human detail for the first errors of each kind. */
  detail?: string;
}

interface Chunk {
  choices?: { text?: string; delta?: { content?: string | null } }[];
  usage?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
  } | null;
  error?: { message?: string };
}

export async function streamCompletion(req: CompletionRequest): Promise<StreamOutcome> {
  const out: StreamOutcome = {
    sentAt: performance.now(),
    tokenTimes: [],
    endAt: Number.NaN,
    promptTokens: null,
    completionTokens: null,
    cachedTokens: null,
    replica: null,
    error: null,
  };
  const body = JSON.stringify({
    ...(req.model !== null && { model: req.model }),
    prompt: req.prompt,
    max_tokens: req.maxTokens,
    ignore_eos: true,
    stream: true,
    stream_options: { include_usage: true },
  });
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (req.apiKey !== null) headers.authorization = `Bearer ${req.apiKey}`;
  try {
    const res = await request(`${req.url}/v1/completions`, {
      method: 'POST',
      headers,
      body,
      dispatcher: req.dispatcher,
      ...(req.signal && { signal: req.signal }),
    });
    const replica = res.headers[REPLICA_HEADER];
    if (typeof replica === 'string') out.replica = replica;
    if (res.statusCode !== 200) {
      const text = await res.body.text().catch(() => '');
      return finish(out, `http-${res.statusCode}`, text.slice(0, 200));
    }
    const done = await readEvents(res.body, out, req.onToken);
    return finish(out, done ? null : 'truncated');
  } catch (err) {
    return finish(out, errorKind(err, req.signal), (err as Error).message);
  }
}

/** Reads `data:` events into `out`; true when the stream ended with `[DONE]`. */
async function readEvents(
  body: AsyncIterable<Buffer>,
  out: StreamOutcome,
  onToken: ((tokens: number) => void) | undefined,
): Promise<boolean> {
  const framer = new SseFramer();
  for await (const piece of body) {
    const now = performance.now();
    for (const data of framer.push(piece)) {
      if (data.trim() === '[DONE]') return true;
      const before = out.tokenTimes.length;
      onChunk(JSON.parse(data) as Chunk, now, out);
      if (onToken && out.tokenTimes.length > before) onToken(out.tokenTimes.length);
    }
  }
  return false;
}

function onChunk(chunk: Chunk, now: number, out: StreamOutcome): void {
  if (chunk.error) throw new StreamError(chunk.error.message ?? 'error event in stream');
  const choice = chunk.choices?.[0];
  const text = choice?.text ?? choice?.delta?.content ?? '';
  // A chunk with text is a token (a real server may pack several; TPOT uses usage then).
  if (text.length > 0) out.tokenTimes.push(now);
  const usage = chunk.usage;
  if (usage) {
    out.promptTokens = usage.prompt_tokens ?? null;
    out.completionTokens = usage.completion_tokens ?? null;
    out.cachedTokens = usage.prompt_tokens_details?.cached_tokens ?? null;
  }
}

class StreamError extends Error {}

function finish(out: StreamOutcome, error: string | null, detail?: string): StreamOutcome {
  out.endAt = performance.now();
  out.error = error;
  if (detail !== undefined) out.detail = detail;
  return out;
}

/** Stable kinds for the error table: what failed, not the library's wording. */
function errorKind(err: unknown, signal: AbortSignal | undefined): string {
  if (signal?.aborted) return 'cancelled';
  if (err instanceof StreamError) return 'stream-error';
  if (err instanceof SyntaxError || err instanceof SseError) return 'bad-stream';
  const code = (err as { code?: unknown }).code;
  if (code === 'ECONNREFUSED') return 'refused';
  if (err instanceof errors.SocketError || code === 'ECONNRESET' || code === 'EPIPE') {
    return 'dropped';
  }
  if (err instanceof errors.HeadersTimeoutError || err instanceof errors.BodyTimeoutError) {
    return 'timeout';
  }
  return typeof code === 'string' ? code.toLowerCase() : 'client-error';
}
