/**
 * A Hugging Face tokenizer (`tokenizer.json` + `tokenizer_config.json`) on top of
 * `@huggingface/tokenizers`, with a fast path that gives exactly the library's ids.
 *
 * The library's encode splits the text at added tokens, normalizes each section, pre-tokenizes it
 * and runs the model over the pieces; each stage works on its part alone. The fast path keeps
 * that structure and the library's own normalizer and pre-tokenizers, and adds what the library
 * lacks for a router's hot path: a word cache and a section cache (`pieceEncoder.ts`), a BPE
 * merge loop over ids in typed arrays (`bpeMerge.ts`), an early stop once a token limit is
 * passed and resumable work, so a huge prompt never holds the event loop for long. Models the
 * fast path does not cover (WordPiece, Unigram, BPE with word suffixes) use the library as is.
 * `test/tokenizer.hf.test.ts` checks the two paths against each other on random text.
 */
import * as hfLibrary from '@huggingface/tokenizers';
import { type AddedToken, AddedTokens } from './addedTokens.ts';
import { BYTE_CHARS, utf8Bytes } from './byteLevel.ts';
import { type BpeVocab, type Word, WordsJob } from './bpeWords.ts';
import { TokenizerError } from './errors.ts';
import { PairTable } from './pairTable.ts';
import {
  type Job,
  PieceEncoder,
  type PieceJob,
  type PieceModel,
  type Splitter,
} from './pieceEncoder.ts';
import type { TextTokenizer } from './tokenizer.ts';

type Json = Record<string, unknown>;

interface PreTokenizerLike {
  pre_tokenize_text(text: string, options?: { section_index?: number }): string[];
}

/** The parts of `@huggingface/tokenizers` used here (its bundled typings do not resolve). */
interface LibraryTokenizer {
  encode(text: string, options: { add_special_tokens: boolean }): { ids: number[] };
  decode(ids: number[], options: { skip_special_tokens: boolean }): string;
  id_to_token(id: number): string | undefined;
  normalizer: { normalize(text: string): string } | null;
  model: {
    tokens_to_ids: Map<string, number>;
    unk_token_id?: number;
    unk_token?: string;
    merges: [string, string][];
    ignore_merges: boolean;
    byte_fallback: boolean;
    fuse_unk: boolean;
  };
  post_processor: {
    post_process(tokens: string[], pair: null, addSpecialTokens: boolean): { tokens: string[] };
  } | null;
}

const library = hfLibrary as unknown as {
  Tokenizer: new (tokenizerJson: Json, config: Json) => LibraryTokenizer;
  SequencePreTokenizer: new (config: Json) => PreTokenizerLike;
  SplitPreTokenizer: new (config: Json) => { pattern: RegExp | null };
  ByteLevelPreTokenizer: new (config: Json) => { pattern: RegExp };
};

/** Special ids the post-processor puts around a text. */
interface Wrap {
  before: number[];
  after: number[];
}

export class HfTokenizer implements TextTokenizer {
  readonly name: string;
  readonly vocabSize: number;
  readonly maxCharsPerToken: number | null;
  /** Why the fast path is off for this model (null: it is on). */
  readonly slowPathReason: string | null;
  readonly #lib: LibraryTokenizer;
  readonly #added: AddedTokens;
  readonly #ids: Map<string, number>;
  readonly #unkId: number | undefined;
  readonly #normalize: ((s: string) => string) | null;
  readonly #removeSpace: boolean;
  readonly #lowercase: boolean;
  readonly #pieces: PieceEncoder | null;
  /** ByteLevel as the only pre-tokenizer: a space before each section when asked. */
  readonly #sectionPrefixSpace: boolean;
  readonly #wrap: { true: Wrap | null; false: Wrap | null };
  readonly #specialIds: Set<number>;

