/**
 * The `tokenizer.*` metadata of a GGUF file from a Hugging Face model folder (`tokenizer.json`,
 * `tokenizer_config.json`, `chat_template.jinja`), as llama.cpp's `convert_hf_to_gguf.py` writes
 * it for a byte-level BPE tokenizer (`tokenizer.ggml.model = "gpt2"`): the tokens in id order,
 * their types (added special tokens are control tokens), the merges, the BOS/EOS ids and whether
 * the tokenizer adds them, and the chat template. llama.cpp picks its pre-tokenizer regex by name
 * (`tokenizer.ggml.pre`); the name comes from the file's split pattern, and a pattern llama.cpp
 * has no name for is refused rather than tokenized differently.
 */
import { readModelFolderFiles, specialTokenText } from '../tokenizer/modelFolder.ts';
import { bool, type GgufKv, i32s, str, strings, TokenType, u32 } from './ggufFormat.ts';

export class ModelFileError extends Error {
  constructor(
    readonly code: 'ERR_MODEL_TOKENIZER' | 'ERR_MODEL_SHAPE' | 'ERR_MODEL_OUT',
    message: string,
  ) {
    super(message);
  }
}

/** Split patterns of the pre-tokenizers llama.cpp names (`src/llama-vocab.cpp`). */
const PRE_TOKENIZERS: Record<string, string> = {
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+":
    'llama-bpe',
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+":
    'qwen2',
};

/**
 * The pre-tokenizers for which llama.cpp looks a whole word up in the vocabulary before merging
 * (`ignore_merges`, Llama 3's rule); for the others it always merges. A file that says otherwise
 * would tokenize differently there.
 */
const IGNORES_MERGES = new Set(['llama-bpe']);

type Json = Record<string, unknown>;

export interface TokenizerMetadata {
  kvs: GgufKv[];
  vocabSize: number;
}

export function tokenizerMetadata(folderPath: string): TokenizerMetadata {
  const files = readModelFolderFiles(folderPath);
  const where = `--tokenizer ${folderPath}`;
  const fail = (why: string): never => {
    throw new ModelFileError('ERR_MODEL_TOKENIZER', `${where}: ${why}`);
  };
  const json = files.tokenizerJson;
  const model = (json.model ?? {}) as Json;
  const pre = checkedPreTokenizer(json, model, fail);
  const vocab = (model.vocab ?? {}) as Record<string, number>;
  const added = (Array.isArray(json.added_tokens) ? json.added_tokens : []) as {
    id: number;
    content: string;
    special?: boolean;
  }[];
  const { tokens, types, vocabSize } = vocabTable(vocab, added);
  const idOf = new Map<string, number>();
  for (let id = 0; id < vocabSize; id++) idOf.set(tokens[id]!, id);

  const merges = ((model.merges ?? []) as (string | [string, string])[]).map((m) =>
    typeof m === 'string' ? m : `${m[0]} ${m[1]}`,
  );

  const kvs: GgufKv[] = [
    ['tokenizer.ggml.model', str('gpt2')],
    ['tokenizer.ggml.pre', str(pre)],
    ['tokenizer.ggml.tokens', strings(tokens as string[])],
    ['tokenizer.ggml.token_type', i32s(types)],
    ['tokenizer.ggml.merges', strings(merges)],
  ];
  const special = (name: string, key: string): string | null => {
    const text = specialTokenText(files.config[name]);
    if (text === null) return null;
    const id = idOf.get(text);
    if (id === undefined) fail(`${name} '${text}' is not in the vocabulary`);
    kvs.push([key, u32(id!)]);
    return text;
  };
  const bos = special('bos_token', 'tokenizer.ggml.bos_token_id');
  const eos = special('eos_token', 'tokenizer.ggml.eos_token_id');
  special('pad_token', 'tokenizer.ggml.padding_token_id');
  const wrap = singleTemplate(json.post_processor as Json | null);
  kvs.push(['tokenizer.ggml.add_bos_token', bool(bos !== null && wrap.first === bos)]);
  kvs.push(['tokenizer.ggml.add_eos_token', bool(eos !== null && wrap.last === eos)]);

  const template = files.template;
  if (typeof template === 'string') kvs.push(['tokenizer.chat_template', str(template)]);
  else if (Array.isArray(template)) {
    for (const { name, template: text } of template) {
      const key =
        name === 'default' ? 'tokenizer.chat_template' : `tokenizer.chat_template.${name}`;
      kvs.push([key, str(text)]);
    }
  }
  return { kvs, vocabSize };
}

/**
 * The checks that the folder's tokenizer is one llama.cpp reads as Hugging Face does (byte-level
 * BPE, a pre-tokenizer it names, its merge rule); its llama.cpp pre-tokenizer name.
 */
