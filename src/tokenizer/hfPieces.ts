/**
 * The fast path's model side for a Hugging Face BPE model: the merges as a table of symbol ids,
 * how a piece becomes words (the pre-tokenizer stages after the first, byte-level mapping done
 * directly on UTF-8 bytes), and how merged symbols become the library's output ids (added-token
 * ids first, byte fallback, the unknown token). Null when ids cannot stand for the model's
 * strings (a merge outside the vocabulary, an incomplete byte fallback): the library then
 * encodes alone.
 */
import type { AddedTokens } from './addedTokens.ts';
import { BYTE_CHARS, utf8Bytes } from './byteLevel.ts';
import { type BpeVocab, type Word, WordsJob } from './bpeWords.ts';
import { type Json, type LibraryTokenizer, library } from './hfLibrary.ts';
import { PairTable } from './pairTable.ts';
import {
  PieceEncoder,
  type PieceJob,
  type PieceModel,
  regexSplitter,
  type Splitter,
} from './pieceEncoder.ts';

/** What the fast path reads of a loaded model. */
export interface HfModelParts {
  lib: LibraryTokenizer;
  tokenizerJson: Json;
  added: AddedTokens;
  /** The library's id for a token string (added tokens first, then the vocabulary, then unk). */
  idOf(token: string): number | undefined;
  /** The longest vocabulary string. */
  longest: number;
}

export function makeHfPieceEncoder(m: HfModelParts): PieceEncoder | null {
  const vocab = bpeVocab(m);
  if (!vocab) return null;
  const pre = (m.tokenizerJson.pre_tokenizer as Json | null | undefined) ?? null;
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
function bpeVocab(m: HfModelParts): BpeVocab | null {
  const model = m.lib.model;
  const ids = model.tokens_to_ids;
  const idOf = m.idOf;
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
  for (const [text, token] of m.added.byText) {
    const id = ids.get(text);
    if (id !== undefined && id !== token.id) remap.set(id, token.id);
  }
  const unk = model.unk_token === undefined ? undefined : idOf(model.unk_token);
  const fallback = model.byte_fallback ? byteFallbackIds(idOf) : null;
  // Byte fallback with some <0xNN> missing mixes bytes and <unk> per character: not covered.
  if (model.byte_fallback && !fallback) return null;
  const byteFallback = model.byte_fallback;
  return {
    pairs,
    ids,
    wholeWords: model.ignore_merges,
    maxTokenChars: m.longest,
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

/** How the pre-tokenizer's first stage cuts a section, and the stages left for each piece. */
function splitStage(pre: Json | null): { splitter: Splitter; rest: Json[] } {
  const whole = (rest: Json[]) => ({ splitter: { re: null, gaps: false, scan: null }, rest });
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
    return { splitter: regexSplitter(re, first.invert !== true), rest: stages.slice(1) };
  }
  if (pre.type === 'ByteLevel' && pre.use_regex !== false) {
    const byteLevel = new library.ByteLevelPreTokenizer(pre);
    const re = new RegExp(byteLevel.pattern.source, byteLevel.pattern.flags);
    return { splitter: regexSplitter(re, false), rest: [] };
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