  constructor(tokenizerJson: Json, tokenizerConfig: Json, name = 'tokenizer.json') {
    this.name = name;
    try {
      this.#lib = new library.Tokenizer(tokenizerJson, tokenizerConfig);
    } catch (err) {
      throw new TokenizerError('ERR_TOKENIZER', `${name}: ${(err as Error).message}`);
    }
    const lib = this.#lib;
    const model = lib.model;
    this.#ids = model.tokens_to_ids;
    const normalizer = lib.normalizer;
    this.#normalize = normalizer ? (s) => normalizer.normalize(s) : null;
    const addedJson = (tokenizerJson.added_tokens as Json[] | undefined) ?? [];
    const added: AddedToken[] = addedJson.map((t) => {
      const special = t.special === true;
      return {
        id: t.id as number,
        content: t.content as string,
        lstrip: t.lstrip === true,
        rstrip: t.rstrip === true,
        special,
        normalized: typeof t.normalized === 'boolean' ? t.normalized : !special,
      };
    });
    this.#added = new AddedTokens(added, this.#normalize);
    this.#specialIds = new Set(added.filter((t) => t.special).map((t) => t.id));
    this.#unkId = model.unk_token_id;
    this.#removeSpace = tokenizerConfig.remove_space === true;
    this.#lowercase = tokenizerConfig.do_lowercase_and_remove_accent === true;
    let vocabSize = 0;
    let longest = 0;
    for (const [text, id] of this.#ids) {
      vocabSize = Math.max(vocabSize, id + 1);
      longest = Math.max(longest, text.length);
    }
    this.vocabSize = vocabSize;
    this.maxCharsPerToken = this.#charsPerTokenBound(tokenizerJson, longest);
    this.#wrap = { true: this.#wrapOf(true), false: this.#wrapOf(false) };

    const pre = tokenizerJson.pre_tokenizer as Json | null | undefined;
    const preType = pre?.type;
    this.#sectionPrefixSpace =
      preType === 'ByteLevel' && pre?.use_regex !== false && pre?.add_prefix_space === true;
    const problem = this.#fastPathProblem(tokenizerJson);
    this.slowPathReason = problem;
    this.#pieces = problem === null ? this.#makePieceEncoder(tokenizerJson, longest) : null;
  }

  encode(text: string, addSpecialTokens = false): number[] {
    const out: number[] = [];
    this.encodeJob(text, addSpecialTokens, out, Number.POSITIVE_INFINITY).run(
      Number.POSITIVE_INFINITY,
    );
    return out;
  }