function checkedPreTokenizer(json: Json, model: Json, fail: (why: string) => never): string {
  if (model.type !== 'BPE')
    fail(`model type ${String(model.type)}; only byte-level BPE is written`);
  if (model.byte_fallback === true)
    fail('byte_fallback BPE (a SentencePiece-style model) is not written');
  if ((json.decoder as Json | null)?.type !== 'ByteLevel') fail('the decoder is not ByteLevel');
  const pre = preTokenizerName(json.pre_tokenizer as Json | null);
  if (pre === null)
    fail(
      `its pre-tokenizer has no llama.cpp name (known: ${[...Object.values(PRE_TOKENIZERS), 'gpt-2'].join(', ')})`,
    );
  const ignoreMerges = model.ignore_merges === true;
  if (ignoreMerges !== IGNORES_MERGES.has(pre!)) {
    fail(
      `model.ignore_merges is ${ignoreMerges}, but llama.cpp's ${pre} pre-tokenizer ` +
        `${IGNORES_MERGES.has(pre!) ? 'looks whole words up first' : 'merges every word'}`,
    );
  }
  return pre!;
}

/** Every token id's text and type: the vocabulary, the added tokens, and padding for the gaps. */
function vocabTable(
  vocab: Record<string, number>,
  added: { id: number; content: string; special?: boolean }[],
): { tokens: (string | undefined)[]; types: Int32Array; vocabSize: number } {
  let vocabSize = 0;
  for (const id of Object.values(vocab)) vocabSize = Math.max(vocabSize, id + 1);
  for (const t of added) vocabSize = Math.max(vocabSize, t.id + 1);
  const tokens = new Array<string | undefined>(vocabSize);
  const types = new Int32Array(vocabSize);
  for (const [text, id] of Object.entries(vocab)) {
    tokens[id] = text;
    types[id] = TokenType.NORMAL;
  }
  for (const t of added) {
    tokens[t.id] = t.content;
    types[t.id] = t.special || looksSpecial(t.content) ? TokenType.CONTROL : TokenType.USER_DEFINED;
  }
  for (let id = 0; id < vocabSize; id++) {
    if (tokens[id] === undefined) {
      tokens[id] = `[PAD${id}]`;
      types[id] = TokenType.UNUSED;
    }
  }
  return { tokens, types, vocabSize };
}

/**
 * `convert_hf_to_gguf.py`'s `does_token_look_special`: added tokens some models leave unmarked
 * (Qwen's `<|fim_prefix|>`...) that llama.cpp would otherwise warn about and retype as control.
 * Text matches them either way: Hugging Face cuts the text at every added token, llama.cpp at
 * control tokens when special tokens are parsed.
 */
function looksSpecial(text: string): boolean {
  return (
    ['<pad>', '<mask>', '<2mass>', '[@BOS@]'].includes(text) ||
    (text.startsWith('<|') && text.endsWith('|>')) ||
    (text.startsWith('<｜') && text.endsWith('｜>')) ||
    (text.startsWith('<unused') && text.endsWith('>'))
  );
}

/** llama.cpp's name for the file's pre-tokenizer, or null when it has none. */
function preTokenizerName(pre: Json | null): string | null {
  if (!pre) return null;
  const parts = (pre.type === 'Sequence' ? pre.pretokenizers : [pre]) as Json[];
  const splits = parts.filter((p) => p.type === 'Split');
  const byteLevel = parts.filter((p) => p.type === 'ByteLevel');
  if (byteLevel.length !== 1 || parts.length !== splits.length + 1) return null;
  if (byteLevel[0]!.add_prefix_space === true) return null;
  if (splits.length === 0) return byteLevel[0]!.use_regex === true ? 'gpt-2' : null;
  if (splits.length !== 1 || byteLevel[0]!.use_regex === true) return null;
  const split = splits[0]!;
  if (split.behavior !== 'Isolated' || split.invert === true) return null;
  const regex = (split.pattern as Json | undefined)?.Regex;
  return typeof regex === 'string' && Object.hasOwn(PRE_TOKENIZERS, regex)
    ? PRE_TOKENIZERS[regex]!
    : null;
}

/** The special tokens a TemplateProcessing post-processor puts around a single sequence. */
function singleTemplate(post: Json | null): { first: string | null; last: string | null } {
  const none = { first: null, last: null };
  if (!post) return none;
  const processors = (post.type === 'Sequence' ? post.processors : [post]) as Json[];
  const template = processors.find((p) => p.type === 'TemplateProcessing');
  const single = template?.single as Json[] | undefined;
  if (!single || single.length === 0) return none;
  const specialId = (piece: Json | undefined): string | null => {
    const id = (piece?.SpecialToken as Json | undefined)?.id;
    return typeof id === 'string' ? id : null;
  };
  return { first: specialId(single[0]), last: specialId(single[single.length - 1]) };
}
