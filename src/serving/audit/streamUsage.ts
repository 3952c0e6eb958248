/**
 * Whether to ask upstream for usage on the client's behalf, and the body that asks. A streamed
 * request without `stream_options` gets `"stream_options":{"include_usage":true}` spliced in
 * before the body's closing brace (the rest of its bytes untouched); its usage chunk is then
 * taken out of the stream on the way back (`usageTap.ts`). A client that sent `stream_options`
 * keeps its own choice: with `include_usage` it gets (and the audit reads) the usage chunk;
 * without it, the audit falls back to the replica's prefix-cache hit counter.
 */

const ASK = Buffer.from(',"stream_options":{"include_usage":true}');

export interface UsageRequest {
  body: Buffer;
  /** The gateway asked for usage the client did not: strip the usage chunk. */
  asked: boolean;
  /** The response will carry usage (asked by the client or by the gateway). */
  reports: boolean;
}

export function requestUsage(body: Buffer, json: unknown): UsageRequest {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    return { body, asked: false, reports: false };
  }
  const fields = json as { stream?: unknown; stream_options?: unknown };
  if (fields.stream !== true) return { body, asked: false, reports: true };
  if (fields.stream_options !== undefined && fields.stream_options !== null) {
    const include = (fields.stream_options as { include_usage?: unknown }).include_usage;
    // vLLM reads a stream_options without include_usage as asking for it.
    return { body, asked: false, reports: include !== false };
  }
  let end = body.length - 1;
  while (end >= 0 && isSpace(body[end]!)) end--;
  if (end < 1 || body[end] !== 0x7d /* } */) return { body, asked: false, reports: false };
  const spliced = Buffer.concat([body.subarray(0, end), ASK, body.subarray(end)]);
  return { body: spliced, asked: true, reports: true };
}

function isSpace(b: number): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
}
