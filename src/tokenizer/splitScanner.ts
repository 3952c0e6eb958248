/**
 * Hand-written scanners for the pre-tokenizer split patterns of the models kvroute ships, each
 * giving exactly the pieces V8's Unicode regex gives for that pattern, several times faster:
 *
 * - `llama3`: Llama 3's pattern as `@huggingface/tokenizers` compiles it (its `(?i:'s|...)`
 *   spelled as `'[sS]|...`, `\s` as `\p{White_Space}`): contractions, letters with one leading
 *   non-letter, 1 to 3 digits, punctuation runs, whitespace runs (newlines kept together).
 * - `qwen`: the same with one digit a piece (Qwen 2 / 2.5 / 3).
 * - `cl100k`: tiktoken's cl100k_base as `gpt-tokenizer` writes it (the builtin tokenizer):
 *   JavaScript's `\s`, a trailing whitespace run whole (`\s+$`), one newline at a time.
 *
 * `scannerFor(re)` answers the scanner for a regex whose source and flags are one of these
 * exactly, and null for any other pattern (the caller keeps the regex). Every one of these
 * patterns matches at every position (each code point is a letter, a digit, whitespace or
 * something else, and each kind has an alternative), so a scanner only says where the match
 * starting at a position ends; the text is its matches, back to back, with no gaps.
 *
 * Character classes come from V8 itself: each code point's class is the answer of `/\p{L}/u`,
 * `/\p{N}/u`, `/\p{White_Space}/u` and `/\s/u` for it, asked once per block of 256 code points
 * the first time one of them is met, so the scanner and the regex share one Unicode version.
 * Lone surrogates are code points of their own class (none of the above), as in a `u` regex.
 */

/** The end of the pattern's match that starts at `from` (> from; from < text.length). */
export type PieceScanner = (text: string, from: number) => number;

/** Which of the shipped patterns a scanner reproduces. */
export type SplitPatternName = 'llama3' | 'qwen' | 'cl100k';

const CONTRACTIONS_HF = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
const TAIL_HF =
  '| ?[^\\p{White_Space}\\p{L}\\p{N}]+[\\r\\n]*|\\p{White_Space}*[\\r\\n]+|\\p{White_Space}+(?!\\P{White_Space})|\\p{White_Space}+';
const LETTERS = '|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+';

/** The regex sources each scanner stands for (flags `u`, plus `g` or not). */
export const SPLIT_PATTERNS: Readonly<Record<SplitPatternName, string>> = {
  llama3: `${CONTRACTIONS_HF}${LETTERS}|\\p{N}{1,3}${TAIL_HF}`,
  qwen: `${CONTRACTIONS_HF}${LETTERS}|\\p{N}${TAIL_HF}`,
  cl100k:
    "'(?:[sS]|[dD]|[mM]|[tT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s+$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s",
};

/** The shipped pattern a regex is, or null. */
export function splitPatternOf(re: RegExp): SplitPatternName | null {
  const flags = re.flags.replace('g', '');
  if (flags !== 'u') return null;
  for (const name of Object.keys(SPLIT_PATTERNS) as SplitPatternName[]) {
    if (SPLIT_PATTERNS[name] === re.source) return name;
  }
  return null;
}

/** The hand-written scanner for `re`, or null when it is none of the shipped patterns. */
export function scannerFor(re: RegExp): PieceScanner | null {
  const name = splitPatternOf(re);
  if (name === 'llama3') return (text, from) => scanHf(text, from, 3);
  if (name === 'qwen') return (text, from) => scanHf(text, from, 1);
  if (name === 'cl100k') return scanCl100k;
  return null;
}

// Class bits of a code point.
const LETTER = 1;
const NUMBER = 2;
/** `\p{White_Space}` (the Hugging Face patterns' whitespace). */
const WS_UNICODE = 4;
/** JavaScript's `\s` (cl100k's whitespace). */
const WS_JS = 8;
const KNOWN = 16;

const BLOCK_BITS = 8;
const classes = new Uint8Array(0x110000);

