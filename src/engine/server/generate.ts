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
import type { EngineRequest } from '../types.ts';
import { SSE_DONE, sseData } from '../../openai/sse.ts';
import type { Tokenizer } from '../../tokenizer/tokenizer.ts';
import { type ChoiceStep, ChoiceText, type Finish } from './choice.ts';
import type { EngineDriver } from './sinkDriver.ts';
import type { RequestSink } from './requestSink.ts';
import { EmittedTokens, type TextStream } from './emittedTokens.ts';
import { toApiError } from './errors.ts';
import { chatLogprobs, completionLogprobs, type TokenAt } from './logprobs.ts';
import type { EngineMetrics, FinishReason, RequestTimes } from './metrics.ts';
import {
  type SamplingKnobs,
  type SimulatedModel,
  simulatedModel,
  TokenSampler,
} from './textGen.ts';
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

type PromptPosition = TokenAt | { text: string; logprob: null };

/** An echoed prompt's positions: the first token has no log-probability (vLLM's prompt_logprobs). */
function promptPositions(
  tokenizer: Tokenizer,
  model: SimulatedModel,
  seed: number,
  tokens: readonly number[],
): PromptPosition[] {
  return tokens.map((tokenId, i) => {
    const text = tokenizer.decode([tokenId]);
    if (i === 0) return { text, logprob: null };
    const prev = tokens[i - 1]!;
    return {
      tokenId,
      text,
      logprob: model.logprobOf(prev, tokenId, seed),
      offset: model.offsetAfter(prev, seed),
    };
  });
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
  const run = new GenerationRun(ctx, gen, promptTokens, res, transfer);
  run.submitAll();
  run.listen();
}

/** One generation's state: its choices, what was sent, and the steps that answer it. */
class GenerationRun {
  readonly chat: boolean;
  /** vLLM answers with the adapter's name for a LoRA request. */
  readonly modelName: string;
  readonly responseId: string;
  readonly created: number;
  readonly output: NonNullable<GenerationContext['output']> | null;
  /** The simulated model, unless a runtime samples real tokens (then no log-probabilities). */
  readonly model: SimulatedModel | null;
  readonly topN: number | null;
  readonly echo: string;
  /** An echoed prompt's log-probabilities (completions): vLLM's prompt_logprobs = logprobs. */
  readonly echoPositions: PromptPosition[] | null;
  readonly arrivalMs: number;
  readonly knobs: SamplingKnobs;
  readonly choices: Choice[];
  readonly out: StreamWriter;
  open: number;
  ended = false;
  /** Choice 0's finish came from the core (with its held blocks, for a remote decode). */
  holdKnown = false;
  respondOnHold = false;
  rolesSent = false;
  /** One plain chunk's head and tail per choice index (plainChunk). */
  readonly plain: [string, string][] = [];

  constructor(
    readonly ctx: GenerationContext,
    readonly gen: Generation,
    readonly promptTokens: number[],
    readonly res: ServerResponse,
    readonly transfer: GenerationTransfer | null,
  ) {
    this.chat = gen.endpoint === 'chat';
    this.modelName = gen.loraName ?? ctx.servedModelName;
    this.responseId = `${this.chat ? 'chatcmpl' : 'cmpl'}-${randomUUID().replaceAll('-', '')}`;
    this.created = Math.floor(Date.now() / 1000);
    this.output = ctx.output ?? null;
    this.model = this.output === null ? simulatedModel(ctx.tokenizer) : null;
    const sampling = gen.sampling;
    this.topN =
      this.model === null ? null : sampling.logprobs === -1 ? this.model.size : sampling.logprobs;
    this.echo = echoText(ctx.tokenizer, gen);
    this.echoPositions =
      !this.chat && sampling.echo && this.topN !== null
        ? promptPositions(ctx.tokenizer, this.model!, ctx.seed, promptTokens)
        : null;
    this.arrivalMs = performance.now();
    this.knobs = {
      temperature: sampling.temperature,
      topK: sampling.topK,
      topP: sampling.topP,
      minP: sampling.minP,
    };
    this.choices = this.newChoices();
    this.open = gen.n;
    ctx.metrics.observeParams(gen.n, gen.maxTokens);
    // A client that does not read pauses its stream's writes; past the limits it loses the request.
    this.out = new StreamWriter(res, ctx.streamLimits, () => {
      if (!this.ended) this.abortAll();
    });
  }

