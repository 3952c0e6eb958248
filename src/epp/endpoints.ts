/**
 * Backends as the data plane names them: `ip:port` of the pod, written as Go's
 * `net.JoinHostPort` writes it (`[addr]:port` for IPv6), which the reference endpoint picker
 * sends and Envoy's ORIGINAL_DST cluster connects to. A backend's URL gives host and port (80 or
 * 443 when it names none); a host that is not an IP literal (a StatefulSet pod's DNS name) is
 * looked up, kept for REFRESH_MS, then looked up again in the background (the old address is
 * used meanwhile, and kept when a lookup fails).
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';

/** A resolved name is looked up again after this long (a pod that restarts changes IP). */
export const REFRESH_MS = 5_000;

interface Entry {
  endpoint: string | null;
  resolvedAtMs: number;
  pending: Promise<void> | null;
}

/** `host:port` with IPv6 in brackets, as net.JoinHostPort. */
export function joinHostPort(host: string, port: number | string): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Host (brackets removed) and port of a backend URL. */
export function hostPortOf(url: string): { host: string; port: string } {
  const u = new URL(url);
  const host = u.hostname.replace(/^\[|\]$/g, '');
  return { host, port: u.port || (u.protocol === 'https:' ? '443' : '80') };
}

/**
 * The IP part of a subset hint entry (`ip:port`, `[v6]:port`, or a bare address) and its port
 * when it has one.
 */
export function splitEndpoint(entry: string): { ip: string; port: string | null } {
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  if (v6) return { ip: v6[1]!, port: v6[2] ?? null };
  if (isIP(entry) === 6) return { ip: entry, port: null };
  const colon = entry.lastIndexOf(':');
  if (colon < 0) return { ip: entry, port: null };
  return { ip: entry.slice(0, colon), port: entry.slice(colon + 1) };
}

export class EndpointBook {
  readonly #entries = new Map<string, Entry>();
  readonly #nowMs: () => number;

  constructor(nowMs: () => number = Date.now) {
    this.#nowMs = nowMs;
  }

  /** The backend's `ip:port` now, or null while its name has never resolved. */
  get(url: string): string | null {
    const entry = this.#entries.get(url) ?? this.#start(url);
    if (entry.pending === null && this.#nowMs() - entry.resolvedAtMs >= REFRESH_MS) {
      entry.pending = this.#resolve(url, entry);
    }
    return entry.endpoint;
  }

  /** The backend's `ip:port`, waiting for a first lookup if needed; null when it fails. */
  async resolve(url: string): Promise<string | null> {
    const known = this.get(url);
    if (known !== null) return known;
    await this.#entries.get(url)?.pending;
    return this.#entries.get(url)?.endpoint ?? null;
  }

  #start(url: string): Entry {
    const { host, port } = hostPortOf(url);
    const literal = isIP(host) !== 0;
    const entry: Entry = {
      endpoint: literal ? joinHostPort(host, port) : null,
      // An IP literal never needs looking up again.
      resolvedAtMs: literal ? Number.POSITIVE_INFINITY : Number.NEGATIVE_INFINITY,
      pending: null,
    };
    this.#entries.set(url, entry);
    return entry;
  }

  async #resolve(url: string, entry: Entry): Promise<void> {
    const { host, port } = hostPortOf(url);
    try {
      const { address } = await lookup(host);
      entry.endpoint = joinHostPort(address, port);
    } catch {
      // Keep the last address: a DNS hiccup should not take a live pod out.
    }
    entry.resolvedAtMs = this.#nowMs();
    entry.pending = null;
  }
}
