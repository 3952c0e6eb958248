/**
 * Readers for the fields of an OpenAI request body: each returns the value, or null when the
 * field is absent (or JSON null), and throws a 400 naming the field when it has the wrong type.
 */
import { badRequest } from './errors.ts';

export type Body = Record<string, unknown>;

export function asObject(body: unknown): Body {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw badRequest('request body must be a JSON object');
  }
  return body as Body;
}

export function optString(body: Body, field: string): string | null {
  const v = body[field];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw badRequest(`'${field}' must be a string`, field);
  return v;
}

export function optBool(body: Body, field: string): boolean | null {
  const v = body[field];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'boolean') throw badRequest(`'${field}' must be a boolean`, field);
  return v;
}

export function optInt(body: Body, field: string, min = Number.MIN_SAFE_INTEGER): number | null {
  const v = body[field];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
    throw badRequest(`'${field}' must be an integer`, field);
  }
  if (v < min) throw badRequest(`'${field}' must be at least ${min}, got ${v}`, field);
  return v;
}

export function optNumber(body: Body, field: string): number | null {
  const v = body[field];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    throw badRequest(`'${field}' must be a number`, field);
  }
  return v;
}
