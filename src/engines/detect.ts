/**
 * Which engine a backend runs, from what it serves: `/props` with `total_slots` is llama.cpp's
 * llama-server; otherwise the prefix of its `/metrics` names (`vllm:`, `sglang:`, `llamacpp:`);
 * nothing of these: a plain OpenAI-compatible server. Pure: the shell fetches the two pages.
 */
import type { EngineKind } from './dialect.ts';
import { parseLlamaProps } from './llamacpp.ts';

export interface DetectPages {
  /** `/props` status and JSON (null when unreachable or not JSON). */
  props: { status: number; json: unknown } | null;
  /** `/metrics` status and text (null when unreachable). */
  metrics: { status: number; text: string } | null;
}

const PREFIXES: readonly [string, EngineKind][] = [
  ['vllm:', 'vllm'],
  ['sglang:', 'sglang'],
  ['llamacpp:', 'llamacpp'],
];

export function detectKind(pages: DetectPages): EngineKind {
  if (pages.props?.status === 200 && parseLlamaProps(pages.props.json) !== null) return 'llamacpp';
  const text = pages.metrics?.status === 200 ? pages.metrics.text : '';
  for (const line of text.split('\n')) {
    if (line.length === 0 || line.startsWith('#')) continue;
    for (const [prefix, kind] of PREFIXES) if (line.startsWith(prefix)) return kind;
  }
  return 'openai';
}
