/**
 * The tiny llama.cpp model for tests, written once per machine and options: os.tmpdir()/
 * kvroute-tiny-<hash>.gguf, where the hash covers the options, the tokenizer folder and the
 * writer's own source (a changed writer writes a new file). The writer renames a complete file
 * into place, so a file that exists is whole; tests in parallel processes may both write it, with
 * the same bytes.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type TinyModelOptions, writeTinyModel } from '../../src/gguf/tinyModel.ts';
import { LLAMA3_DIR } from './tokenizerFixtures.ts';

export type CachedModelOptions = Omit<TinyModelOptions, 'out'>;

const GGUF_SRC = fileURLToPath(new URL('../../src/gguf/', import.meta.url));
const pending = new Map<string, Promise<string>>();

/** The path of the tiny model for these options (default: Llama 3's tokenizer, default shape). */
export function tinyModelPath(opts: CachedModelOptions = {}): Promise<string> {
  const full = { ...opts, tokenizer: opts.tokenizer ?? LLAMA3_DIR };
  const path = join(tmpdir(), `kvroute-tiny-${optionsHash(full)}.gguf`);
  let ready = pending.get(path);
  if (!ready) {
    ready = existsSync(path)
      ? Promise.resolve(path)
      : writeTinyModel({ ...full, out: path }).then((r) => r.path);
    ready.catch(() => pending.delete(path));
    pending.set(path, ready);
  }
  return ready;
}

function optionsHash(opts: CachedModelOptions & { tokenizer: string }): string {
  const hash = createHash('sha256');
  const keys = Object.keys(opts).sort() as (keyof typeof opts)[];
  hash.update(JSON.stringify(keys.map((k) => [k, opts[k]])));
  for (const name of readdirSync(GGUF_SRC)
    .filter((f) => f.endsWith('.ts'))
    .sort()) {
    hash.update(name).update(readFileSync(join(GGUF_SRC, name)));
  }
  return hash.digest('hex').slice(0, 16);
}
