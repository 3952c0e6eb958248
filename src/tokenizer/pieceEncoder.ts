/**
 * The fast path's loop over one section of text (the text between two added tokens): cut it into
 * pieces with the pre-tokenizer's regex, look each piece up in a word cache, and encode only the
 * misses with the model. A piece's ids depend on the piece alone (the pre-tokenizer's later steps
 * and the BPE model work piece by piece), so caching them changes nothing; a section's ids depend
 * on the section alone (added tokens cut the text before anything runs), so whole sections are
 * cached too: a system prompt or an earlier turn seen before costs one hash lookup.
 *
 * Work comes in resumable jobs: `run(deadlineMs)` stops once the deadline passes (true = done),
 * and once the output holds more than `limitTokens` ids (the caller's early stop).
 */

import { type PieceScanner, scannerFor } from './splitScanner.ts';
import { WordTable } from './wordTable.ts';

/** A resumable piece of work. */
export interface Job {
  /** Works until finished (true) or until `deadlineMs` (performance.now()) passed (false). */
  run(deadlineMs: number): boolean;
}

/** The merge work of one long piece, resumable. */
export interface PieceJob extends Job {
  /** Appends the piece's ids (after run() returned true). */
  finish(out: number[]): void;
}

/** What a tokenizer model does with one piece. */
export interface PieceModel {
  /** Appends the ids of a piece of at most LONG_PIECE_CHARS characters. */
  encodePiece(piece: string, first: boolean, out: number[]): void;
  /** A resumable encoding of a longer piece. */
  longPiece(piece: string, first: boolean): PieceJob;
}

/** How a section is cut into pieces. */
export interface Splitter {
  /** Global regex whose matches are pieces; null: the whole section is one piece. */
  re: RegExp | null;
  /** Keep the text between matches as pieces too (Split 'Isolated'); false: matches only. */
  gaps: boolean;
  /**
   * The hand-written scanner giving `re`'s matches (`splitScanner.ts`), used instead of it;
   * null: the regex runs. Its patterns match everywhere, so there are never gaps.
   */
  scan: PieceScanner | null;
}

/** The splitter for `re`: its hand-written scanner when it has one, else the regex. */
export function regexSplitter(re: RegExp, gaps: boolean): Splitter {
  return { re, gaps, scan: scannerFor(re) };
}

/** Pieces longer than this are merged as resumable jobs, never in one go. */
export const LONG_PIECE_CHARS = 1024;
/** Pieces up to this long are cached (longer ones rarely repeat). */
const WORD_CACHE_MAX_CHARS = 128;
/** Entries before the word cache starts over (a few tens of MB at most). */
const WORD_CACHE_MAX_ENTRIES = 262_144;
/** Sections at least this long are cached whole. */
const SECTION_CACHE_MIN_CHARS = 256;
const SECTION_CACHE_MAX_CHARS = 1 << 20;
/** Characters of cached sections kept in all (least recently used go first). */
const SECTION_CACHE_BUDGET_CHARS = 16 << 20;
/** Pieces between two looks at the clock. */
const PIECES_PER_CLOCK_READ = 64;

/** Caches of one position class (first section or any other, when that matters). */
class Caches {
  readonly words = new WordTable(WORD_CACHE_MAX_ENTRIES);
  readonly sections = new Map<string, number[]>();
  sectionChars = 0;

  rememberSection(text: string, ids: number[]): void {
    if (text.length > SECTION_CACHE_MAX_CHARS || this.sections.has(text)) return;
    this.sections.set(text, ids);
    this.sectionChars += text.length;
    for (const key of this.sections.keys()) {
      if (this.sectionChars <= SECTION_CACHE_BUDGET_CHARS) break;
      this.sections.delete(key);
      this.sectionChars -= key.length;
    }
  }

  recallSection(text: string): number[] | undefined {
    const ids = this.sections.get(text);
    if (ids) {
      // Most recently used moves to the back of the eviction order.
      this.sections.delete(text);
      this.sections.set(text, ids);
    }
    return ids;
  }
}

export class PieceEncoder {
  readonly #model: PieceModel;
  readonly #splitter: Splitter;
  readonly #caches: Caches;
  readonly #firstCaches: Caches;

  /** `positionDependent`: the model encodes a piece differently in the first section. */
  constructor(model: PieceModel, splitter: Splitter, positionDependent = false) {
    this.#model = model;
    this.#splitter = splitter;
    this.#caches = new Caches();
    this.#firstCaches = positionDependent ? new Caches() : this.#caches;
  }

  /** Appends the ids of `text` to `out`, in one go. */
  encodeSection(text: string, first: boolean, out: number[]): void {
    this.sectionJob(text, first, out, Number.POSITIVE_INFINITY).run(Number.POSITIVE_INFINITY);
  }

  /** A job appending the ids of `text` to `out`; it stops early once out has > limit ids. */
  sectionJob(text: string, first: boolean, out: number[], limitTokens: number): Job {
    return new SectionJob(
      this.#model,
      this.#splitter,
      first ? this.#firstCaches : this.#caches,
      text,
      first,
      out,
      limitTokens,
    );
  }
}

