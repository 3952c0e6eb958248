/** Small node:http helpers: bounded body reading, JSON and error responses. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError, toErrorBody } from './errors.ts';

/** Reads the whole body; refuses one above `limitBytes` with 413 without buffering it. */
export function readBody(req: IncomingMessage, limitBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const tooLarge = () =>
      new ApiError('ERR_BODY_TOO_LARGE', `request body is larger than ${limitBytes} bytes`);
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limitBytes) {
      reject(tooLarge());
      return;
    }
    const chunks: Buffer[] = [];
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > limitBytes) {
        req.removeAllListeners('data');
        req.resume();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks, bytes)));
    req.on('error', reject);
  });
}

export function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new ApiError('ERR_BAD_JSON', `malformed JSON body: ${(err as Error).message}`);
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

export function sendError(res: ServerResponse, err: ApiError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  // After a 413 the rest of the body is not worth reading: close instead of draining it.
  if (err.status === 413) res.setHeader('connection', 'close');
  sendJson(res, err.status, toErrorBody(err));
}
