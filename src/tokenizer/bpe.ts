/**
 * A loader for Hugging Face `tokenizer.json` files of the byte-level BPE family (GPT-2, Llama 3,
 * Qwen 2, Mistral Nemo, DeepSeek...): added tokens matched first, NFC/NFKC normalizers, Split /
 * ByteLevel / Digits pre-tokenizers, rank-ordered merges (string or pair form, `ignore_merges`),
 * and a TemplateProcessing post-processor for the BOS. No npm package reads this format without
 * native code or a download, so it is implemented here. Other model types (Unigram, WordPiece)
 * and metaspace pre-tokenizers are refused with ERR_TOKENIZER rather than tokenized wrongly.
 */
import { readFileSync } from 'node:fs';
import { TokenizerError } from './errors.ts';

export interface BpeTokenizer {
  readonly name: string;
  readonly vocabSize: number;
  encode(text: string, opts?: { addSpecialTokens?: boolean }): number[];
}

type Json = Record<string, unknown>;
type PreTokenize = (pieces: string[]) => string[];

const fail = (message: string): TokenizerError => new TokenizerError('ERR_TOKENIZER', message);

/** Caps the per-word merge cache (typical prompts reuse a few thousand words). */
const WORD_CACHE_MAX = 100_000;

export function loadBpeTokenizer(path: string): BpeTokenizer {
  let doc: Json;
  try {
    doc = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw fail(`--tokenizer ${path}: ${(err as Error).message}`);
  }
  return makeBpeTokenizer(doc, path);
}

export function makeBpeTokenizer(doc: Json, name = 'tokenizer.json'): BpeTokenizer {
  const model = doc.model as Json | undefined;
  if (model?.type !== 'BPE') {
    throw fail(
      `${name}: model type '${String(model?.type)}' is not supported (byte-level BPE only)`,
    );
  }
  const vocab = new Map<string, number>(Object.entries(model.vocab as Record<string, number>));
  const ranks = new Map<string, number>();
  (model.merges as (string | [string, string])[]).forEach((m, rank) => {
    const [a, b] = typeof m === 'string' ? splitMerge(m) : m;
    ranks.set(`${a}\u0001${b}`, rank);
  });
  const added = ((doc.added_tokens as Json[] | undefined) ?? []).map((t) => ({
    id: t.id as number,
    content: t.content as string,
  }));
  for (const t of added) vocab.set(t.content, t.id);
  const addedById = new Map(added.map((t) => [t.content, t.id]));
  const addedRe =
    added.length === 0
      ? null
      : new RegExp(
          [...added]
            .sort((x, y) => y.content.length - x.content.length)
            .map((t) => escapeRegExp(t.content))
            .join('|'),
          'g',
        );
  const normalize = makeNormalizer(doc.normalizer as Json | null | undefined);
  const preTokenize = makePreTokenizer(doc.pre_tokenizer as Json | null | undefined);
  const special = bosEos(doc.post_processor as Json | null | undefined);
  const ignoreMerges = model.ignore_merges === true;
  const unkId = typeof model.unk_token === 'string' ? vocab.get(model.unk_token) : undefined;
  let vocabSize = 0;
  for (const id of vocab.values()) vocabSize = Math.max(vocabSize, id + 1);

  const cache = new Map<string, number[]>();
  const bpeWord = (word: string): number[] => {
    const hit = cache.get(word);
    if (hit) return hit;
    const ids = mergeWord(word, vocab, ranks, ignoreMerges, unkId);
    if (cache.size >= WORD_CACHE_MAX) cache.clear();
    cache.set(word, ids);
    return ids;
  };
  const encodeSegment = (text: string, out: number[]): void => {
    for (const piece of preTokenize([normalize(text)])) {
      if (piece.length > 0) for (const id of bpeWord(toByteChars(piece))) out.push(id);
    }
  };

  return {
    name,
    vocabSize,
    encode(text, opts = {}) {
      const out: number[] = [];
      if (opts.addSpecialTokens) out.push(...special.before);
      let last = 0;
      if (addedRe) {
        addedRe.lastIndex = 0;
        for (let m = addedRe.exec(text); m !== null; m = addedRe.exec(text)) {
          if (m.index > last) encodeSegment(text.slice(last, m.index), out);
          out.push(addedById.get(m[0])!);
          last = m.index + m[0].length;
        }
      }
      if (last < text.length) encodeSegment(text.slice(last), out);
      if (opts.addSpecialTokens) out.push(...special.after);
      return out;
    },
  };
}

