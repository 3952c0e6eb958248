/**
 * One generation request from submission to the last byte: submits one engine request per
 * choice (vLLM fans `n` out the same way), turns each token the engine emits into text through
 * the choice's sampler and stop rules (choice.ts), and answers in vLLM's shapes, as one JSON body
 * or as a server-sent event stream (`data: {json}\n\n` ... `data: [DONE]\n\n`). A choice that
 * meets a stop string or stop token ends at once and frees its KV blocks; a client that goes
 * away aborts every choice still running.
 *
 * Streams follow vLLM's serving code: chat sends one `{role: "assistant", content: ""}` chunk per
 * choice when the first token arrives (then the echoed last message, with `echo`), then one chunk
 * per token, each with its choice's index; completions echo the prompt in a choice's first chunk.
 * With `stream_options.include_usage`, a last chunk with `choices: []` and the usage of all
 * choices precedes `[DONE]`.
 */
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { sendError } from '../../openai/http.ts';
import type { GenerationTransfer } from '../connector/transfer.ts';
import { SSE_DONE, sseData } from '../../openai/sse.ts';
import type { Tokenizer } from '../../tokenizer/tokenizer.ts';
import { type ChoiceStep, ChoiceText, type Finish } from './choice.ts';
import type { EngineDriver, RequestSink } from './driver.ts';
import { EmittedTokens, type TextStream } from './emittedTokens.ts';
import { toApiError } from './errors.ts';
import { chatLogprobs, completionLogprobs, type TokenAt } from './logprobs.ts';
import type { EngineMetrics, FinishReason, RequestTimes } from './metrics.ts';
import { simulatedModel, TokenSampler } from './textGen.ts';
import { type StreamLimits, StreamWriter } from './streamWriter.ts';
import type { Generation, ServingLimits } from './validation.ts';

export interface GenerationContext {
  driver: EngineDriver;
  metrics: EngineMetrics;
  tokenizer: Tokenizer;
  servedModelName: string;
  speedup: number;
  seed: number;
  /** Server settings the request checks depend on. */
  limits: ServingLimits;
  /** A per-server engine request id. */
  nextEngineId(): string;
  /** How much of a stream may wait for a client that does not read. */
  streamLimits: StreamLimits;
  /**
   * A runtime that samples real tokens: each choice's text from the sampled ids (no simulated
   * model, no log-probabilities); its end-of-generation ids; absent: the simulated model.
   */
  output?: { text(): TextStream; eosTokenIds: readonly number[] };
  /**
   * A fault (`faults.ts`, `lie`): told of each prompt as it arrives (the liar publishes its
   * blocks as stored), and every answer reports the whole prompt as cached.
   */
  liar?: { onPrompt(promptTokens: readonly number[], scope: PromptScope): void };
}

