/**
 * One generation request from submission to the last byte: submits it to the driver, turns each
 * token the engine emits into text, and answers in vLLM's shapes, as one JSON body or as a
 * server-sent event stream (`data: {json}\n\n` ... `data: [DONE]\n\n`). A client that goes away
 * before the end aborts the request, which frees its KV blocks at once.
 */
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { sendError } from '../../openai/http.ts';
import { SSE_DONE, sseData } from '../../openai/sse.ts';
import type { Tokenizer } from '../../tokenizer/tokenizer.ts';
import type { RequestFinished } from '../types.ts';
import type { RequestSink, WallClockDriver } from './driver.ts';
import { toApiError } from './errors.ts';
import type { EngineMetrics } from './metrics.ts';
import { type StreamLimits, StreamWriter } from './streamWriter.ts';
import { OutputText } from './textGen.ts';
import type { Generation } from './validation.ts';

export interface GenerationContext {
  driver: WallClockDriver;
  metrics: EngineMetrics;
  tokenizer: Tokenizer;
  servedModelName: string;
  speedup: number;
  seed: number;
  /** A per-server engine request id. */
  nextEngineId(): string;
  /** How much of a stream may wait for a client that does not read. */
  streamLimits: StreamLimits;
}

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no',
};

/** Submits the request (throws EngineError synchronously if it can never run) and serves it. */
export function serveGeneration(
  ctx: GenerationContext,
  gen: Generation,
  promptTokens: number[],
  res: ServerResponse,
): void {
  const chat = gen.endpoint === 'chat';
  const responseId = `${chat ? 'chatcmpl' : 'cmpl'}-${randomUUID().replaceAll('-', '')}`;
  const created = Math.floor(Date.now() / 1000);
  const engineId = ctx.nextEngineId();
  const output = new OutputText(ctx.tokenizer, ctx.seed, promptTokens, gen.seed);
  const startedMs = performance.now();
  const toModeledS = (wallMs: number) => (wallMs * ctx.speedup) / 1000;
  let lastTokenMs = 0;
  let tokens = 0;
  let done = false;
  const pieces: string[] = [];
  // A client that does not read pauses its stream's writes; past the limits it loses the request.
  const out = new StreamWriter(res, ctx.streamLimits, () => {
    if (done) return;
    done = true;
    ctx.driver.abort(engineId);
  });

  const chunk = (choices: unknown[], usage?: Usage): string =>
    sseData({
      id: responseId,
      object: chat ? 'chat.completion.chunk' : 'text_completion',
      created,
      model: ctx.servedModelName,
      choices,
      ...(usage && { usage }),
    });

  // The common chunk (a middle token) by concatenation: the same bytes JSON.stringify gives for
  // chunk(), at a fraction of the cost, since a busy engine writes one per token per stream.
  const [head, tail] = chunk([streamChoice('\u0000', null, false)]).split('"\\u0000"') as [
    string,
    string,
  ];

  function streamChoice(text: string, finishReason: string | null, first: boolean) {
    return chat
      ? {
          index: 0,
          delta: first ? { role: 'assistant', content: text } : { content: text },
          logprobs: null,
          finish_reason: finishReason,
        }
      : { index: 0, text, logprobs: null, finish_reason: finishReason, stop_reason: null };
  }

  const sink: RequestSink = {
    onToken(index) {
      // Recomputation after a preemption can repeat an index: each token counts once.
      if (index !== tokens) return;
      const nowMs = performance.now();
      if (tokens === 0) ctx.metrics.observeTtft(toModeledS(nowMs - startedMs));
      else ctx.metrics.observeItl(toModeledS(nowMs - lastTokenMs));
      lastTokenMs = nowMs;
      tokens++;
      const { text, textJson } = output.next();
      if (!gen.stream) {
        pieces.push(text);
        return;
      }
      // The engine always produces exactly max_tokens, so the last one carries finish_reason.
      const last = tokens === gen.maxTokens;
      if (tokens === 1 || last) {
        out.write(chunk([streamChoice(text, last ? 'length' : null, tokens === 1)]));
      } else out.write(head + textJson + tail);
    },
    onFinish(finished: RequestFinished) {
      done = true;
      ctx.metrics.observeE2e(toModeledS(performance.now() - startedMs));
      ctx.metrics.requestFinished(finished.reason);
      const usage: Usage = {
        prompt_tokens: promptTokens.length,
        completion_tokens: tokens,
        total_tokens: promptTokens.length + tokens,
        prompt_tokens_details: { cached_tokens: finished.cachedTokens },
      };
      if (gen.stream) {
        out.end(`${gen.includeUsage ? chunk([], usage) : ''}${SSE_DONE}`);
        return;
      }
      const text = pieces.join('');
      const choice = chat
        ? {
            index: 0,
            message: { role: 'assistant', content: text, tool_calls: [] },
            logprobs: null,
            finish_reason: 'length',
            stop_reason: null,
          }
        : { index: 0, text, logprobs: null, finish_reason: 'length', stop_reason: null };
      const body = JSON.stringify({
        id: responseId,
        object: chat ? 'chat.completion' : 'text_completion',
        created,
        model: ctx.servedModelName,
        choices: [choice],
        usage,
      });
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
      });
      res.end(body);
    },

    onFail(err) {
      done = true;
      if (res.headersSent) res.destroy(err);
      else sendError(res, toApiError(err));
    },
  };

  ctx.driver.submit(
    {
      id: engineId,
      promptTokens,
      maxNewTokens: gen.maxTokens,
      ...(gen.cacheSalt !== null && { cacheSalt: gen.cacheSalt }),
    },
    sink,
  );
  // 'close' also fires after a normal end; only an early one is a disconnect.
  res.on('close', () => {
    if (!done) {
      done = true;
      ctx.driver.abort(engineId);
    }
  });
  if (gen.stream) {
    res.writeHead(200, SSE_HEADERS);
    res.flushHeaders();
  }
}