  /** One choice per `n`, each with its own token source and stop rules. */
  private newChoices(): Choice[] {
    const { ctx, gen, output, model, promptTokens, knobs } = this;
    const sampling = gen.sampling;
    const rules = {
      stop: sampling.stop,
      stopTokenIds: sampling.stopTokenIds,
      includeStopStrInOutput: sampling.includeStopStrInOutput,
      minTokens: sampling.minTokens,
      maxTokens: gen.maxTokens,
      eosTokenIds: output !== null && !sampling.ignoreEos ? output.eosTokenIds : [],
    };
    return Array.from({ length: gen.n }, (_, index) => {
      const source =
        output === null
          ? new TokenSampler(model!, ctx.seed, promptTokens, gen.seed, index, knobs)
          : new EmittedTokens(output.text());
      return {
        index,
        engineId: ctx.nextEngineId(),
        source,
        text: new ChoiceText(source, rules),
        positions: this.topN === null ? null : [],
        times: {
          arrivalMs: this.arrivalMs,
          scheduledMs: null,
          firstTokenMs: null,
          lastTokenMs: null,
        },
        cachedTokens: 0,
        streamedChars: 0,
        started: false,
        done: false,
        heldBlockIds: null,
      };
    });
  }

  private toModeledS(wallMs: number): number {
    return (wallMs * this.ctx.speedup) / 1000;
  }

  private chunk(choiceList: unknown[], usage?: Usage): string {
    return sseData({
      id: this.responseId,
      object: this.chat ? 'chat.completion.chunk' : 'text_completion',
      created: this.created,
      model: this.modelName,
      choices: choiceList,
      ...(usage && { usage }),
    });
  }

  /**
   * The common chunk (a middle token, no log-probabilities) by concatenation: the same bytes
   * JSON.stringify gives for chunk(), at a fraction of the cost, since a busy engine writes one
   * per token per stream. One head and tail per choice index, built when first needed.
   */
  private plainChunk(index: number, textJson: string): string {
    let parts = this.plain[index];
    if (!parts) {
      const choice = this.chat
        ? { index, delta: { content: '\u0000' }, logprobs: null, finish_reason: null }
        : { index, text: '\u0000', logprobs: null, finish_reason: null, stop_reason: null };
      parts = this.chunk([choice]).split('"\\u0000"') as [string, string];
      this.plain[index] = parts;
    }
    return parts[0] + textJson + parts[1];
  }

  private streamLogprobs(c: Choice, positions: PromptPosition[]) {
    if (this.topN === null) return null;
    if (this.chat) return { content: chatLogprobs(this.model!, positions as TokenAt[], this.topN) };
    return completionLogprobs(this.model!, positions, this.topN, c.streamedChars);
  }

  /** vLLM's first chat chunks: each choice's role, then the echoed last message. */
  private sendRoles(): void {
    this.rolesSent = true;
    let text = '';
    for (const c of this.choices) {
      text += this.chunk([
        {
          index: c.index,
          delta: { role: 'assistant', content: '' },
          logprobs: null,
          finish_reason: null,
        },
      ]);
    }
    if (this.echo) {
      for (const c of this.choices) {
        text += this.chunk([
          { index: c.index, delta: { content: this.echo }, logprobs: null, finish_reason: null },
        ]);
      }
    }
    this.out.write(text);
  }