/** What keys a prompt's blocks besides its tokens. */
export interface PromptScope {
  cacheSalt: string | null;
  loraName: string | null;
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

interface Choice {
  index: number;
  engineId: string;
  source: TokenSampler | EmittedTokens;
  text: ChoiceText;
  /** Every generated token's position, when log-probabilities were asked for. */
  positions: TokenAt[] | null;
  times: RequestTimes;
  cachedTokens: number;
  /** Output characters streamed so far (vLLM's text_offset base for the next chunk). */
  streamedChars: number;
  started: boolean;
  done: boolean;
  /** A remote-decode request's blocks held at its finish. */
  heldBlockIds: number[] | null;
}

/** The text echoed before the output: a completion's prompt; chat's last assistant message. */
function echoText(tokenizer: Tokenizer, gen: Generation): string {
  if (!gen.sampling.echo) return '';
  if (gen.prompt)
    return 'text' in gen.prompt ? gen.prompt.text : tokenizer.decode(gen.prompt.tokenIds);
  const last = gen.messages?.at(-1);
  return last?.role === 'assistant' ? last.content : '';
}

/** Submits the request (throws EngineError synchronously if it can never run) and serves it. */
export function serveGeneration(
  ctx: GenerationContext,
  gen: Generation,
  promptTokens: number[],
  res: ServerResponse,
  /** A request of the P/D protocol (choice 0 carries it; connector/transfer.ts). */
  transfer: GenerationTransfer | null = null,
): void {
  const chat = gen.endpoint === 'chat';
  // vLLM answers with the adapter's name for a LoRA request.
  const modelName = gen.loraName ?? ctx.servedModelName;
  const responseId = `${chat ? 'chatcmpl' : 'cmpl'}-${randomUUID().replaceAll('-', '')}`;
  const created = Math.floor(Date.now() / 1000);
  const output = ctx.output ?? null;
  // The simulated model, unless a runtime samples real tokens (then no log-probabilities).
  const model = output === null ? simulatedModel(ctx.tokenizer) : null;
  const sampling = gen.sampling;
  const topN = model === null ? null : sampling.logprobs === -1 ? model.size : sampling.logprobs;
  const echo = echoText(ctx.tokenizer, gen);
  // An echoed prompt's log-probabilities (completions): vLLM's prompt_logprobs = logprobs.
  const echoPositions =
    !chat && sampling.echo && topN !== null ? promptPositions(promptTokens) : null;
  const toModeledS = (wallMs: number) => (wallMs * ctx.speedup) / 1000;
  const arrivalMs = performance.now();
  const knobs = {
    temperature: sampling.temperature,
    topK: sampling.topK,
    topP: sampling.topP,
    minP: sampling.minP,
  };
  const rules = {
    stop: sampling.stop,
    stopTokenIds: sampling.stopTokenIds,
    includeStopStrInOutput: sampling.includeStopStrInOutput,
    minTokens: sampling.minTokens,
    maxTokens: gen.maxTokens,
    eosTokenIds: output !== null && !sampling.ignoreEos ? output.eosTokenIds : [],
  };
  const choices: Choice[] = Array.from({ length: gen.n }, (_, index) => {
    const source =
      output === null
        ? new TokenSampler(model!, ctx.seed, promptTokens, gen.seed, index, knobs)
        : new EmittedTokens(output.text());
    return {
      index,
      engineId: ctx.nextEngineId(),
      source,
      text: new ChoiceText(source, rules),
      positions: topN === null ? null : [],
      times: { arrivalMs, scheduledMs: null, firstTokenMs: null, lastTokenMs: null },
      cachedTokens: 0,
      streamedChars: 0,
      started: false,
      done: false,
      heldBlockIds: null,
    };
  });
  let open = gen.n;
  let ended = false;
  /** Choice 0's finish came from the core (with its held blocks, for a remote decode). */
  let holdKnown = false;
  let respondOnHold = false;
  let rolesSent = false;
  ctx.metrics.observeParams(gen.n, gen.maxTokens);
  // A client that does not read pauses its stream's writes; past the limits it loses the request.
  const out = new StreamWriter(res, ctx.streamLimits, () => {
    if (!ended) abortAll();
  });

  function promptPositions(
    tokens: readonly number[],
  ): (TokenAt | { text: string; logprob: null })[] {
    return tokens.map((tokenId, i) => {
      const text = ctx.tokenizer.decode([tokenId]);
      if (i === 0) return { text, logprob: null };
      const prev = tokens[i - 1]!;
      return {
        tokenId,
        text,
        logprob: model!.logprobOf(prev, tokenId, ctx.seed),
        offset: model!.offsetAfter(prev, ctx.seed),
      };
    });
  }

  const chunk = (choiceList: unknown[], usage?: Usage): string =>
    sseData({
      id: responseId,
      object: chat ? 'chat.completion.chunk' : 'text_completion',
      created,
      model: modelName,
      choices: choiceList,
      ...(usage && { usage }),
    });

  // The common chunk (a middle token, no log-probabilities) by concatenation: the same bytes
  // JSON.stringify gives for chunk(), at a fraction of the cost, since a busy engine writes one
  // per token per stream. One head and tail per choice index, built when first needed.
  const plain: [string, string][] = [];
  const plainChunk = (index: number, textJson: string): string => {
    let parts = plain[index];
    if (!parts) {
      const choice = chat
        ? { index, delta: { content: '\u0000' }, logprobs: null, finish_reason: null }
        : { index, text: '\u0000', logprobs: null, finish_reason: null, stop_reason: null };
      parts = chunk([choice]).split('"\\u0000"') as [string, string];
      plain[index] = parts;
    }
    return parts[0] + textJson + parts[1];
  };

  function streamLogprobs(c: Choice, positions: (TokenAt | { text: string; logprob: null })[]) {
    if (topN === null) return null;
    if (chat) return { content: chatLogprobs(model!, positions as TokenAt[], topN) };
    return completionLogprobs(model!, positions, topN, c.streamedChars);
  }

  /** vLLM's first chat chunks: each choice's role, then the echoed last message. */
  function sendRoles(): void {
    rolesSent = true;
    let text = '';
    for (const c of choices) {
      text += chunk([
        {
          index: c.index,
          delta: { role: 'assistant', content: '' },
          logprobs: null,
          finish_reason: null,
        },
      ]);
    }
    if (echo) {
      for (const c of choices) {
        text += chunk([
          { index: c.index, delta: { content: echo }, logprobs: null, finish_reason: null },
        ]);
      }
    }
    out.write(text);
  }

  function writeStep(c: Choice, step: ChoiceStep): void {
    if (chat && !rolesSent) sendRoles();
    const at = c.positions?.at(-1);
    const first = !c.started;
    c.started = true;
    const echoNow = !chat && first && sampling.echo;
    if (!step.finish && topN === null && !echoNow) {
      const textJson =
        step.delta === step.token.text ? step.token.textJson : JSON.stringify(step.delta);
      out.write(plainChunk(c.index, textJson));
      c.streamedChars += step.delta.length;
      return;
    }
    const positions = [...(echoNow && echoPositions ? echoPositions : []), ...(at ? [at] : [])];
    const logprobs = streamLogprobs(c, positions);
    const finishReason = step.finish?.reason ?? null;
    const choice = chat
      ? {
          index: c.index,
          delta: { content: step.delta },
          logprobs,
          finish_reason: finishReason,
          ...(step.finish && { stop_reason: step.finish.stopReason }),
        }
      : {
          index: c.index,
          text: echoNow ? echo + step.delta : step.delta,
          logprobs,
          finish_reason: finishReason,
          stop_reason: step.finish?.stopReason ?? null,
        };
    c.streamedChars += step.delta.length;
    out.write(chunk([choice]));
  }

  function usage(): Usage {
    const completion = choices.reduce((sum, c) => sum + c.text.tokens, 0);
    return {
      prompt_tokens: promptTokens.length,
      completion_tokens: completion,
      total_tokens: promptTokens.length + completion,
      prompt_tokens_details: {
        cached_tokens: ctx.liar ? promptTokens.length : choices[0]!.cachedTokens,
      },
    };
  }

  function finishChoice(c: Choice, reason: FinishReason): void {
    if (c.done) return;
    c.done = true;
    open--;
    ctx.metrics.requestFinished({
      times: c.times,
      promptTokens: promptTokens.length,
      cachedTokens: c.cachedTokens,
      outputTokens: c.text.tokens,
      reason,
    });
    if (open !== 0 || reason === 'abort') return;
    // A remote decode's answer names its held blocks: the core's finish (same step) brings them.
    if (reason === 'length' && transfer?.kvTransfer === 'remote-decode' && !holdKnown) {
      respondOnHold = true;
      return;
    }
    respond();
  }

  function respond(): void {
    ended = true;
    if (gen.stream) {
      out.end(`${gen.includeUsage ? chunk([], usage()) : ''}${SSE_DONE}`);
      return;
    }
    const body = JSON.stringify({
      id: responseId,
      object: chat ? 'chat.completion' : 'text_completion',
      created,
      model: modelName,
      choices: choices.map(finalChoice),
      usage: usage(),
      ...transfer?.responseFields?.(choices[0]!.engineId, choices[0]!.heldBlockIds),
    });
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  }

  function finalChoice(c: Choice) {
    const finish: Finish = c.text.finish ?? { reason: 'length', stopReason: null };
    const text = echo + c.text.text;
    if (chat) {
      return {
        index: c.index,
        message: { role: 'assistant', content: text, tool_calls: [] },
        logprobs: topN === null ? null : { content: chatLogprobs(model!, c.positions!, topN) },
        finish_reason: finish.reason,
        stop_reason: finish.stopReason,
      };
    }
    const positions = [...(echoPositions ?? []), ...(c.positions ?? [])];
    return {
      index: c.index,
      text,
      logprobs: topN === null ? null : completionLogprobs(model!, positions, topN, 0),
      finish_reason: finish.reason,
      stop_reason: finish.stopReason,
    };
  }

  /** Ends everything still running: the engine fails, or the client went away. */
  function abortAll(): void {
    ended = true;
    for (const c of choices) {
      if (c.done) continue;
      ctx.driver.abort(c.engineId);
      finishChoice(c, 'abort');
    }
  }

  const sinkFor = (c: Choice): RequestSink => ({
    onScheduled(atMs, cachedTokens) {
      c.times.scheduledMs ??= atMs;
      c.cachedTokens = Math.max(0, cachedTokens - (transfer?.externalTokensOf(c.engineId) ?? 0));
    },
    onToken(index, tokenId) {
      // Recomputation after a preemption can repeat an index: each token counts once.
      if (c.done || ended || index !== c.text.tokens) return;
      if (c.source instanceof EmittedTokens) c.source.offer(tokenId!);
      const nowMs = performance.now();
      if (c.times.firstTokenMs === null) {
        ctx.metrics.observeTtft(toModeledS(nowMs - arrivalMs));
        c.times.firstTokenMs = nowMs;
      } else ctx.metrics.observeItl(toModeledS(nowMs - c.times.lastTokenMs!));
      c.times.lastTokenMs = nowMs;
      const step = c.text.step();
      c.positions?.push({
        tokenId: step.token.tokenId,
        text: step.token.text,
        logprob: model!.rankLogprobs[step.token.rank]!,
        offset: step.token.offset,
      });
      if (gen.stream) writeStep(c, step);
      if (!step.finish) return;
      // A stop ends the choice before max_tokens: the engine stops it and frees its KV now.
      if (step.finish.reason === 'stop') ctx.driver.abort(c.engineId);
      finishChoice(c, step.finish.reason);
    },
    onFinish(finished) {
      // The core ends a choice at max_tokens, after its last token made it finish here already.
      if (c.index === 0) {
        c.heldBlockIds = finished.heldBlockIds ?? null;
        holdKnown = true;
        if (respondOnHold && !ended) {
          respondOnHold = false;
          respond();
          return;
        }
      }
      if (c.done || ended) return;
      c.cachedTokens = finished.cachedTokens;
      finishChoice(c, 'length');
    },
    onFail(err) {
      if (ended) return;
      abortAll();
      if (res.headersSent) res.destroy(err);
      else sendError(res, toApiError(err));
    },
  });

  ctx.liar?.onPrompt(promptTokens, { cacheSalt: gen.cacheSalt, loraName: gen.loraName });
  for (const c of choices) {
    try {
      ctx.driver.submit(
        {
          id: c.engineId,
          promptTokens,
          maxNewTokens: gen.maxTokens,
          ...(gen.cacheSalt !== null && { cacheSalt: gen.cacheSalt }),
          ...(gen.loraName !== null && { loraName: gen.loraName }),
          ...(gen.priority !== null && { priority: gen.priority }),
          ...(transfer !== null &&
            transfer.kvTransfer !== 'none' &&
            c.index === 0 && { kvTransfer: transfer.kvTransfer }),
          ...(transfer?.client !== undefined &&
            c.index === 0 && { transferClient: transfer.client }),
          ...(output !== null && {
            sampling: {
              temperature: knobs.temperature ?? 1,
              topK: knobs.topK,
              topP: knobs.topP,
              minP: knobs.minP,
              // vLLM: choice i of a seeded request draws with seed + i.
              seed:
                gen.seed === null
                  ? (ctx.seed ^ Math.imul(seqOfId(c.engineId), 0x9e3779b1)) >>> 0
                  : (gen.seed + c.index) >>> 0,
            },
          }),
        },
        sinkFor(c),
      );
    } catch (err) {
      // Only the first choice can be refused (they share the prompt); nothing else was sent.
      for (const sent of choices.slice(0, c.index)) ctx.driver.abort(sent.engineId);
      throw err;
    }
  }
  // 'close' also fires after a normal end; only an early one is a disconnect.
  res.on('close', () => {
    if (!ended) abortAll();
  });
  if (gen.stream) {
    res.writeHead(200, SSE_HEADERS);
    res.flushHeaders();
  }
}

/** The number in a server's engine request id (`req-12` -> 12), to vary unseeded draws. */
function seqOfId(engineId: string): number {
  const n = Number.parseInt(engineId.slice(engineId.lastIndexOf('-') + 1), 10);
  return Number.isFinite(n) ? n : 0;
}
