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
 * `test/tokenizer/tokenizer.hf.test.ts` checks the two paths against each other on random text.
 */
import { type AddedToken, AddedTokens } from './addedTokens.ts';
import { TokenizerError } from './errors.ts';
import { type Json, type LibraryTokenizer, library } from './hfLibrary.ts';
import { makeHfPieceEncoder } from './hfPieces.ts';
import type { Job, PieceEncoder } from './pieceEncoder.ts';
import type { TextTokenizer } from './tokenizer.ts';

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
    const pieces =
      problem === null
        ? makeHfPieceEncoder({
            lib,
            tokenizerJson,
            added: this.#added,
            idOf: (t) => this.#idOf(t),
            longest,
          })
        : null;
    this.#pieces = pieces;
    this.slowPathReason =
      problem ?? (pieces ? null : 'merges or byte fallback outside the vocabulary');
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

function onlyUnicodeForms(normalizer: Json): boolean {
  if (normalizer.type === 'Sequence') {
    return ((normalizer.normalizers as Json[] | undefined) ?? []).every(onlyUnicodeForms);
  }
  return ['NFC', 'NFD', 'NFKC', 'NFKD'].includes(String(normalizer.type));
}