function splitMerge(m: string): [string, string] {
  const i = m.indexOf(' ', 1);
  if (i < 0) throw fail(`merge '${m}' has no separator`);
  return [m.slice(0, i), m.slice(i + 1)];
}

/** Lowest-rank adjacent pair merged first, until no pair has a rank (the BPE algorithm). */
function mergeWord(
  word: string,
  vocab: Map<string, number>,
  ranks: Map<string, number>,
  ignoreMerges: boolean,
  unkId: number | undefined,
): number[] {
  if (ignoreMerges) {
    const whole = vocab.get(word);
    if (whole !== undefined) return [whole];
  }
  const parts = Array.from(word);
  for (;;) {
    let best = -1;
    let bestRank = Number.POSITIVE_INFINITY;
    for (let i = 0; i < parts.length - 1; i++) {
      const rank = ranks.get(`${parts[i]}\u0001${parts[i + 1]}`);
      if (rank !== undefined && rank < bestRank) {
        bestRank = rank;
        best = i;
      }
    }
    if (best < 0) break;
    parts.splice(best, 2, parts[best]! + parts[best + 1]!);
  }
  const ids: number[] = [];
  for (const p of parts) {
    const id = vocab.get(p) ?? unkId;
    if (id !== undefined) ids.push(id);
  }
  return ids;
}

// GPT-2's reversible byte -> printable character map.
const BYTE_CHARS: string[] = (() => {
  const direct: number[] = [];
  for (let b = 33; b <= 126; b++) direct.push(b);
  for (let b = 161; b <= 172; b++) direct.push(b);
  for (let b = 174; b <= 255; b++) direct.push(b);
  const chars = new Array<string>(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    chars[b] = String.fromCharCode(direct.includes(b) ? b : 256 + extra++);
  }
  return chars;
})();

function toByteChars(text: string): string {
  let out = '';
  for (const b of Buffer.from(text, 'utf8')) out += BYTE_CHARS[b];
  return out;
}

function makeNormalizer(n: Json | null | undefined): (s: string) => string {
  if (!n) return (s) => s;
  switch (n.type) {
    case 'NFC':
    case 'NFKC':
    case 'NFD':
    case 'NFKD': {
      const form = n.type as 'NFC';
      return (s) => s.normalize(form);
    }
    case 'Sequence': {
      const steps = (n.normalizers as Json[]).map(makeNormalizer);
      return (s) => steps.reduce((acc, f) => f(acc), s);
    }
    default:
      throw fail(`normalizer '${String(n.type)}' is not supported`);
  }
}

/** GPT-2's split pattern, used by ByteLevel when `use_regex` is on. */
const GPT2_PATTERN =
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

function makePreTokenizer(p: Json | null | undefined): PreTokenize {
  if (!p) return (pieces) => pieces;
  switch (p.type) {
    case 'Sequence': {
      const steps = (p.pretokenizers as Json[]).map(makePreTokenizer);
      return (pieces) => steps.reduce((acc, f) => f(acc), pieces);
    }
    case 'ByteLevel': {
      const re = p.use_regex === false ? null : new RegExp(GPT2_PATTERN, 'gu');
      const prefix = p.add_prefix_space === true;
      return (pieces) =>
        pieces.flatMap((s) => {
          const t = prefix && !s.startsWith(' ') ? ` ${s}` : s;
          return re ? splitIsolated(t, re) : [t];
        });
    }
    case 'Split': {
      const pattern = p.pattern as { Regex?: string; String?: string };
      const re =
        pattern.Regex !== undefined
          ? new RegExp(toJsRegex(pattern.Regex), 'gu')
          : new RegExp(escapeRegExp(pattern.String ?? ''), 'gu');
      if (p.invert === true) throw fail('Split with invert is not supported');
      if (p.behavior === 'Isolated') return (pieces) => pieces.flatMap((s) => splitIsolated(s, re));
      if (p.behavior === 'Removed')
        return (pieces) => pieces.flatMap((s) => s.split(re).filter(Boolean));
      throw fail(`Split behavior '${String(p.behavior)}' is not supported`);
    }
    case 'Digits': {
      const re = p.individual_digits === true ? /\p{N}/gu : /\p{N}+/gu;
      return (pieces) => pieces.flatMap((s) => splitIsolated(s, re));
    }
    default:
      throw fail(`pre-tokenizer '${String(p.type)}' is not supported`);
  }
}

