/**
 * Added tokens (`<|eot_id|>`, `<|im_start|>`...) as Hugging Face tokenizers treat them: text is cut
 * at each occurrence before anything else runs, longest match first from the left, and a token
 * flagged `lstrip` / `rstrip` eats the whitespace beside it. The same rules as
 * `@huggingface/tokenizers` (its `DictionarySplitter` and `encode_text`), rebuilt from the
 * tokenizer.json so the fast encoder can run them without the library's private fields.
 */
export interface AddedToken {
  id: number;
  content: string;
  lstrip: boolean;
  rstrip: boolean;
  special: boolean;
  /** Matched after the normalizer ran (its content normalized too) rather than before. */
  normalized: boolean;
}

type TrieNode = { [char: string]: TrieNode } & { end?: string };

/** Cuts text at every occurrence of a set of words (the longest one wins at each position). */
export class WordSplitter {
  readonly #trie: TrieNode = Object.create(null);
  /** Code units that start some word: every other position is skipped at once. */
  readonly #starts = new Uint8Array(65536);
  /** The one code unit every word starts with (`<` for the models shipped), or null. */
  readonly #onlyStart: string | null;
  readonly empty: boolean;

  constructor(words: readonly string[]) {
    const firsts = new Set<string>();
    for (const word of words) {
      if (word.length > 0) firsts.add(word[0]!);
      if (word.length > 0) this.#starts[word.charCodeAt(0)] = 1;
      let node = this.#trie;
      for (let i = 0; i < word.length; i++) {
        const c = word[i]!;
        node = node[c] ??= Object.create(null);
      }
      node.end = word;
    }
    this.empty = words.length === 0;
    this.#onlyStart = firsts.size === 1 ? [...firsts][0]! : null;
  }

  /** The text in order: stretches between words, and the words themselves. */
  split(text: string): string[] {
    if (this.empty) return [text];
    const out: string[] = [];
    const n = text.length;
    let start = 0;
    let i = 0;
    const starts = this.#starts;
    const onlyStart = this.#onlyStart;
    while (i < n) {
      if (onlyStart !== null) {
        // String search skips to the next candidate faster than a loop over code units.
        i = text.indexOf(onlyStart, i);
        if (i < 0) break;
      } else if (starts[text.charCodeAt(i)] === 0) {
        i++;
        continue;
      }
      let node: TrieNode | undefined = this.#trie;
      let match: string | null = null;
      for (let j = i; j < n; j++) {
        node = node[text[j]!];
        if (!node) break;
        if (node.end) match = node.end;
      }
      if (match) {
        if (i > start) out.push(text.slice(start, i));
        out.push(match);
        i += match.length;
        start = i;
      } else i++;
    }
    if (start < n) out.push(text.slice(start));
    return out;
  }
}

/** The added tokens of a tokenizer.json, by every text that names them. */
export class AddedTokens {
  /** Content (and normalized content) -> token. */
  readonly byText = new Map<string, AddedToken>();
  readonly unnormalized: WordSplitter;
  readonly normalized: WordSplitter;

  constructor(tokens: readonly AddedToken[], normalize: ((s: string) => string) | null) {
    const raw: string[] = [];
    const norm: string[] = [];
    for (const t of tokens) {
      this.byText.set(t.content, t);
      if (t.normalized && normalize) {
        const n = normalize(t.content);
        norm.push(n);
        this.byText.set(n, t);
      } else raw.push(t.content);
    }
    this.unnormalized = new WordSplitter(raw);
    this.normalized = new WordSplitter(norm);
  }

  /** Applies the lstrip / rstrip of each added token to its neighbours, in place. */
  stripAround(parts: string[]): void {
    for (let i = 0; i < parts.length; i++) {
      const t = this.byText.get(parts[i]!);
      if (!t) continue;
      if (t.lstrip && i > 0) parts[i - 1] = parts[i - 1]!.trimEnd();
      if (t.rstrip && i < parts.length - 1) parts[i + 1] = parts[i + 1]!.trimStart();
    }
  }
}
