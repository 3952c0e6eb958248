/**
 * SGLang's Prometheus page read into the gateway's load report (pure).
 *
 * Names from python/sglang/srt/metrics/collector.py (`SchedulerMetricsCollector`), gauges set
 * by each scheduler process: `sglang:num_running_reqs`, `sglang:num_queue_reqs`,
 * `sglang:token_usage` (0..1, KV tokens used over the pool). Their labels are the scheduler's:
 * `model_name`, `engine_type`, and `tp_rank` / `pp_rank` / `dp_rank` where set. Every scheduler
 * of one data-parallel rank reports the same queue (with metrics enabled on every TP rank, each
 * rank repeats it), so counts are the max within a `dp_rank` and the sum over ranks; usage is
 * the max of all. Returns the shape the gateway's vLLM parser returns (serving/scraper.ts).
 */
import type { EngineReport } from '../../serving/scraper.ts';

export const SGLANG_RUNNING = 'sglang:num_running_reqs';
export const SGLANG_QUEUED = 'sglang:num_queue_reqs';
export const SGLANG_TOKEN_USAGE = 'sglang:token_usage';

type Gauge = typeof SGLANG_RUNNING | typeof SGLANG_QUEUED | typeof SGLANG_TOKEN_USAGE;
const GAUGES: ReadonlySet<string> = new Set([SGLANG_RUNNING, SGLANG_QUEUED, SGLANG_TOKEN_USAGE]);

/** Null when the page has none of the three gauges (not an SGLang page). */
export function parseSglangMetrics(text: string): EngineReport | null {
  const perRank = new Map<Gauge, Map<string, number>>();
  for (const line of text.split('\n')) {
    if (line.length === 0 || line.charCodeAt(0) === 35 /* # */) continue;
    const sample = readSample(line);
    if (!sample || !GAUGES.has(sample.name)) continue;
    const name = sample.name as Gauge;
    const rank = name === SGLANG_TOKEN_USAGE ? '' : (sample.labels.dp_rank ?? '');
    let ranks = perRank.get(name);
    if (!ranks) perRank.set(name, (ranks = new Map()));
    ranks.set(rank, Math.max(ranks.get(rank) ?? Number.NEGATIVE_INFINITY, sample.value));
  }
  if (perRank.size === 0) return null;
  const sum = (name: Gauge) => [...(perRank.get(name)?.values() ?? [])].reduce((a, b) => a + b, 0);
  return {
    kvUsage: Math.min(1, Math.max(0, sum(SGLANG_TOKEN_USAGE))),
    running: sum(SGLANG_RUNNING),
    waiting: sum(SGLANG_QUEUED),
  };
}

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** One exposition line: `name{a="x",b="y"} value [timestamp]`; null when unreadable. */
function readSample(line: string): Sample | null {
  const brace = line.indexOf('{');
  const space = line.indexOf(' ');
  if (space <= 0) return null;
  const hasLabels = brace > 0 && brace < space;
  const name = line.slice(0, hasLabels ? brace : space);
  const labels: Record<string, string> = {};
  let rest = line.slice(space);
  if (hasLabels) {
    const close = line.indexOf('}', brace);
    if (close < 0) return null;
    for (const m of line.slice(brace + 1, close).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[m[1]!] = m[2]!;
    }
    rest = line.slice(close + 1);
  }
  const value = Number(rest.trim().split(/\s+/)[0]);
  return Number.isFinite(value) ? { name, labels, value } : null;
}