function fillBlock(cp: number): number {
  const first = (cp >> BLOCK_BITS) << BLOCK_BITS;
  const letter = /^\p{L}$/u;
  const number = /^\p{N}$/u;
  const wsUnicode = /^\p{White_Space}$/u;
  const wsJs = /^\s$/u;
  for (let c = first; c < first + (1 << BLOCK_BITS); c++) {
    const s = String.fromCodePoint(c);
    classes[c] =
      KNOWN |
      (letter.test(s) ? LETTER : 0) |
      (number.test(s) ? NUMBER : 0) |
      (wsUnicode.test(s) ? WS_UNICODE : 0) |
      (wsJs.test(s) ? WS_JS : 0);
  }
  return classes[cp]!;
}

/** Class bits of code point `cp`. */
function classOf(cp: number): number {
  const k = classes[cp]!;
  return k !== 0 ? k : fillBlock(cp);
}

// The ASCII block is filled up front: most text is ASCII.
fillBlock(0);

/** The code point at `i` (a lone surrogate stands for itself). */
function codePointAt(text: string, i: number): number {
  const c = text.charCodeAt(i);
  if ((c & 0xfc00) === 0xd800 && i + 1 < text.length) {
    const d = text.charCodeAt(i + 1);
    if ((d & 0xfc00) === 0xdc00) return ((c - 0xd800) << 10) + (d - 0xdc00) + 0x10000;
  }
  return c;
}

const width = (cp: number): number => (cp > 0xffff ? 2 : 1);

const APOSTROPHE = 0x27;
const SPACE = 0x20;
const CR = 0x0d;
const LF = 0x0a;

/** `'s|'t|'re|'ve|'m|'ll|'d` (ASCII letters either case) at `i` (an apostrophe): its end or -1. */
function contractionEnd(text: string, i: number): number {
  const n = text.length;
  if (i + 1 >= n) return -1;
  const a = text.charCodeAt(i + 1) | 0x20;
  if (a === 0x73 || a === 0x74 || a === 0x6d || a === 0x64) return i + 2; // s t m d
  if (i + 2 >= n) return -1;
  const b = text.charCodeAt(i + 2) | 0x20;
  // re ve ll
  if ((b === 0x65 && (a === 0x72 || a === 0x76)) || (a === 0x6c && b === 0x6c)) return i + 3;
  return -1;
}

/** The end of the run of letters starting at `i`. */
function lettersEnd(text: string, i: number): number {
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c < 0x80) {
      if ((classes[c]! & LETTER) === 0) return i;
      i++;
      continue;
    }
    const cp = codePointAt(text, i);
    if ((classOf(cp) & LETTER) === 0) return i;
    i += width(cp);
  }
  return i;
}

/** The end of the run of code points that are none of letter, digit, `ws` from `i`. */
function othersEnd(text: string, i: number, ws: number): number {
  const n = text.length;
  const stop = LETTER | NUMBER | ws;
  while (i < n) {
    const cp = codePointAt(text, i);
    if ((classOf(cp) & stop) !== 0) return i;
    i += width(cp);
  }
  return i;
}

/** `[\r\n]*` from `i`. */
function newlinesEnd(text: string, i: number): number {
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c !== CR && c !== LF) return i;
    i++;
  }
  return i;
}

/**
 * The alternatives before the whitespace ones, shared by all three patterns: a contraction,
 * `[^\r\n\p{L}\p{N}]?\p{L}+`, `\p{N}{1,maxDigits}`, ` ?[^\s\p{L}\p{N}]+[\r\n]*`. The end of
 * the match, or -1 when the code point at `i` is whitespace that starts none of them.
 */
