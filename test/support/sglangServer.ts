/**
 * A stand-in for an SGLang server (python/sglang/srt/entrypoints/http_server.py) on 127.0.0.1
 * port 0: `/health`, `/v1/models`, `/get_model_info`, `/metrics` with SGLang's gauge names
 * (metrics/collector.py), `/tokenize` (text only, as entrypoints/openai/protocol.py), and
 * `/v1/completions` and `/v1/chat/completions` (non-streaming). Its KV events go out on a ZMQ
 * PUB socket framed as SGLang's ZmqEventPublisher frames them (topic "", 8-byte sequence,
 * msgpack payload; replay without a topic frame), encoded from SGLang's struct definitions by
 * the independent msgspec encoder. The cache behaves as SGLang's radix cache: a prompt's full
 * pages are stored at prefill (one coalesced BlockStored whose parent is the last cached page),
 * and past `capacityPages` the least recently used leaf node is evicted (one BlockRemoved).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chatInput } from '../../src/tokenizer/chat.ts';
import {
  BUILTIN_TOKENIZER,
  loadPromptTokenizer,
  type PromptTokenizer,
} from '../../src/tokenizer/promptTokenizer.ts';
import { encode, type PyStruct } from './msgspec.ts';
import { pageDigest, publishedHash, sglBatch, sglRemoved, sglStored } from './sglangWire.ts';
import { FakeVllmPublisher } from './vllmPublisher.ts';

export interface FakeSglangOptions {
  model?: string;
  pageSize?: number;
  capacityPages?: number;
  maxModelLen?: number;
}

interface Node {
  pages: string[];
  parent: Node | null;
  children: Set<Node>;
  lastUsed: number;
}

/** SGLang's radix cache, reduced to what its events show: pages, nodes, leaf-first eviction. */
export class FakeRadixCache {
  readonly #pageSize: number;
  readonly #capacity: number;
  readonly #nodeOf = new Map<string, Node>();
  readonly #hashOf = new Map<string, bigint>();
  #clock = 0;

  constructor(pageSize: number, capacityPages: number) {
    this.#pageSize = pageSize;
    this.#capacity = capacityPages;
  }

  get pages(): number {
    return this.#nodeOf.size;
  }