  private writeStep(c: Choice, step: ChoiceStep): void {
    const { chat, echo } = this;
    if (chat && !this.rolesSent) this.sendRoles();
    const at = c.positions?.at(-1);
    const first = !c.started;
    c.started = true;
    const echoNow = !chat && first && this.gen.sampling.echo;
    if (!step.finish && this.topN === null && !echoNow) {
      const textJson =
        step.delta === step.token.text ? step.token.textJson : JSON.stringify(step.delta);
      this.out.write(this.plainChunk(c.index, textJson));
      c.streamedChars += step.delta.length;
      return;
    }
    const echoed = echoNow && this.echoPositions ? this.echoPositions : [];
    const positions = [...echoed, ...(at ? [at] : [])];
    const logprobs = this.streamLogprobs(c, positions);
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
    this.out.write(this.chunk([choice]));
  }

  private usage(): Usage {
    const { choices, promptTokens } = this;
    const completion = choices.reduce((sum, c) => sum + c.text.tokens, 0);
    return {
      prompt_tokens: promptTokens.length,
      completion_tokens: completion,
      total_tokens: promptTokens.length + completion,
      prompt_tokens_details: {
        cached_tokens: this.ctx.liar ? promptTokens.length : choices[0]!.cachedTokens,
      },
    };
  }

  private finishChoice(c: Choice, reason: FinishReason): void {
    if (c.done) return;
    c.done = true;
    this.open--;
    this.ctx.metrics.requestFinished({
      times: c.times,
      promptTokens: this.promptTokens.length,
      cachedTokens: c.cachedTokens,
      outputTokens: c.text.tokens,
      reason,
    });
    if (this.open !== 0 || reason === 'abort') return;
    // A remote decode's answer names its held blocks: the core's finish (same step) brings them.
    if (reason === 'length' && this.transfer?.kvTransfer === 'remote-decode' && !this.holdKnown) {
      this.respondOnHold = true;
      return;
    }
    this.respond();
  }

  private respond(): void {
    const { gen, choices, res } = this;
    this.ended = true;
    if (gen.stream) {
      this.out.end(`${gen.includeUsage ? this.chunk([], this.usage()) : ''}${SSE_DONE}`);
      return;
    }
    const body = JSON.stringify({
      id: this.responseId,
      object: this.chat ? 'chat.completion' : 'text_completion',
      created: this.created,
      model: this.modelName,
      choices: choices.map((c) => this.finalChoice(c)),
      usage: this.usage(),
      ...this.transfer?.responseFields?.(choices[0]!.engineId, choices[0]!.heldBlockIds),
    });
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  }

  private finalChoice(c: Choice) {
    const { model, topN } = this;
    const finish: Finish = c.text.finish ?? { reason: 'length', stopReason: null };
    const text = this.echo + c.text.text;
    if (this.chat) {
      return {
        index: c.index,
        message: { role: 'assistant', content: text, tool_calls: [] },
        logprobs: topN === null ? null : { content: chatLogprobs(model!, c.positions!, topN) },
        finish_reason: finish.reason,
        stop_reason: finish.stopReason,
      };
    }
    const positions = [...(this.echoPositions ?? []), ...(c.positions ?? [])];
    return {
      index: c.index,
      text,
      logprobs: topN === null ? null : completionLogprobs(model!, positions, topN, 0),
      finish_reason: finish.reason,
      stop_reason: finish.stopReason,
    };
  }

  /** Ends everything still running: the engine fails, or the client went away. */
  private abortAll(): void {
    this.ended = true;
    for (const c of this.choices) {
      if (c.done) continue;
      this.ctx.driver.abort(c.engineId);
      this.finishChoice(c, 'abort');
    }
  }