function wordEnd(text: string, i: number, maxDigits: number, ws: number): number {
  const c = text.charCodeAt(i);
  if (c === APOSTROPHE) {
    const end = contractionEnd(text, i);
    if (end >= 0) return end;
  }
  const cp = c < 0x80 ? c : codePointAt(text, i);
  const k = c < 0x80 ? classes[c]! : classOf(cp);
  if ((k & LETTER) !== 0) return lettersEnd(text, i + width(cp));
  const n = text.length;
  const next = i + width(cp);
  if ((k & NUMBER) !== 0) {
    let end = next;
    for (let digits = 1; digits < maxDigits && end < n; digits++) {
      const d = codePointAt(text, end);
      if ((classOf(d) & NUMBER) === 0) break;
      end += width(d);
    }
    return end;
  }
  // A leading non-letter, non-digit (whitespace too, but not a newline) before letters.
  if (c !== CR && c !== LF && next < n) {
    const after = codePointAt(text, next);
    if ((classOf(after) & LETTER) !== 0) return lettersEnd(text, next + width(after));
  }
  if ((k & ws) === 0) return newlinesEnd(text, othersEnd(text, next, ws));
  if (c === SPACE && next < n) {
    const after = codePointAt(text, next);
    if ((classOf(after) & (LETTER | NUMBER | ws)) === 0) {
      return newlinesEnd(text, othersEnd(text, next + width(after), ws));
    }
  }
  return -1;
}

/** The whitespace run from `i` (every whitespace code point is one code unit): end, last newline. */
function whitespaceRun(text: string, i: number, ws: number): { end: number; lastNewline: number } {
  const n = text.length;
  let lastNewline = -1;
  let j = i;
  while (j < n) {
    const c = text.charCodeAt(j);
    if (c === CR || c === LF) lastNewline = j;
    else if ((classOf(c) & ws) === 0) break;
    j++;
  }
  return { end: j, lastNewline };
}

/** 1 for the ASCII letters (the only ASCII code points in \p{L}). */
const ASCII_LETTER = new Uint8Array(0x80);
for (let c = 0; c < 0x80; c++) ASCII_LETTER[c] = classes[c]! & LETTER;

/**
 * The commonest pieces, a word or a space and a word in ASCII, without the general path's
 * calls: the end of `\p{L}+` or ` \p{L}+` from `i`, or -1 when the text there is not one.
 */
function asciiWordEnd(text: string, i: number): number {
  const n = text.length;
  let c = text.charCodeAt(i);
  let j = i;
  if (c === SPACE) {
    if (++j >= n) return -1;
    c = text.charCodeAt(j);
  }
  if (c >= 0x80 || ASCII_LETTER[c] === 0) return -1;
  for (j++; j < n; j++) {
    const d = text.charCodeAt(j);
    if (d >= 0x80) return lettersEnd(text, j);
    if (ASCII_LETTER[d] === 0) return j;
  }
  return j;
}

/** Llama 3 (maxDigits 3) and Qwen (1), as `@huggingface/tokenizers` compiles them. */
function scanHf(text: string, i: number, maxDigits: number): number {
  const fast = asciiWordEnd(text, i);
  if (fast >= 0) return fast;
  const end = wordEnd(text, i, maxDigits, WS_UNICODE);
  if (end >= 0) return end;
  const run = whitespaceRun(text, i, WS_UNICODE);
  // \s*[\r\n]+: up to the run's last newline.
  if (run.lastNewline >= 0) return run.lastNewline + 1;
  // \s+(?!\S): all but the last when a non-space follows; \s+ otherwise.
  if (run.end < text.length && run.end - i >= 2) return run.end - 1;
  return run.end;
}

/** cl100k_base as `gpt-tokenizer` writes it. */
function scanCl100k(text: string, i: number): number {
  const fast = asciiWordEnd(text, i);
  if (fast >= 0) return fast;
  const end = wordEnd(text, i, 3, WS_JS);
  if (end >= 0) return end;
  const run = whitespaceRun(text, i, WS_JS);
  // \s+$
  if (run.end === text.length) return run.end;
  // \s*[\r\n]
  if (run.lastNewline >= 0) return run.lastNewline + 1;
  // \s+(?!\S), else \s
  return run.end - i >= 2 ? run.end - 1 : i + 1;
}