  encodeJob(text: string, addSpecialTokens: boolean, out: number[], limitTokens: number): Job {
    const wrap = this.#wrap[`${addSpecialTokens}`];
    if (this.#pieces === null || wrap === null) {
      return oneShot(() => {
        const ids = this.#lib.encode(text, { add_special_tokens: addSpecialTokens }).ids;
        for (const id of ids) out.push(id);
      });
    }
    return new SectionsJob(this.#segments(text), this.#pieces, wrap, out, limitTokens);
  }

  decode(ids: readonly number[], skipSpecialTokens = false): string {
    if (ids.length === 0) return '';
    return this.#lib.decode([...ids], { skip_special_tokens: skipSpecialTokens });
  }

  tokenStrings(ids: readonly number[]): string[] {
    return ids.map((id) => this.#lib.id_to_token(id) ?? '');
  }

  isSpecial(id: number): boolean {
    return this.#specialIds.has(id);
  }

  /** Added token ids and the text between them, normalized, as the library's encode_text. */
  #segments(text: string): Segment[] {
    const added = this.#added;
    const segments: Segment[] = [];
    const sections = added.unnormalized.split(text);
    added.stripAround(sections);
    for (let index = 0; index < sections.length; index++) {
      let section = sections[index]!;
      if (section.length === 0) continue;
      const token = added.byText.get(section);
      if (token) {
        segments.push(token.id);
        continue;
      }
      if (this.#removeSpace) section = section.trim().split(/\s+/).join(' ');
      if (this.#lowercase) section = section.toLowerCase().replace(/\p{M}/gu, '');
      if (this.#normalize) section = this.#normalize(section);
      if (section.length === 0) continue;
      const parts = added.normalized.split(section);
      added.stripAround(parts);
      for (const part of parts) {
        if (part.length === 0) continue;
        const inner = added.byText.get(part);
        if (inner) segments.push(inner.id);
        else {
          const prefixed = this.#sectionPrefixSpace && !part.startsWith(' ') ? ` ${part}` : part;
          segments.push({ text: prefixed, first: index === 0 });
        }
      }
    }
    return segments;
  }

  /** The library's id for a token string (added tokens first, then the vocabulary). */
  #idOf(token: string): number | undefined {
    return this.#added.byText.get(token)?.id ?? this.#ids.get(token) ?? this.#unkId;
  }

  /** The post-processor's tokens around a text, found by processing a sentinel. */
  #wrapOf(addSpecialTokens: boolean): Wrap | null {
    const post = this.#lib.post_processor;
    if (!post) return { before: [], after: [] };
    const sentinel = '\u0000kvroute:text\u0000';
    const tokens = post.post_process([sentinel], null, addSpecialTokens).tokens;
    const at = tokens.indexOf(sentinel);
    if (at < 0 || tokens.lastIndexOf(sentinel) !== at) return null;
    const ids = (list: string[]) => list.map((t) => this.#idOf(t));
    const before = ids(tokens.slice(0, at));
    const after = ids(tokens.slice(at + 1));
    if ([...before, ...after].some((id) => id === undefined)) return null;
    return { before: before as number[], after: after as number[] };
  }

  /**
   * An upper bound on input characters per token: no token spells more than the longest
   * vocabulary string, and a Unicode normalizer at most triples the text it composes. Null when a
   * normalizer may shrink text without bound (strip, replace...): no cheap bound then.
   */
  #charsPerTokenBound(tokenizerJson: Json, longest: number): number | null {
    if (this.#removeSpace || this.#lowercase) return null;
    const normalizer = tokenizerJson.normalizer as Json | null | undefined;
    if (!normalizer) return longest;
    return onlyUnicodeForms(normalizer) ? longest * 3 : null;
  }

  /** Null when the fast path reproduces the library for this model, else why not. */
  #fastPathProblem(tokenizerJson: Json): string | null {
    const model = tokenizerJson.model as Json;
    if (model.type !== 'BPE') return `model type ${String(model.type)}`;
    if (model.end_of_word_suffix || model.continuing_subword_suffix) return 'BPE word suffixes';
    const lib = this.#lib.model;
    if (lib.fuse_unk && this.#unkId !== undefined && !lib.byte_fallback) return 'fuse_unk';
    if (this.#wrap.true === null || this.#wrap.false === null) return 'post-processor';
    const seen = new Set<number>();
    for (const id of this.#ids.values()) {
      if (seen.has(id)) return 'two vocabulary strings share an id';
      seen.add(id);
    }
    return null;
  }

  #makePieceEncoder(tokenizerJson: Json, longest: number): PieceEncoder | null {
    const vocab = this.#bpeVocab(longest);
    if (!vocab) return null;
    const pre = (tokenizerJson.pre_tokenizer as Json | null | undefined) ?? null;
    const { splitter, rest } = splitStage(pre);
    const positionDependent = mentions(pre, 'Metaspace');
    const byteRest =
      rest.length === 1 && rest[0]!.type === 'ByteLevel' && rest[0]!.use_regex === false;
    const onlyByteLevel = pre?.type === 'ByteLevel' && pre.use_regex !== false;
    let words: (piece: string, first: boolean) => Word[];
    if ((byteRest || onlyByteLevel) && vocab.byteIds) {
      const prefixEach = byteRest && rest[0]!.add_prefix_space === true;
      words = (piece) => [
        { bytes: utf8Bytes(prefixEach && !piece.startsWith(' ') ? ` ${piece}` : piece) },
      ];
    } else if (rest.length > 0) {
      const stage = new library.SequencePreTokenizer({ type: 'Sequence', pretokenizers: rest });
      words = (piece, first) =>
        stage.pre_tokenize_text(piece, { section_index: first ? 0 : 1 }).map((text) => ({ text }));
    } else words = (piece) => [{ text: piece }];
    const model: PieceModel = {
      encodePiece(piece, first, out) {
        const job = new WordsJob(vocab, words(piece, first));
        job.run(Number.POSITIVE_INFINITY);
        job.finish(out);
      },
      longPiece: (piece, first): PieceJob => new WordsJob(vocab, words(piece, first)),
    };
    return new PieceEncoder(model, splitter, positionDependent);
  }

  /** The merge table and the symbol handling of the model; null when ids cannot stand for it. */
  #bpeVocab(longest: number): BpeVocab | null {
    const model = this.#lib.model;
    const ids = this.#ids;
    const pairs = new PairTable(model.merges.length);
    for (let rank = 0; rank < model.merges.length; rank++) {
      const [a, b] = model.merges[rank]!;
      const left = ids.get(a);
      const right = ids.get(b);
      const merged = ids.get(a + b);
      if (left === undefined || right === undefined || merged === undefined) return null;
      pairs.set(left, right, rank, merged);
    }
    let byteIds: Int32Array | null = new Int32Array(256);
    for (let b = 0; b < 256; b++) {
      const id = ids.get(BYTE_CHARS[b]!);
      if (id === undefined) {
        byteIds = null;
        break;
      }
      byteIds[b] = id;
    }
    // Output ids: the library maps each token string through its added tokens first.
    const remap = new Map<number, number>();
    for (const [text, token] of this.#added.byText) {
      const id = ids.get(text);
      if (id !== undefined && id !== token.id) remap.set(id, token.id);
    }
    const unk = model.unk_token === undefined ? undefined : this.#idOf(model.unk_token);
    const fallback = model.byte_fallback ? byteFallbackIds((t) => this.#idOf(t)) : null;
    // Byte fallback with some <0xNN> missing mixes bytes and <unk> per character: not covered.
    if (model.byte_fallback && !fallback) return null;
    const byteFallback = model.byte_fallback;
    return {
      pairs,
      ids,
      wholeWords: model.ignore_merges,
      maxTokenChars: longest,
      byteIds,
      finish(symbols, out) {
        for (let i = 0; i < symbols.length; i++) {
          const s = symbols[i]!;
          if (s >= 0) out.push(remap.size === 0 ? s : (remap.get(s) ?? s));
          else if (byteFallback && fallback) {
            for (const b of utf8Bytes(String.fromCodePoint(-s - 1))) out.push(fallback[b]!);
          } else if (unk !== undefined) out.push(unk);
        }
      },
    };
  }
}

/** A segment of the text: an added token's id, or text for the piece encoder. */
type Segment = number | { text: string; first: boolean };

/** Post-processor ids, then each segment, then the ids after; stops once past the limit. */
class SectionsJob implements Job {
  readonly #segments: Segment[];
  readonly #pieces: PieceEncoder;
  readonly #wrap: Wrap;
  readonly #out: number[];
  readonly #limit: number;
  #next = 0;
  #current: Job | null = null;
  #started = false;

  constructor(segments: Segment[], pieces: PieceEncoder, wrap: Wrap, out: number[], limit: number) {
    this.#segments = segments;
    this.#pieces = pieces;
    this.#wrap = wrap;
    this.#out = out;
    this.#limit = limit;
  }

  run(deadlineMs: number): boolean {
    const out = this.#out;
    if (!this.#started) {
      this.#started = true;
      for (const id of this.#wrap.before) out.push(id);
    }
    for (;;) {
      if (this.#current) {
        if (!this.#current.run(deadlineMs)) return false;
        this.#current = null;
      }
      if (out.length > this.#limit) return true;
      if (this.#next === this.#segments.length) {
        for (const id of this.#wrap.after) out.push(id);
        this.#next++;
        return true;
      }
      if (this.#next > this.#segments.length) return true;
      const segment = this.#segments[this.#next++]!;
      if (typeof segment === 'number') out.push(segment);
      else this.#current = this.#pieces.sectionJob(segment.text, segment.first, out, this.#limit);
    }
  }
}

function oneShot(work: () => void): Job {
  let done = false;
  return {
    run() {
      if (!done) {
        done = true;
        work();
      }
      return true;
    },
  };
}

/** How the pre-tokenizer's first stage cuts a section, and the stages left for each piece. */
function splitStage(pre: Json | null): { splitter: Splitter; rest: Json[] } {
  const whole = (rest: Json[]) => ({ splitter: { re: null, gaps: false }, rest });
  if (pre === null) return whole([]);
  const stages =
    pre.type === 'Sequence' ? ((pre.pretokenizers as Json[] | undefined) ?? []) : [pre];
  const first = stages[0];
  if (first?.type === 'Split') {
    const behavior = String(first.behavior ?? '').toLowerCase();
    if (first.invert !== true && behavior === 'removed') return whole([pre]);
    const split = new library.SplitPreTokenizer(first);
    if (!split.pattern) return whole([pre]);
    const re = new RegExp(split.pattern.source, split.pattern.flags);
    return { splitter: { re, gaps: first.invert !== true }, rest: stages.slice(1) };
  }
  if (pre.type === 'ByteLevel' && pre.use_regex !== false) {
    const byteLevel = new library.ByteLevelPreTokenizer(pre);
    const re = new RegExp(byteLevel.pattern.source, byteLevel.pattern.flags);
    return { splitter: { re, gaps: false }, rest: [] };
  }
  return whole([pre]);
}

/** Whether a config tree has a node of this type. */
function mentions(node: unknown, type: string): boolean {
  if (Array.isArray(node)) return node.some((n) => mentions(n, type));
  if (typeof node !== 'object' || node === null) return false;
  if ((node as Json).type === type) return true;
  return Object.values(node).some((v) => mentions(v, type));
}

function onlyUnicodeForms(normalizer: Json): boolean {
  if (normalizer.type === 'Sequence') {
    return ((normalizer.normalizers as Json[] | undefined) ?? []).every(onlyUnicodeForms);
  }
  return ['NFC', 'NFD', 'NFKC', 'NFKD'].includes(String(normalizer.type));
}

/** `<0x00>`..`<0xFF>` ids, or null when the vocabulary lacks one. */
function byteFallbackIds(idOf: (token: string) => number | undefined): Int32Array | null {
  const ids = new Int32Array(256);
  for (let b = 0; b < 256; b++) {
    const id = idOf(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    if (id === undefined) return null;
    ids[b] = id;
  }
  return ids;
}