  /** A token of choice `c` from the engine: timings, text, log-probabilities, stream, stop. */
  private onToken(c: Choice, index: number, tokenId: number | undefined): void {
    // Recomputation after a preemption can repeat an index: each token counts once.
    if (c.done || this.ended || index !== c.text.tokens) return;
    if (c.source instanceof EmittedTokens) c.source.offer(tokenId!);
    const nowMs = performance.now();
    if (c.times.firstTokenMs === null) {
      this.ctx.metrics.observeTtft(this.toModeledS(nowMs - this.arrivalMs));
      c.times.firstTokenMs = nowMs;
    } else this.ctx.metrics.observeItl(this.toModeledS(nowMs - c.times.lastTokenMs!));
    c.times.lastTokenMs = nowMs;
    const step = c.text.step();
    c.positions?.push({
      tokenId: step.token.tokenId,
      text: step.token.text,
      logprob: this.model!.rankLogprobs[step.token.rank]!,
      offset: step.token.offset,
    });
    if (this.gen.stream) this.writeStep(c, step);
    if (!step.finish) return;
    // A stop ends the choice before max_tokens: the engine stops it and frees its KV now.
    if (step.finish.reason === 'stop') this.ctx.driver.abort(c.engineId);
    this.finishChoice(c, step.finish.reason);
  }

  private sinkFor(c: Choice): RequestSink {
    return {
      onScheduled: (atMs, cachedTokens) => {
        c.times.scheduledMs ??= atMs;
        const external = this.transfer?.externalTokensOf(c.engineId) ?? 0;
        c.cachedTokens = Math.max(0, cachedTokens - external);
      },
      onToken: (index, tokenId) => this.onToken(c, index, tokenId),
      onFinish: (finished) => {
        // The core ends a choice at max_tokens, after its last token made it finish here already.
        if (c.index === 0) {
          c.heldBlockIds = finished.heldBlockIds ?? null;
          this.holdKnown = true;
          if (this.respondOnHold && !this.ended) {
            this.respondOnHold = false;
            this.respond();
            return;
          }
        }
        if (c.done || this.ended) return;
        c.cachedTokens = finished.cachedTokens;
        this.finishChoice(c, 'length');
      },
      onFail: (err) => {
        if (this.ended) return;
        this.abortAll();
        if (this.res.headersSent) this.res.destroy(err);
        else sendError(this.res, toApiError(err));
      },
    };
  }

  /** Choice `c`'s engine request: choice 0 carries the P/D transfer. */
  private engineRequest(c: Choice): Omit<EngineRequest, 'arrivalMs'> {
    const { ctx, gen, transfer, knobs } = this;
    return {
      id: c.engineId,
      promptTokens: this.promptTokens,
      maxNewTokens: gen.maxTokens,
      ...(gen.cacheSalt !== null && { cacheSalt: gen.cacheSalt }),
      ...(gen.loraName !== null && { loraName: gen.loraName }),
      ...(gen.priority !== null && { priority: gen.priority }),
      ...(transfer !== null &&
        transfer.kvTransfer !== 'none' &&
        c.index === 0 && { kvTransfer: transfer.kvTransfer }),
      ...(transfer?.client !== undefined && c.index === 0 && { transferClient: transfer.client }),
      ...(this.output !== null && {
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
    };
  }

  /** Tells the liar of the prompt and submits every choice; a refusal aborts those already sent. */
  submitAll(): void {
    const { ctx, gen, choices } = this;
    ctx.liar?.onPrompt(this.promptTokens, { cacheSalt: gen.cacheSalt, loraName: gen.loraName });
    for (const c of choices) {
      try {
        ctx.driver.submit(this.engineRequest(c), this.sinkFor(c));
      } catch (err) {
        // Only the first choice can be refused (they share the prompt); nothing else was sent.
        for (const sent of choices.slice(0, c.index)) ctx.driver.abort(sent.engineId);
        throw err;
      }
    }
  }

  /** Watches for a disconnect and opens a stream's response. */
  listen(): void {
    // 'close' also fires after a normal end; only an early one is a disconnect.
    this.res.on('close', () => {
      if (!this.ended) this.abortAll();
    });
    if (this.gen.stream) {
      this.res.writeHead(200, SSE_HEADERS);
      this.res.flushHeaders();
    }
  }
}

/** The number in a server's engine request id (`req-12` -> 12), to vary unseeded draws. */
function seqOfId(engineId: string): number {
  const n = Number.parseInt(engineId.slice(engineId.lastIndexOf('-') + 1), 10);
  return Number.isFinite(n) ? n : 0;
}
