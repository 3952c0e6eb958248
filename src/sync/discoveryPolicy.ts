/**
 * Which registered engines a gateway following discovery takes. Anyone who can write the bucket
 * can write an entry, so an entry is taken only when
 * - its key is its own address's (`engineKey(url)`): an engine's entry overwritten with another
 *   address is refused, the engine registered there stays;
 * - its URL's host, and its events and replay endpoints' hosts, match the operator's allow-list
 *   (`--discovery-allow`): CIDRs (`10.0.0.0/8`, `fd00::/8`), host names (`engine-0.svc`), or
 *   `*.suffix` (`*.engines.svc.cluster.local`); names are compared as written, never resolved;
 * - fewer than `maxBackends` engines are held from discovery already.
 * Pure: discovery.ts asks, this answers.
 */
import { BlockList, isIP } from 'node:net';

export interface DiscoveryPolicy {
  /** Address patterns; empty: any address (no allow-list). */
  allow: string[];
  /** Most backends held from discovery at once. */
  maxBackends: number;
}

export const DEFAULT_MAX_DISCOVERED_BACKENDS = 256;

/** Why a pattern is not one, or null when it is. */
export function patternError(pattern: string): string | null {
  const cidr = /^([^/]+)\/(\d{1,3})$/.exec(pattern);
  if (cidr) {
    const family = isIP(cidr[1]!);
    const bits = Number(cidr[2]);
    if (family === 0) return `'${pattern}': not an IP address before the /`;
    if (bits > (family === 4 ? 32 : 128)) return `'${pattern}': prefix past the address`;
    return null;
  }
  if (isIP(pattern) !== 0) return null;
  if (
    /^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/.test(
      pattern,
    )
  ) {
    return null;
  }
  return `'${pattern}': a CIDR (10.0.0.0/8), an IP, a host name or *.suffix`;
}

/** A matcher of hosts (an IP or a name, IPv6 with or without brackets) for `patterns`. */
export function allowListOf(patterns: readonly string[]): (host: string) => boolean {
  if (patterns.length === 0) return () => true;
  const blocks = new BlockList();
  const names: string[] = [];
  const suffixes: string[] = [];
  for (const p of patterns) {
    const cidr = /^([^/]+)\/(\d{1,3})$/.exec(p);
    const family = isIP(cidr ? cidr[1]! : p);
    if (family !== 0) {
      const type = family === 4 ? 'ipv4' : 'ipv6';
      if (cidr) blocks.addSubnet(cidr[1]!, Number(cidr[2]), type);
      else blocks.addAddress(p, type);
    } else if (p.startsWith('*.')) suffixes.push(p.slice(1).toLowerCase());
    else names.push(p.toLowerCase());
  }
  return (host) => {
    const h = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
    const family = isIP(h);
    if (family !== 0) return blocks.check(h, family === 4 ? 'ipv4' : 'ipv6');
    return names.includes(h) || suffixes.some((s) => h.endsWith(s) && h.length > s.length);
  };
}

/** The host of `http(s)://H:P/...` or `tcp://H:P`; null when there is none. */
export function hostOf(address: string): string | null {
  try {
    const host = new URL(address).hostname;
    return host === '' ? null : host;
  } catch {
    return null;
  }
}

export interface Candidate {
  /** The bucket key it was written under. */
  key: string;
  /** The key its URL would have (discovery's engineKey). */
  ownKey: string;
  url: string;
  events: string | null;
  replay: string | null;
}

/** Why a written entry is refused, or null when it is taken. */
export function refusal(
  c: Candidate,
  allowed: (host: string) => boolean,
  held: { has(key: string): boolean; size: number },
  maxBackends: number,
): string | null {
  if (c.key !== c.ownKey) return 'its key is another address’s';
  for (const address of [c.url, c.events, c.replay]) {
    if (address === null) continue;
    const host = hostOf(address);
    if (host === null || !allowed(host)) return `${address} is outside --discovery-allow`;
  }
  if (!held.has(c.key) && held.size >= maxBackends) {
    return `already ${held.size} engines from discovery (--discovery-max-backends)`;
  }
  return null;
}
