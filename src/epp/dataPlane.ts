/**
 * The data plane's side of the protocol, as Envoy's ext_proc filter plays it: one stream per
 * HTTP request, messages in, the picker's answers read back in order. For the tests and
 * `npm run bench:epp`; a deployment has Envoy (or another Gateway) here.
 */
import { credentials } from '@grpc/grpc-js';
import type { BodySendMode, PbStruct } from './messages.ts';
import { eppClients } from './protos.ts';

/** A ProcessingResponse as the client decodes it (every field present, oneof named). */
// biome-ignore lint/suspicious/noExplicitAny: decoded protobuf messages are untyped here
export type Decoded = any;

export interface StreamStatus {
  code: number;
  details: string;
}

export function dataPlaneClient(address: string) {
  const { ExternalProcessor } = eppClients();
  return new ExternalProcessor(address, credentials.createInsecure());
}

export class DataPlaneStream {
  // biome-ignore lint/suspicious/noExplicitAny: the generated client's duplex call
  readonly #call: any;
  readonly #queue: Decoded[] = [];
  #waiter: ((r: Decoded | null) => void) | null = null;
  #done = false;
  /** The stream's final status (OK after the picker ends it, CANCELLED after `cancel`). */
  readonly status: Promise<StreamStatus>;

  // biome-ignore lint/suspicious/noExplicitAny: the generated client
  constructor(client: any) {
    this.#call = client.Process();
    this.#call.on('data', (r: Decoded) => {
      if (this.#waiter) {
        const w = this.#waiter;
        this.#waiter = null;
        w(r);
      } else this.#queue.push(r);
    });
    this.status = new Promise((resolve) => {
      this.#call.on('status', (s: StreamStatus) => resolve({ code: s.code, details: s.details }));
    });
    this.#call.on('error', () => {});
    const finish = () => {
      this.#done = true;
      this.#waiter?.(null);
      this.#waiter = null;
    };
    this.#call.on('end', finish);
    this.#call.on('close', finish);
  }

  send(message: Record<string, unknown>): void {
    this.#call.write(message);
  }

  /** The next answer; null when the picker ended the stream. Rejects after `timeoutMs`. */
  next(timeoutMs = 10_000): Promise<Decoded | null> {
    const queued = this.#queue.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (this.#done) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiter = null;
        reject(new Error(`no ext_proc answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#waiter = (r) => {
        clearTimeout(timer);
        resolve(r);
      };
    });
  }

  /** Half-closes: the data plane has nothing more to send. */
  end(): void {
    this.#call.end();
  }

  /** Cancels the stream, as Envoy does when its client goes away. */
  cancel(): void {
    this.#call.cancel();
  }
}

/** `HttpHeaders` with each value in `raw_value`, as Envoy sends them. */
export function httpHeaders(headers: Record<string, string>, endOfStream = false) {
  return {
    headers: {
      headers: Object.entries(headers).map(([key, v]) => ({ key, raw_value: Buffer.from(v) })),
    },
    end_of_stream: endOfStream,
  };
}

/** The first message of a POST: its headers and the filter's processing modes. */
export function requestHeaders(
  path: string,
  options: {
    mode?: BodySendMode;
    responseMode?: BodySendMode;
    headers?: Record<string, string>;
    metadata?: Record<string, PbStruct>;
    endOfStream?: boolean;
  } = {},
): Record<string, unknown> {
  const mode = options.mode ?? 'FULL_DUPLEX_STREAMED';
  return {
    request_headers: httpHeaders(
      {
        ':authority': 'gateway.local',
        ':method': options.endOfStream ? 'GET' : 'POST',
        ':path': path,
        ':scheme': 'http',
        'content-type': 'application/json',
        ...options.headers,
      },
      options.endOfStream ?? false,
    ),
    protocol_config: {
      request_body_mode: mode,
      response_body_mode: options.responseMode ?? mode,
    },
    ...(options.metadata && { metadata_context: { filter_metadata: options.metadata } }),
  };
}

/** The subset hint as the data plane writes it into the filter metadata. */
export function subsetMetadata(endpoints: readonly string[]): Record<string, PbStruct> {
  return {
    'envoy.lb.subset_hint': {
      fields: {
        'x-gateway-destination-endpoint-subset': {
          listValue: { values: endpoints.map((e) => ({ stringValue: e })) },
        },
      },
    },
  };
}

/** The served endpoint as the data plane reports it on the response path. */
export function servedMetadata(endpoint: string): Record<string, PbStruct> {
  return {
    'envoy.lb': {
      fields: { 'x-gateway-destination-endpoint-served': { stringValue: endpoint } },
    },
  };
}

/** A header value of a decoded `set_headers` list (raw_value first, as the picker writes it). */
export function setHeader(response: Decoded, key: string): string | undefined {
  const set: Decoded[] = response?.response?.header_mutation?.set_headers ?? [];
  const h = set.find((o) => o.header.key.toLowerCase() === key.toLowerCase())?.header;
  if (!h) return undefined;
  return h.raw_value?.length > 0 ? Buffer.from(h.raw_value).toString('utf8') : h.value;
}

/** One gRPC health Check, as a probe asks it: the status, or the call's error code. */
export async function checkHealth(
  address: string,
  service: string,
): Promise<{ status: string } | { code: number }> {
  const { Health } = eppClients();
  const client = new Health(address, credentials.createInsecure());
  try {
    return await new Promise((resolve) =>
      client.Check({ service }, (err: { code: number } | null, res: { status: string }) =>
        resolve(err ? { code: err.code } : { status: res.status }),
      ),
    );
  } finally {
    client.close();
  }
}
