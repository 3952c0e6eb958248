/**
 * `kvroute sim --pd P:D` (one disaggregated run: P prefill and D decode replicas, the transfer
 * modelled) and `kvroute sim --search --pd auto` (the fewest GPUs meeting the SLO, aggregated and
 * disaggregated): text or `--json` with `"pd": {"aggregated": {replicas, gpus},
 * "disaggregated": {prefill, decode, gpus}}`.
 */
import { DEFAULT_TRANSFER_GBPS, DEFAULT_TRANSFER_LATENCY_MS } from '../engine/connector/nixl.ts';
import type { SimConfig } from '../sim/run.ts';
import { type PdRunResult, searchPd, simulatePd } from '../sim/pd/runPd.ts';
import { type Flags, UsageError } from './args.ts';
import { readerOf } from './options/read.ts';
import { num, options, str } from './options/table.ts';

export interface PdFlags {
  /** A P:D split, or 'auto' (with --search). */
  split: { prefill: number; decode: number } | 'auto';
  transferGbps: number;
  transferLatencyMs: number;
}

const PD_HELP =
  "P prefill and D decode replicas (vLLM's NixlConnector protocol, the real router over the " +
  'prefill pool, the decode pick by decode load, the KV transfer modelled); with --search, --pd ' +
  'auto: the fewest GPUs aggregated and over every P:D split, meeting the SLO';

/** The P/D options, one row each (sim's flag spec and `--help` come from here). */
// biome-ignore format: one option a line
export const SIM_PD_OPTIONS = options({
  pd: str('P:D', PD_HELP, { section: 'disaggregated prefill and decode' }),
  'transfer-gbps': num('F', 'KV link, GB/s', { above: 0, default: DEFAULT_TRANSFER_GBPS }),
  'transfer-latency-ms': num('F', 'per transfer', { min: 0, default: DEFAULT_TRANSFER_LATENCY_MS }),
});

/** The P/D run `--pd` asks for (`search`: the run is `--search`), null without `--pd`. */
export function readPdFlags(flags: Flags, search: boolean): PdFlags | null {
  const option = readerOf(SIM_PD_OPTIONS, flags);
  const pd = option('pd');
  const gbps = option('transfer-gbps');
  const latencyMs = option('transfer-latency-ms');
  if (pd === undefined) {
    if (gbps !== undefined || latencyMs !== undefined) {
      throw new UsageError('--transfer-gbps and --transfer-latency-ms need --pd');
    }
    return null;
  }
  let split: PdFlags['split'];
  if (pd === 'auto') {
    if (!search) throw new UsageError('--pd auto needs --search (or give --pd P:D)');
    split = 'auto';
  } else {
    const m = /^(\d+):(\d+)$/.exec(pd);
    if (!m || Number(m[1]) < 1 || Number(m[2]) < 1) {
      throw new UsageError(
        `--pd takes P:D (prefill:decode replicas, each >= 1) or auto, got '${pd}'`,
      );
    }
    if (search) throw new UsageError('--search takes --pd auto, not a fixed split');
    split = { prefill: Number(m[1]), decode: Number(m[2]) };
  }
  return {
    split,
    transferGbps: gbps ?? DEFAULT_TRANSFER_GBPS,
    transferLatencyMs: latencyMs ?? DEFAULT_TRANSFER_LATENCY_MS,
  };
}

const ms = (x: number) =>
  Number.isNaN(x) ? '-' : x >= 1000 ? `${(x / 1000).toFixed(2)} s` : `${x.toFixed(1)} ms`;

export function pdRunText(r: PdRunResult): string {
  return [
    `P/D ${r.prefill}:${r.decode} (${r.gpus} GPUs), link ${r.transferGbps} GB/s`,
    `  requests   ${r.completed} of ${r.arrived} completed`,
    `  TTFT       p50 ${ms(r.ttftMs.p50)}  p99 ${ms(r.ttftMs.p99)}`,
    `  TPOT       p50 ${ms(r.tpotMs.p50)}  p99 ${ms(r.tpotMs.p99)}`,
    `  TTFT parts prefill p50 ${ms(r.prefillMs.p50)} p99 ${ms(r.prefillMs.p99)}; transfer p50 ${ms(r.transferMs.p50)} p99 ${ms(r.transferMs.p99)}; decode first token p50 ${ms(r.decodeFirstMs.p50)} p99 ${ms(r.decodeFirstMs.p99)}`,
    `  prefill-pool hit rate ${(r.prefillHitRate * 100).toFixed(1)} %`,
  ].join('\n');
}

export function runSimPd(base: SimConfig, pd: PdFlags, json: boolean, maxReplicas: number): number {
  if (pd.split === 'auto') {
    const s = searchPd(base, base.slo, { ...pd, maxReplicas });
    const body = {
      slo: s.slo,
      transferGbps: s.transferGbps,
      pd: { aggregated: s.aggregated, disaggregated: s.disaggregated },
      probes: s.probes,
    };
    if (json) process.stdout.write(`${JSON.stringify(body)}\n`);
    else {
      const a = s.aggregated;
      const d = s.disaggregated;
      process.stdout.write(
        `fewest GPUs at TTFT p99 ${s.slo.ttftP99Ms ?? '-'} ms, TPOT p99 ${s.slo.tpotP99Ms} ms, link ${s.transferGbps} GB/s\n` +
          `  aggregated     ${a ? `${a.replicas} replicas, ${a.gpus} GPUs` : `none up to ${maxReplicas}`}\n` +
          `  disaggregated  ${d ? `${d.prefill}:${d.decode}, ${d.gpus} GPUs` : `none up to ${maxReplicas}`}\n`,
      );
    }
    return 0;
  }
  const r = simulatePd(base, {
    ...pd.split,
    transferGbps: pd.transferGbps,
    transferLatencyMs: pd.transferLatencyMs,
  });
  process.stdout.write(json ? `${JSON.stringify({ pd: r })}\n` : `${pdRunText(r)}\n`);
  return r.errors === 0 ? 0 : 1;
}
