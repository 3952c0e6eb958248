/**
 * Which engine a backend runs (engines/detect.ts on its `/props` and `/metrics`), or the one
 * its `engine=` key names; and, for llama.cpp, its slots from `/props`. Asked when a backend
 * joins and when it comes back.
 */
import { detectKind } from '../engines/detect.ts';
import type { EngineDialect, EngineKind } from '../engines/dialect.ts';
import { type LlamaProps, parseLlamaProps } from '../engines/llamacpp.ts';
import { dialectOf } from '../engines/registry.ts';
import { parseJsonOr } from '../util/json.ts';
import { ASK_TIMEOUT_MS, type Backend, backendHeaders } from './backends.ts';

export interface EngineFacts {
  dialect: EngineDialect;
  /** How it was known: its `engine=` key, or what it serves. */
  how: 'configured' | 'detected';
  /** llama-server's `/props`, when it is one and answered. */
  props: LlamaProps | null;
}

async function get(
  backend: Backend,
  path: string,
  timeoutMs: number,
): Promise<{ status: number; text: string } | null> {
  try {
    const { statusCode, body } = await backend.pool.request({
      path,
      method: 'GET',
      headers: backendHeaders(backend),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    return { status: statusCode, text: await body.text() };
  } catch {
    return null;
  }
}

/** A page's JSON, or null where it is not JSON. */
function json(text: string): unknown {
  return parseJsonOr(text, null);
}

export async function learnEngine(
  backend: Backend,
  timeoutMs = ASK_TIMEOUT_MS * 2,
): Promise<EngineFacts> {
  const configured: EngineKind | undefined = backend.config.engine;
  const propsPage =
    configured === undefined || configured === 'llamacpp'
      ? await get(backend, '/props', timeoutMs)
      : null;
  const props = propsPage?.status === 200 ? parseLlamaProps(json(propsPage.text)) : null;
  if (configured !== undefined) {
    return { dialect: dialectOf(configured), how: 'configured', props };
  }
  const metrics = props ? null : await get(backend, '/metrics', timeoutMs);
  const kind = detectKind({
    props: propsPage && { status: propsPage.status, json: json(propsPage.text) },
    metrics,
  });
  return { dialect: dialectOf(kind), how: 'detected', props };
}
