/**
 * A small stand-in for llama.cpp's llama-server, on a real socket: `/health`, `/props`,
 * `/slots`, `/metrics` (llamacpp:* names), `/tokenize` (reads `content`, as upstream does:
 * a `{prompt}` body gets `{tokens: []}`), `/apply-template`, `/v1/models` and the two
 * completion endpoints with `timings.cache_n` from its slot caches (llamaSlots.ts). Each
 * request holds its slot `holdMs`; with every slot busy it waits (deferred). With `host`, prompts
 * leave their slots into a host prompt cache and are loaded back from it, as upstream's
 * `--cache-ram` keeps them (llamaSlots.ts).
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chatInput } from '../../src/tokenizer/chat.ts';
import { loadPromptTokenizer, type PromptTokenizer } from '../../src/tokenizer/promptTokenizer.ts';
import { type HostCacheOptions, TokenSlots } from './llamaSlots.ts';

export interface FakeLlamaOptions {
  slots?: number;
  nCtx?: number;
  holdMs?: number;
  /** `--metrics`: without it `/metrics` answers 501 as upstream does. */
  metrics?: boolean;
  tokenizer?: PromptTokenizer;
  /** A host prompt cache (`--cache-ram`), its bound in tokens; absent: none (`--cache-ram 0`). */
  host?: HostCacheOptions;
}

export interface FakeLlama {
  url: string;
  slots: TokenSlots;
  /** Every served request: prompt tokens and the tokens its slot reused. */
  served: { promptTokens: number; cached: number; slot: number }[];
  close(): Promise<void>;
}

export async function startFakeLlama(options: FakeLlamaOptions = {}): Promise<FakeLlama> {
  const nSlots = options.slots ?? 4;
  const holdMs = options.holdMs ?? 5;
  const tok =
    options.tokenizer ?? loadPromptTokenizer({ tokenizer: 'builtin', chatTemplate: null });
  const slots = new TokenSlots(nSlots, 0.1, options.host ?? null);
  const served: FakeLlama['served'] = [];
  const deferred: (() => void)[] = [];
  // Rendered chats: their text tokenizes to the chat's ids (special tokens parsed).
  const rendered = new Map<string, number[]>();
  let promptTotal = 0;

  const render = (messages: unknown): string => {
    const chat = chatInput(messages as Parameters<typeof chatInput>[0]);
    const text = tok.renderChat(chat);
    rendered.set(text, tok.encodeChat(chat));
    return text;
  };
  const tokenize = (content: string, addSpecial: boolean): number[] =>
    rendered.get(content) ?? tok.encodePrompt(content, addSpecial);

  async function generate(prompt: number[]): Promise<{ cached: number; slot: number }> {
    for (;;) {
      const got = slots.take(prompt);
      if (got) {
        await new Promise((r) => setTimeout(r, holdMs));
        slots.release(got.slot);
        deferred.shift()?.();
        return got;
      }
      await new Promise<void>((r) => deferred.push(r));
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse, body: string): Promise<void> {
    const json = (status: number, value: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    const url = req.url ?? '/';
    if (url === '/health') return json(200, { status: 'ok' });
    if (url === '/props') {
      return json(200, {
        default_generation_settings: { id: 0, n_ctx: options.nCtx ?? 4096, is_processing: false },
        total_slots: nSlots,
        model_alias: 'tiny',
        model_path: '/tmp/tiny.gguf',
        build_info: 'fake',
      });
    }
    if (url === '/slots') {
      return json(
        200,
        slots.slots.map((s, id) => ({ id, n_ctx: options.nCtx ?? 4096, is_processing: s.busy })),
      );
    }
    if (url === '/metrics') {
      if (!options.metrics) {
        return json(501, {
          error: {
            code: 501,
            message: 'This server does not support metrics endpoint. Start it with `--metrics`',
            type: 'not_supported_error',
          },
        });
      }
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      res.end(
        [
          '# TYPE llamacpp:prompt_tokens_total counter',
          `llamacpp:prompt_tokens_total ${promptTotal}`,
          '# TYPE llamacpp:requests_processing gauge',
          `llamacpp:requests_processing ${slots.busy}`,
          '# TYPE llamacpp:requests_deferred gauge',
          `llamacpp:requests_deferred ${deferred.length}`,
          '',
        ].join('\n'),
      );
      return;
    }
    if (url === '/v1/models') {
      return json(200, {
        object: 'list',
        data: [{ id: 'tiny', object: 'model', owned_by: 'llamacpp' }],
      });
    }
    const parsed = body ? (JSON.parse(body) as Record<string, unknown>) : {};
    if (url === '/tokenize') {
      const content = typeof parsed.content === 'string' ? parsed.content : '';
      return json(200, { tokens: content ? tokenize(content, parsed.add_special === true) : [] });
    }
    if (url === '/apply-template') return json(200, { prompt: render(parsed.messages) });
    if (url === '/v1/chat/completions' || url === '/v1/completions') {
      const chat = url === '/v1/chat/completions';
      const text = chat ? render(parsed.messages) : String(parsed.prompt ?? '');
      const prompt = tokenize(text, true);
      promptTotal += prompt.length;
      const { cached, slot } = await generate(prompt);
      served.push({ promptTokens: prompt.length, cached, slot });
      const timings = {
        cache_n: cached,
        prompt_n: prompt.length - cached,
        prompt_ms: 1,
        predicted_n: 1,
        predicted_ms: 1,
      };
      const usage = {
        prompt_tokens: prompt.length,
        completion_tokens: 1,
        total_tokens: prompt.length + 1,
        prompt_tokens_details: { cached_tokens: cached },
      };
      const id = `chatcmpl-${served.length}`;
      const created = Math.floor(Date.now() / 1000);
      if (parsed.stream === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const delta = chat
          ? {
              choices: [
                { index: 0, delta: { role: 'assistant', content: 'x' }, finish_reason: null },
              ],
            }
          : { choices: [{ index: 0, text: 'x', finish_reason: null }] };
        const object = chat ? 'chat.completion.chunk' : 'text_completion';
        res.write(`data: ${JSON.stringify({ id, object, created, model: 'tiny', ...delta })}\n\n`);
        const end = chat
          ? { choices: [{ index: 0, delta: {}, finish_reason: 'length' }] }
          : { choices: [{ index: 0, text: '', finish_reason: 'length' }] };
        res.write(
          `data: ${JSON.stringify({ id, object, created, model: 'tiny', ...end, usage, timings })}\n\n`,
        );
        res.end('data: [DONE]\n\n');
        return;
      }
      const choice = chat
        ? { index: 0, message: { role: 'assistant', content: 'x' }, finish_reason: 'length' }
        : { index: 0, text: 'x', finish_reason: 'length' };
      return json(200, {
        id,
        object: chat ? 'chat.completion' : 'text_completion',
        created,
        model: 'tiny',
        choices: [choice],
        usage,
        timings,
      });
    }
    json(404, { error: { code: 404, message: 'File Not Found', type: 'not_found_error' } });
  }

  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => {
      body += c;
    });
    req.on('end', () => {
      handle(req, res, body).catch((err: Error) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { code: 500, message: err.message } }));
      });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    slots,
    served,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close').catch(() => {});
    },
  };
}