/** Matches and the text between them, in order, none empty. */
function splitIsolated(s: string, re: RegExp): string[] {
  const out: string[] = [];
  let last = 0;
  re.lastIndex = 0;
  for (let m = re.exec(s); m !== null; m = re.exec(s)) {
    if (m[0].length === 0) {
      re.lastIndex++;
      continue;
    }
    if (m.index > last) out.push(s.slice(last, m.index));
    out.push(m[0]);
    last = m.index + m[0].length;
  }
  if (last < s.length) out.push(s.slice(last));
  return out;
}

/**
 * Oniguruma patterns as JS: `(?i:...)` groups (no JS support before Node 23) become groups with
 * each ASCII letter as a two-case class; possessive quantifiers lose their `+`.
 */
export function toJsRegex(pattern: string): string {
  let out = '';
  let i = 0;
  let inClass = false;
  while (i < pattern.length) {
    if (!inClass && pattern.startsWith('(?i:', i)) {
      const group = ignoreCaseGroup(pattern, i + 4);
      out += `(?:${group.text})`;
      i = group.end + 1;
      continue;
    }
    const p = piece(pattern, i, inClass);
    out += p.text;
    i += p.text.length;
    inClass = p.inClass;
    const quantifier = p.text.length === 1 && '+*?}'.includes(p.text);
    if (!inClass && quantifier && pattern[i] === '+') i++;
  }
  return out;
}

/** The body of a `(?i:` group from `start` to its closing parenthesis (`end`), letters as classes. */
function ignoreCaseGroup(pattern: string, start: number): { text: string; end: number } {
  let depth = 1;
  let text = '';
  let inClass = false;
  let j = start;
  while (j < pattern.length) {
    const p = piece(pattern, j, inClass);
    if (!inClass && p.text === '(') depth++;
    else if (!inClass && p.text === ')' && --depth === 0) break;
    inClass = p.inClass;
    const letter = p.text.length === 1 && !inClass && /[a-zA-Z]/.test(p.text);
    text += letter ? `[${p.text.toLowerCase()}${p.text.toUpperCase()}]` : p.text;
    j += p.text.length;
  }
  return { text, end: j };
}

/** The unit at `i` (an escape whole, or one character) and whether a class is open after it. */
function piece(pattern: string, i: number, inClass: boolean): { text: string; inClass: boolean } {
  const c = pattern[i]!;
  if (c === '\\') return { text: pattern.slice(i, i + escapeLength(pattern, i)), inClass };
  return { text: c, inClass: c === '[' ? true : c === ']' ? false : inClass };
}

/** Characters in the escape at `i`: `\p{...}` as one unit, any other escape as two. */
function escapeLength(pattern: string, i: number): number {
  const kind = pattern[i + 1];
  if ((kind === 'p' || kind === 'P') && pattern[i + 2] === '{') {
    const close = pattern.indexOf('}', i + 3);
    if (close > 0) return close - i + 1;
  }
  return 2;
}

function bosEos(p: Json | null | undefined): { before: number[]; after: number[] } {
  const none = { before: [], after: [] };
  if (!p) return none;
  if (p.type === 'Sequence') {
    for (const step of p.processors as Json[]) {
      const r = bosEos(step);
      if (r.before.length > 0 || r.after.length > 0) return r;
    }
    return none;
  }
  if (p.type !== 'TemplateProcessing') return none;
  const specials = (p.special_tokens ?? {}) as Record<string, { ids: number[] }>;
  const before: number[] = [];
  const after: number[] = [];
  let seenSequence = false;
  for (const item of p.single as Json[]) {
    if (item.Sequence) seenSequence = true;
    const st = item.SpecialToken as { id: string } | undefined;
    if (st) (seenSequence ? after : before).push(...(specials[st.id]?.ids ?? []));
  }
  return { before, after };
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