  /** Caches the full pages of `tokens`; returns the events and the tokens already cached. */
  insert(tokens: readonly number[]): { events: PyStruct[]; cachedTokens: number } {
    const p = this.#pageSize;
    const now = ++this.#clock;
    let prior: Buffer | null = null;
    let parent: Node | null = null;
    let matched = 0;
    const fresh: { hex: string; hash: bigint }[] = [];
    for (let i = 0; i + p <= tokens.length; i += p) {
      const digest = pageDigest(tokens.slice(i, i + p), prior);
      prior = digest;
      const hex = digest.toString('hex');
      const node = this.#nodeOf.get(hex);
      if (node && fresh.length === 0) {
        node.lastUsed = now;
        parent = node;
        matched++;
      } else fresh.push({ hex, hash: publishedHash(digest) });
    }
    const events: PyStruct[] = [];
    if (fresh.length > 0) {
      const node: Node = {
        pages: fresh.map((f) => f.hex),
        parent,
        children: new Set(),
        lastUsed: now,
      };
      parent?.children.add(node);
      for (const f of fresh) {
        this.#nodeOf.set(f.hex, node);
        this.#hashOf.set(f.hex, f.hash);
      }
      const parentHex = matched > 0 ? pageHex(tokens, p, matched - 1) : null;
      events.push(
        sglStored({
          hashes: fresh.map((f) => f.hash),
          parent: parentHex === null ? null : this.#hashOf.get(parentHex)!,
          tokens: tokens.slice(matched * p, (matched + fresh.length) * p),
          pageSize: p,
        }),
      );
      events.push(...this.#evict(node));
    }
    return { events, cachedTokens: matched * p };
  }

  /** Least recently used leaves go until the pages fit (never `keep`, just stored). */
  #evict(keep: Node): PyStruct[] {
    const out: PyStruct[] = [];
    while (this.#nodeOf.size > this.#capacity) {
      let victim: Node | null = null;
      for (const node of new Set(this.#nodeOf.values())) {
        if (node === keep || node.children.size > 0) continue;
        if (!victim || node.lastUsed < victim.lastUsed) victim = node;
      }
      if (!victim) break;
      victim.parent?.children.delete(victim);
      out.push(sglRemoved(victim.pages.map((hex) => this.#hashOf.get(hex)!)));
      for (const hex of victim.pages) {
        this.#nodeOf.delete(hex);
        this.#hashOf.delete(hex);
      }
    }
    return out;
  }
}

/** The hex digest of page `index` of `tokens` (recomputed along the chain). */
function pageHex(tokens: readonly number[], p: number, index: number): string {
  let prior: Buffer | null = null;
  for (let i = 0; i <= index; i++) prior = pageDigest(tokens.slice(i * p, (i + 1) * p), prior);
  return prior!.toString('hex');
}

export class FakeSglangServer {
  /** Gauges its /metrics reports. */
  running = 0;
  queued = 0;
  tokenUsage = 0;
  completions = 0;
  readonly cache: FakeRadixCache;
  readonly #server: Server;
  readonly #pub: FakeVllmPublisher;
  readonly #prompts: PromptTokenizer;
  readonly #model: string;
  readonly #maxModelLen: number;

  private constructor(server: Server, pub: FakeVllmPublisher, o: Required<FakeSglangOptions>) {
    this.#server = server;
    this.#pub = pub;
    this.#model = o.model;
    this.#maxModelLen = o.maxModelLen;
    this.cache = new FakeRadixCache(o.pageSize, o.capacityPages);
    this.#prompts = loadPromptTokenizer({ tokenizer: BUILTIN_TOKENIZER, chatTemplate: null });
    server.on('request', (req, res) => void this.#handle(req, res));
  }

  static async start(options: FakeSglangOptions = {}): Promise<FakeSglangServer> {
    const o: Required<FakeSglangOptions> = {
      model: options.model ?? 'sglang-model',
      pageSize: options.pageSize ?? 1,
      capacityPages: options.capacityPages ?? 100_000,
      maxModelLen: options.maxModelLen ?? 32_768,
    };
    const pub = await FakeVllmPublisher.open('no-topic');
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return new FakeSglangServer(server, pub, o);
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  get eventsEndpoint(): string {
    return this.#pub.endpoint;
  }

  get replayEndpoint(): string {
    return this.#pub.replayEndpoint;
  }

  /** Caches `tokens` as if an earlier request had (its events published); returns the seq. */
  async warm(tokens: readonly number[]): Promise<bigint | null> {
    const { events } = this.cache.insert(tokens);
    return events.length > 0 ? this.#publish(events) : null;
  }

  /** An empty batch (SGLang publishes none, but a test may need the socket's join confirmed). */
  publishEmpty(): Promise<bigint> {
    return this.#publish([]);
  }

  resend(seq: bigint): Promise<void> {
    return this.#pub.resend(seq);
  }

  #publish(events: PyStruct[]): Promise<bigint> {
    return this.#pub.publish(encode(sglBatch(events)));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    const body = req.method === 'POST' ? await readJson(req) : null;
    if (path === '/health') return send(res, 200, '');
    if (path === '/v1/models') {
      return sendJson(res, 200, {
        object: 'list',
        data: [
          {
            id: this.#model,
            object: 'model',
            created: 0,
            owned_by: 'sglang',
            root: this.#model,
            max_model_len: this.#maxModelLen,
          },
        ],
      });
    }
    if (path === '/get_model_info') {
      return sendJson(res, 200, {
        model_path: this.#model,
        tokenizer_path: this.#model,
        is_generation: true,
      });
    }
    if (path === '/metrics') return send(res, 200, this.#metrics(), 'text/plain; version=0.0.4');
    if (path === '/tokenize' && body) return this.#tokenize(body, res);
    if ((path === '/v1/completions' || path === '/v1/chat/completions') && body) {
      return this.#complete(path === '/v1/chat/completions', body, res);
    }
    return sendJson(res, 404, { detail: 'Not Found' });
  }

  #metrics(): string {
    const labels = `engine_type="unified",model_name="${this.#model}",pp_rank="0",tp_rank="0"`;
    return [
      '# HELP sglang:num_running_reqs The number of running requests.',
      '# TYPE sglang:num_running_reqs gauge',
      `sglang:num_running_reqs{${labels}} ${this.running.toFixed(1)}`,
      '# HELP sglang:num_queue_reqs The number of requests in the waiting queue.',
      '# TYPE sglang:num_queue_reqs gauge',
      `sglang:num_queue_reqs{${labels}} ${this.queued.toFixed(1)}`,
      '# HELP sglang:token_usage The token usage.',
      '# TYPE sglang:token_usage gauge',
      `sglang:token_usage{${labels}} ${this.tokenUsage}`,
      '# HELP sglang:cache_hit_rate The prefix cache hit rate.',
      '# TYPE sglang:cache_hit_rate gauge',
      `sglang:cache_hit_rate{${labels}} 0.0`,
      '',
    ].join('\n');
  }

  #tokenize(body: Record<string, unknown>, res: ServerResponse): undefined {
    const add = body.add_special_tokens !== false;
    const { prompt } = body;
    if (typeof prompt === 'string') {
      const tokens = this.#prompts.encodePrompt(prompt, add);
      return sendJson(res, 200, { tokens, count: tokens.length, max_model_len: this.#maxModelLen });
    }
    if (Array.isArray(prompt) && prompt.every((p) => typeof p === 'string')) {
      const tokens = prompt.map((p) => this.#prompts.encodePrompt(p, add));
      return sendJson(res, 200, {
        tokens,
        count: tokens.map((t) => t.length),
        max_model_len: this.#maxModelLen,
      });
    }
    // FastAPI's answer to a body its pydantic model refuses.
    return sendJson(res, 422, {
      detail: [{ type: 'missing', loc: ['body', 'prompt'], msg: 'Field required' }],
    });
  }

  async #complete(
    chat: boolean,
    body: Record<string, unknown>,
    res: ServerResponse,
  ): Promise<void> {
    let ids: number[];
    if (chat) ids = this.#prompts.encodeChat(chatInput(body.messages as never));
    else if (Array.isArray(body.prompt)) ids = body.prompt as number[];
    else ids = this.#prompts.encodePrompt(String(body.prompt ?? ''));
    this.completions++;
    const { events, cachedTokens } = this.cache.insert(ids);
    if (events.length > 0) await this.#publish(events);
    const usage = {
      prompt_tokens: ids.length,
      completion_tokens: 1,
      total_tokens: ids.length + 1,
      prompt_tokens_details: { cached_tokens: cachedTokens },
    };
    const choice = chat
      ? { index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }
      : { index: 0, text: 'ok', finish_reason: 'stop' };
    sendJson(res, 200, {
      id: `cmpl-${this.completions}`,
      object: chat ? 'chat.completion' : 'text_completion',
      created: 0,
      model: this.#model,
      choices: [choice],
      usage,
    });
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    await this.#pub.close();
  }
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown> | null> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
  } catch {
    return null;
  }
}

function send(res: ServerResponse, status: number, text: string, type = 'text/plain'): undefined {
  res.writeHead(status, { 'content-type': type });
  res.end(text);
}

function sendJson(res: ServerResponse, status: number, json: unknown): undefined {
  send(res, status, JSON.stringify(json), 'application/json');
}