class SectionJob implements Job {
  readonly #model: PieceModel;
  readonly #re: RegExp | null;
  readonly #scan: PieceScanner | null;
  readonly #gaps: boolean;
  readonly #caches: Caches;
  readonly #text: string;
  readonly #first: boolean;
  readonly #out: number[];
  readonly #limit: number;
  readonly #startLength: number;
  /** End of the last match (the start of the next gap). */
  #prev = 0;
  /** Where the next regex search starts. */
  #searchFrom = 0;
  /** A match waiting while the gap before it is encoded. */
  #queued: string | null = null;
  #exhausted = false;
  #long: PieceJob | null = null;
  #done = false;

  constructor(
    model: PieceModel,
    splitter: Splitter,
    caches: Caches,
    text: string,
    first: boolean,
    out: number[],
    limitTokens: number,
  ) {
    this.#model = model;
    this.#re = splitter.re;
    this.#scan = splitter.scan;
    this.#gaps = splitter.gaps;
    this.#caches = caches;
    this.#text = text;
    this.#first = first;
    this.#out = out;
    this.#limit = limitTokens;
    this.#startLength = out.length;
    const cached = text.length >= SECTION_CACHE_MIN_CHARS ? caches.recallSection(text) : undefined;
    if (cached) {
      appendAll(out, cached);
      this.#done = true;
    }
  }

  run(deadlineMs: number): boolean {
    if (this.#done) return true;
    const out = this.#out;
    const words = this.#caches.words;
    const scan = this.#scan;
    let sinceClock = 0;
    for (;;) {
      if (this.#long) {
        if (!this.#long.run(deadlineMs)) return false;
        this.#long.finish(out);
        this.#long = null;
      }
      if (out.length > this.#limit) return this.#finish(false);
      if (++sinceClock === PIECES_PER_CLOCK_READ) {
        sinceClock = 0;
        if (performance.now() > deadlineMs) return false;
      }
      // The piece is text[start, end): the scanner's range of the section (no string cut out
      // unless the word cache misses), or the regex's match as a string of its own.
      let text = this.#text;
      let start = this.#prev;
      let end: number;
      if (scan !== null) {
        if (start >= text.length) return this.#finish(true);
        end = scan(text, start);
        this.#prev = end;
      } else {
        const piece = this.#nextPiece();
        if (piece === null) return this.#finish(true);
        text = piece;
        start = 0;
        end = piece.length;
      }
      const cacheable = end - start <= WORD_CACHE_MAX_CHARS;
      if (cacheable) {
        const entry = words.find(text, start, end);
        if (entry >= 0) {
          words.appendIds(entry, out);
          continue;
        }
      }
      const piece = start === 0 && end === text.length ? text : text.slice(start, end);
      if (piece.length > LONG_PIECE_CHARS) {
        this.#long = this.#model.longPiece(piece, this.#first);
        continue;
      }
      const from = out.length;
      this.#model.encodePiece(piece, this.#first, out);
      if (cacheable) words.add(text, start, end, out, from, out.length);
    }
  }

  #finish(complete: boolean): boolean {
    this.#done = true;
    if (complete && this.#text.length >= SECTION_CACHE_MIN_CHARS) {
      this.#caches.rememberSection(this.#text, this.#out.slice(this.#startLength));
    }
    return true;
  }

  /** The next piece, as `@huggingface/tokenizers`' regex_split (or match) would give it. */
  #nextPiece(): string | null {
    const text = this.#text;
    if (this.#queued !== null) {
      const match = this.#queued;
      this.#queued = null;
      return match;
    }
    const re = this.#re;
    if (re === null) {
      if (this.#exhausted || text.length === 0) return null;
      this.#exhausted = true;
      return text;
    }
    while (!this.#exhausted) {
      re.lastIndex = this.#searchFrom;
      const m = re.exec(text);
      if (m === null) {
        this.#exhausted = true;
        if (this.#gaps && this.#prev < text.length) return text.slice(this.#prev);
        return null;
      }
      const match = m[0];
      const start = m.index;
      const gap = this.#gaps && start > this.#prev ? text.slice(this.#prev, start) : null;
      this.#prev = start + match.length;
      // An empty match moves the search on by one code point, as matchAll does.
      this.#searchFrom = match.length > 0 ? this.#prev : advance(text, start);
      if (match.length === 0) {
        if (gap !== null) return gap;
        continue;
      }
      if (gap !== null) {
        this.#queued = match;
        return gap;
      }
      return match;
    }
    return null;
  }
}

/** Arguments per push: a spread of many more could overflow the stack. */
const PUSH_CHUNK = 8192;

/**
 * Appends `ids` to `out`: a spread grows `out` once per chunk (a push per id grows it many
 * times; half the time of a recalled 6,000-token system prompt).
 */
function appendAll(out: number[], ids: readonly number[]): void {
  if (ids.length <= PUSH_CHUNK) {
    out.push(...ids);
    return;
  }
  for (let i = 0; i < ids.length; i += PUSH_CHUNK) out.push(...ids.slice(i, i + PUSH_CHUNK));
}

function advance(text: string, index: number): number {
  const c = text.charCodeAt(index);
  if (c >= 0xd800 && c <= 0xdbff && index + 1 < text.length) {
    const d = text.charCodeAt(index + 1);
    if (d >= 0xdc00 && d <= 0xdfff) return index + 2;
  }
  return index + 1;
}
