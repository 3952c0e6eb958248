/**
 * Readers of config values that name the key on error (`config: KEY must be ...`, or the flag
 * itself for a `--flag`): shared by the config file's sections.
 */
import { GatewayError } from './errors.ts';

export const configError = (key: string, message: string): GatewayError =>
  new GatewayError('ERR_CONFIG', `${key.startsWith('--') ? '' : 'config: '}${key} ${message}`, {
    param: key,
  });

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function str(v: unknown, key: string): string {
  if (typeof v !== 'string') throw configError(key, 'must be a string');
  return v;
}

/** Optional inclusive bounds of a number. */
type Bounds = [min?: number, max?: number];

export function num(v: unknown, key: string, ...[min = -Infinity, max = Infinity]: Bounds): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw configError(key, 'must be a number');
  if (v < min || v > max) throw configError(key, `must be within [${min}, ${max}], got ${v}`);
  return v;
}

export function int(v: unknown, key: string, ...bounds: Bounds): number {
  const n = num(v, key, ...bounds);
  if (!Number.isInteger(n)) throw configError(key, `must be an integer, got ${n}`);
  return n;
}

/** One entry of a mapping whose values are mappings: its name, its value and its config key. */
export interface MappingEntry {
  name: string;
  spec: Record<string, unknown>;
  /** `key.name`, for errors about the entry and its fields. */
  key: string;
}

/**
 * The entries of `v`, which must be a mapping (`key` names it) whose every value is a mapping
 * (`entryMust` says what each must be, after "must be").
 */
export function mappingEntries(v: unknown, key: string, entryMust: string): MappingEntry[] {
  if (!isRecord(v)) throw configError(key, 'must be a mapping');
  return Object.entries(v).map(([name, spec]) => {
    const entryKey = `${key}.${name}`;
    if (!isRecord(spec)) throw configError(entryKey, `must be ${entryMust}`);
    return { name, spec, key: entryKey };
  });
}
