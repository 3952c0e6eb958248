/**
 * A model folder as vLLM's `--tokenizer DIR` reads it: `tokenizer.json` (required),
 * `tokenizer_config.json` (special tokens, the chat template) and an optional
 * `chat_template.jinja`, which newer transformers save beside the config and which wins over the
 * config's template. Loaded once per process and folder: Llama 3's tokenizer takes a second and
 * ~150 MB, and an embedded fleet's engines share the gateway's copy.
 */
import { readFileSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { TokenizerError } from './errors.ts';
import { HfTokenizer } from './hfTokenizer.ts';
import type { TemplateSource } from './jinjaChat.ts';
import { getOrAdd } from '../util/getOrAdd.ts';

export interface ModelFolder {
  dir: string;
  tokenizer: HfTokenizer;
  /** The folder's chat template, or null when it has none. */
  template: TemplateSource | null;
  templateOrigin: string;
  /** The special tokens that are set, by template variable name (`bos_token`...). */
  specialTokens: Record<string, string>;
}

/** transformers passes these to the template when the tokenizer config sets them. */
const SPECIAL_TOKEN_NAMES = [
  'bos_token',
  'eos_token',
  'unk_token',
  'sep_token',
  'pad_token',
  'cls_token',
  'mask_token',
];

const loaded = new Map<string, ModelFolder>();

/** `path` is the folder (a path to its tokenizer.json is taken as the folder too). */
export function loadModelFolder(path: string): ModelFolder {
  return getOrAdd(loaded, folderOf(path), readFolder);
}

function folderOf(path: string): string {
  let dir: string;
  try {
    dir = realpathSync(path);
    if (!statSync(dir).isDirectory()) {
      if (basename(dir) !== 'tokenizer.json') throw new Error('not a folder');
      dir = dirname(dir);
    }
  } catch (err) {
    throw new TokenizerError(
      'ERR_CONFIG',
      `--tokenizer ${path}: expected a model folder with tokenizer.json (${(err as Error).message})`,
    );
  }
  return dir;
}

/** A model folder's files as read, before any tokenizer is built (the GGUF writer reads these). */
export interface ModelFolderFiles {
  dir: string;
  tokenizerJson: Record<string, unknown>;
  config: Record<string, unknown>;
  template: TemplateSource | null;
  templateOrigin: string;
}

/** Reads a folder's files by vLLM's rules; `path` as `loadModelFolder` takes it. */
export function readModelFolderFiles(path: string): ModelFolderFiles {
  const dir = folderOf(path);
  const tokenizerJson = readJson(join(dir, 'tokenizer.json'), true)!;
  const config = readJson(join(dir, 'tokenizer_config.json'), false) ?? {};
  const jinjaPath = join(dir, 'chat_template.jinja');
  const jinja = readText(jinjaPath);
  let template: TemplateSource | null = null;
  let templateOrigin = jinjaPath;
  if (jinja !== null) template = jinja;
  else if (config.chat_template !== undefined && config.chat_template !== null) {
    template = config.chat_template as TemplateSource;
    templateOrigin = join(dir, 'tokenizer_config.json');
  }
  return { dir, tokenizerJson, config, template, templateOrigin };
}

function readFolder(dir: string): ModelFolder {
  const { tokenizerJson, config, template, templateOrigin } = readModelFolderFiles(dir);
  const tokenizer = new HfTokenizer(tokenizerJson, config, basename(dir));
  const specialTokens: Record<string, string> = {};
  for (const name of SPECIAL_TOKEN_NAMES) {
    const value = specialTokenText(config[name]);
    if (value !== null) specialTokens[name] = value;
  }
  return { dir, tokenizer, template, templateOrigin, specialTokens };
}

/** A special token as text: configs store a string or an AddedToken object. */
export function specialTokenText(value: unknown): string | null {
  if (typeof value === 'string') return value;
  const content = (value as { content?: unknown } | null)?.content;
  return typeof content === 'string' ? content : null;
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

function readJson(path: string, required: boolean): Record<string, unknown> | null {
  const text = readText(path);
  if (text === null) {
    if (!required) return null;
    throw new TokenizerError('ERR_CONFIG', `--tokenizer: cannot read ${path}`);
  }
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch (err) {
    throw new TokenizerError('ERR_CONFIG', `--tokenizer: ${path}: ${(err as Error).message}`);
  }
}

/**
 * vLLM's `--chat-template`: a readable file, or else the template itself when it looks like one
 * (has `{`, `}` or a newline); anything else is a path that does not exist.
 */
export function readChatTemplateFlag(value: string): { source: string; origin: string } {
  const text = readText(value);
  if (text !== null) return { source: text, origin: value };
  if (/[{}\n]/.test(value)) return { source: value, origin: '--chat-template' };
  throw new TokenizerError(
    'ERR_CONFIG',
    `--chat-template ${value}: no such file (and it does not look like a template)`,
  );
}
