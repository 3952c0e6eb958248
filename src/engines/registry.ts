/** Engine kinds mapped to their dialects; adding a kind adds one line. */
import type { EngineDialect, EngineKind } from './dialect.ts';
import { llamacpp } from './llamacpp.ts';
import { openai } from './openai.ts';
import { sglang } from './sglang.ts';
import { vllm } from './vllm.ts';

const REGISTRY = { vllm, llamacpp, sglang, openai } satisfies Record<EngineKind, EngineDialect>;

export function dialectOf(kind: EngineKind): EngineDialect {
  return REGISTRY[kind];
}
