/**
 * One ext_proc stream: one HTTP request through the data plane, from its headers to the end of
 * its response, as the endpoint picker protocol (v1.0.0) and the reference endpoint picker
 * handle it. Messages are handled one at a time, in order (`server.ts` queues them).
 *
 * Request path, FULL_DUPLEX_STREAMED (the mode of the inference extension's guides): headers
 * are kept and body chunks buffered until `end_of_stream` (or the trailers); then the pick, and
 * the deferred answer to the headers (`x-gateway-destination-endpoint` set, `content-length` of
 * the body sent back, `clear_route_cache`, `envoy.lb` dynamic metadata), then the body itself as
 * `streamed_response` chunks of at most 62,000 bytes. BUFFERED: the headers are let through at
 * once and the same mutation rides on the answer to the (whole) body. NONE, or headers with
 * `end_of_stream` (no body): picked by load alone at the headers.
 *
 * Response path: the headers are answered (with `x-kvroute-replica`, a label unless addresses
 * are exposed: `../serving/replicaLabels.ts`, and without `content-length`, since the body may
 * shrink); body chunks go back without the engine's `kv_transfer_params`, as the gateway relays
 * them (`../serving/engineFields.ts`): FULL_DUPLEX_STREAMED at once for an event stream (event
 * by event), whole at the end otherwise; other modes: an empty answer for a chunk that passes
 * unchanged, a `body` mutation for one that does not; the first chunk with a generated token moves the prompt off the
 * replica's queue; `end_of_stream` or the trailers end the exchange. Whatever ends it (the
 * response, an immediate response, the data plane cancelling or closing the stream), the
 * ledger entry is released exactly once.
 */
import { ApiError } from '../openai/errors.ts';
import { toApiError } from '../serving/errors.ts';
import { EngineFieldsTap } from '../serving/engineFields.ts';
import { FlowCancelled } from '../serving/flowControl.ts';
import { FirstTokenDetector } from '../serving/firstToken.ts';
import { REPLICA_HEADER } from '../serving/routing.ts';
import type { Logger } from '../serving/log.ts';
import type { GatewayMetrics } from '../serving/metrics.ts';
import { CLIENT_CLOSED_STATUS } from '../serving/metrics.ts';
import type { ReplicaLabels } from '../serving/replicaLabels.ts';
import { REQUEST_ID_HEADER } from '../serving/requestLog.ts';
import { randomUUID } from 'node:crypto';
import {
  type BodySendMode,
  DESTINATION_HEADER,
  destinationMetadata,
  type HeaderValueOption,
  headerOption,
  immediateResponse,
  type ProcessingRequest,
  type ProcessingResponse,
  readHeaders,
  type RequestKind,
  servedEndpoint,
  streamedBody,
  subsetHint,
} from './messages.ts';
import { ResponseAudit } from './audit.ts';
import { type EppPicker, endpointOfPath, type Picked } from './picker.ts';

/** Request body modes this picker serves; the others cannot carry a body-aware pick. */
const REQUEST_MODES: readonly BodySendMode[] = ['FULL_DUPLEX_STREAMED', 'BUFFERED', 'NONE'];

export interface ExchangeIo {
  send(response: ProcessingResponse): void;
  /** Closes the stream with status OK (after an immediate response). */
  end(): void;
  /** Closes the stream with a gRPC error. */
  fail(code: 'UNIMPLEMENTED' | 'INTERNAL', message: string): void;
}

export interface ExchangeContext {
  picker: Pick<EppPicker, 'pick' | 'firstToken' | 'served' | 'finish'>;
  metrics: GatewayMetrics;
  logger: Logger;
  bodyLimitBytes: number;
  /** What `x-kvroute-replica` calls a replica: a label unless addresses are exposed. */
  labels: ReplicaLabels;
}

/** What one ext_proc message does to its exchange. */
type MessageHandler = (x: Exchange, req: ProcessingRequest) => void | Promise<void>;

export class Exchange {
  readonly #ctx: ExchangeContext;
  readonly #io: ExchangeIo;
  readonly #arrivedMs = performance.now();
  #first = true;
  #requestMode: BodySendMode = 'FULL_DUPLEX_STREAMED';
  #responseMode: BodySendMode = 'FULL_DUPLEX_STREAMED';
  #headers = new Map<string, string>();
  #subset: string[] | null = null;
  #generatedId: string | null = null;
  #body: Buffer[] = [];
  #bodyBytes = 0;
  #answered = false;
  #picked: Picked | null = null;
  /** When the pick was answered (the request leaves for its endpoint). */
  #pickedMs = 0;
  /** The ledger entry is released (at the end, or early when another endpoint served). */
  #released = false;
  #streaming: boolean | null = null;
  readonly #detector = new FirstTokenDetector();
  #firstToken = false;
  #responseBody: Buffer[] = [];
  /** Takes the engine's transfer fields out of the response body (as the gateway does). */
  readonly #engineFields = new EngineFieldsTap();
  /** Reads the response's cached-token count for the pool's audit. */
  #audit: ResponseAudit | null = null;
  #status: number | null = null;
  /** The planner was told of the served response. */
  #servedTold = false;
  #closed = false;
  #settled = false;
  /** Aborted once the exchange is over: a pick waiting in the flow-control queue leaves it. */
  readonly #gone = new AbortController();

  constructor(ctx: ExchangeContext, io: ExchangeIo) {
    this.#ctx = ctx;
    this.#io = io;
  }

  /** The picked endpoint, once there is one. */
  get picked(): Picked | null {
    return this.#picked;
  }

  /** True once the exchange is over and its ledger entry released. */
  get settled(): boolean {
    return this.#settled;
  }

  async handle(req: ProcessingRequest): Promise<void> {
    if (this.#closed) return;
    if (this.#first) {
      this.#first = false;
      const config = req.protocol_config;
      if (config) {
        this.#requestMode = config.request_body_mode ?? 'NONE';
        this.#responseMode = config.response_body_mode ?? 'NONE';
      }
      if (!REQUEST_MODES.includes(this.#requestMode)) {
        this.#fail(
          'UNIMPLEMENTED',
          `request_body_mode ${this.#requestMode} cannot carry a pick by prompt: configure FULL_DUPLEX_STREAMED (as the inference extension's guides do) or BUFFERED`,
        );
        return;
      }
    }
    const kind = req.request;
    if (kind !== undefined && Object.hasOwn(Exchange.#handlers, kind)) {
      return Exchange.#handlers[kind](this, req);
    }
    this.#fail('UNIMPLEMENTED', `unknown ext_proc request '${String(kind)}'`);
  }

  /** Each ext_proc message's handler, by its `request` kind (an own key: no prototype's name). */
  static readonly #handlers: Record<RequestKind, MessageHandler> = {
    request_headers: (x, req) => x.#onRequestHeaders(req),
    request_body: (x, req) => x.#onRequestBody(req),
    request_trailers: (x) => x.#onRequestTrailers(),
    response_headers: (x, req) => x.#onResponseHeaders(req),
    response_body: (x, req) => x.#onResponseBody(req),
    response_trailers: (x) => x.#onResponseTrailers(),
  };

  /** The data plane cancelled the stream (its client went away): release, send nothing more. */
  cancel(): void {
    this.#status ??= CLIENT_CLOSED_STATUS;
    this.#closed = true;
    this.#settle();
  }

  /** The data plane closed its side: nothing more will come. */
  endOfInput(): void {
    if (!this.#closed) {
      this.#closed = true;
      this.#io.end();
    }
    this.#status ??= CLIENT_CLOSED_STATUS;
    this.#settle();
  }

  /** Anything unexpected: the stream fails with INTERNAL, the ledger is released. */
  crash(err: unknown): void {
    this.#ctx.logger.error({ err }, 'endpoint picker: exchange failed');
    this.#fail('INTERNAL', 'the endpoint picker failed on this request');
  }

  async #onRequestHeaders(req: ProcessingRequest): Promise<void> {
    const h = req.request_headers;
    this.#headers = readHeaders(h);
    this.#subset = subsetHint(req);
    if (!this.#headers.get(REQUEST_ID_HEADER)) this.#generatedId = randomUUID();
    if (h?.end_of_stream || this.#requestMode === 'NONE') {
      await this.#pickAndAnswer({ bodyless: true, endOfStream: true });
    } else if (this.#requestMode === 'BUFFERED') {
      this.#io.send({ request_headers: { response: {} } });
    }
  }

  async #onRequestBody(req: ProcessingRequest): Promise<void> {
    if (this.#answered) return;
    const b = req.request_body;
    const chunk = b?.body ?? Buffer.alloc(0);
    this.#bodyBytes += chunk.length;
    if (this.#bodyBytes > this.#ctx.bodyLimitBytes) {
      this.#immediate(
        new ApiError(
          'ERR_BODY_TOO_LARGE',
          `request body is larger than ${this.#ctx.bodyLimitBytes} bytes`,
        ),
      );
      return;
    }
    this.#body.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    // BUFFERED sends the whole body in one message (end_of_stream unset when trailers follow).
    if (b?.end_of_stream || this.#requestMode === 'BUFFERED') {
      await this.#pickAndAnswer({ bodyless: false, endOfStream: true });
    }
  }

  async #onRequestTrailers(): Promise<void> {
    // Trailers end a FULL_DUPLEX_STREAMED body that came without end_of_stream.
    if (!this.#answered) await this.#pickAndAnswer({ bodyless: false, endOfStream: false });
    if (!this.#closed) this.#io.send({ request_trailers: {} });
  }

  async #pickAndAnswer(how: { bodyless: boolean; endOfStream: boolean }): Promise<void> {
    this.#answered = true;
    const body = this.#body.length === 1 ? this.#body[0]! : Buffer.concat(this.#body);
    this.#body = [];
    let picked: Picked;
    try {
      picked = await this.#ctx.picker.pick({
        headers: this.#headers,
        body,
        subset: this.#subset,
        signal: this.#gone.signal,
      });
    } catch (err) {
      // Given up while queued: already settled, nothing to answer.
      if (!(err instanceof FlowCancelled)) this.#immediate(toApiError(err));
      return;
    }
    this.#picked = picked;
    this.#pickedMs = performance.now();
    if (this.#closed) {
      // Cancelled while picking (already settled): nothing will be sent there.
      this.#release();
      return;
    }
    const setHeaders: HeaderValueOption[] = [headerOption(DESTINATION_HEADER, picked.endpoint)];
    if (this.#generatedId !== null) {
      setHeaders.push(headerOption(REQUEST_ID_HEADER, this.#generatedId));
    }
    const dynamic_metadata = destinationMetadata(picked.endpoint);
    if (this.#requestMode === 'BUFFERED' && !how.bodyless) {
      const mutated = picked.body !== body;
      if (mutated) setHeaders.push(headerOption('content-length', String(picked.body.length)));
      this.#io.send({
        request_body: {
          response: {
            header_mutation: { set_headers: setHeaders },
            ...(mutated && { body_mutation: { body: picked.body } }),
            clear_route_cache: true,
          },
        },
        dynamic_metadata,
      });
      this.#observePick(picked);
      return;
    }
    // The body goes back whole, so the data plane must send its length, not the client's.
    if (!how.bodyless && picked.body.length > 0) {
      setHeaders.push(headerOption('content-length', String(picked.body.length)));
    }
    this.#io.send({
      request_headers: {
        response: { clear_route_cache: true, header_mutation: { set_headers: setHeaders } },
      },
      dynamic_metadata,
    });
    this.#observePick(picked);
    if (how.bodyless) return;
    for (const r of streamedBody('request_body', picked.body, how.endOfStream)) this.#io.send(r);
  }

  /** From the request's headers to the answer naming its endpoint (the gateway's pre-upstream). */
  #observePick(picked: Picked): void {
    const m = this.#ctx.metrics;
    m.preUpstreamSeconds
      .series(m.modelLabel(picked.model), m.tenantLabel(picked.tenant))
      .observe((performance.now() - this.#arrivedMs) / 1000);
  }

  #onResponseHeaders(req: ProcessingRequest): void {
    const h = readHeaders(req.response_headers);
    const status = Number(h.get(':status') ?? h.get('status'));
    if (Number.isInteger(status) && status > 0) this.#status = status;
    const picked = this.#picked;
    this.#streaming =
      (h.get('content-type') ?? '').includes('text/event-stream') || (picked?.stream ?? false);
    const contentType = h.get('content-type') ?? '';
    // An answer without a content type is read as what the request asked for.
    this.#engineFields.start(
      this.#status ?? 0,
      contentType !== '' ? contentType : this.#streaming ? 'text/event-stream' : '',
    );
    if (picked?.auditable) {
      this.#audit = new ResponseAudit(picked);
      this.#audit.headers(this.#status ?? 0, contentType);
    }
    let replica = picked?.replica ?? null;
    const served = servedEndpoint(req);
    if (picked && served !== null && served !== picked.endpoint) {
      // The data plane sent it elsewhere (a retry, fail-open): the picked replica's ledger
      // must not keep a request it never got.
      this.#ctx.logger.info(
        { picked: picked.endpoint, served },
        'endpoint picker: another endpoint served the request; its ledger entry is released',
      );
      this.#release();
      this.#audit = null;
      replica = served;
    }
    const set =
      replica === null ? [] : [headerOption(REPLICA_HEADER, this.#ctx.labels.of(replica))];
    // The body may lose the engine's fields on its way back: its length is no longer known.
    const remove =
      h.has('content-length') && this.#responseMode !== 'NONE' ? ['content-length'] : [];
    this.#io.send({
      response_headers: {
        response:
          set.length === 0 && remove.length === 0
            ? {}
            : {
                header_mutation: {
                  set_headers: set,
                  ...(remove.length > 0 && { remove_headers: remove }),
                },
              },
      },
    });
    if (req.response_headers?.end_of_stream) this.#settle();
  }

  #onResponseBody(req: ProcessingRequest): void {
    const b = req.response_body;
    const raw = b?.body ?? Buffer.alloc(0);
    const chunk = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
    const endOfStream = b?.end_of_stream ?? false;
    const streaming = this.#streaming ?? this.#picked?.stream ?? false;
    this.#audit?.body(chunk);
    if (streaming && !this.#firstToken && this.#detector.feed(chunk)) this.#onFirstToken();
    if (endOfStream) this.#endAudit();
    if (this.#responseMode !== 'FULL_DUPLEX_STREAMED') {
      // Each chunk is replaced by what the tap lets out of it (a JSON answer: all at the end).
      const out = this.#relayed(chunk, endOfStream);
      this.#io.send({
        response_body: { response: out.equals(chunk) ? {} : { body_mutation: { body: out } } },
      });
    } else if (streaming) {
      const out = this.#relayed(chunk, endOfStream);
      for (const r of streamedBody('response_body', out, endOfStream)) this.#io.send(r);
    } else {
      this.#responseBody.push(chunk);
      if (endOfStream) this.#flushResponseBody(true);
    }
    if (endOfStream) this.#settle();
  }

  /** The response ended whole: the audit judges it, and the planner is told (once, under 400). */
  #endAudit(): void {
    const audit = this.#audit;
    this.#audit = null;
    audit?.end(this.#ctx.metrics);
    const picked = this.#picked;
    if (picked && !this.#servedTold && this.#status !== null && this.#status < 400) {
      this.#servedTold = true;
      this.#ctx.picker.served(picked, audit?.completionTokens ?? null);
    }
  }

  #onResponseTrailers(): void {
    this.#endAudit();
    if (this.#responseMode === 'FULL_DUPLEX_STREAMED' && this.#responseBody.length === 0) {
      // An event stream's last, unfinished event, held by the tap.
      const rest = this.#engineFields.end();
      if (rest.length > 0)
        for (const r of streamedBody('response_body', rest, false)) this.#io.send(r);
    }
    this.#flushResponseBody(false);
    this.#io.send({ response_trailers: {} });
    this.#settle();
  }

  /** What goes back of a response chunk: the engine's transfer fields taken out. */
  #relayed(chunk: Buffer, endOfStream: boolean): Buffer {
    const out = this.#engineFields.data(chunk);
    if (!endOfStream) return out;
    const rest = this.#engineFields.end();
    return rest.length === 0 ? out : Buffer.concat([out, rest]);
  }

  #flushResponseBody(endOfStream: boolean): void {
    if (this.#responseBody.length === 0 && !endOfStream) return;
    const body = this.#relayed(Buffer.concat(this.#responseBody), true);
    this.#responseBody = [];
    for (const r of streamedBody('response_body', body, endOfStream)) this.#io.send(r);
  }

  #onFirstToken(): void {
    this.#firstToken = true;
    this.#audit?.firstToken(performance.now() - this.#pickedMs);
    const picked = this.#picked;
    if (!picked || this.#released) return;
    this.#ctx.picker.firstToken(picked, Date.now());
    const m = this.#ctx.metrics;
    m.ttftSeconds
      .series(m.modelLabel(picked.model), m.tenantLabel(picked.tenant), picked.replica)
      .observe((performance.now() - this.#arrivedMs) / 1000);
  }

  #immediate(err: ApiError): void {
    if (this.#closed) return;
    this.#status = err.status;
    if (err.status >= 500) {
      this.#ctx.logger.warn({ err: err.message, status: err.status }, 'endpoint picker: no pick');
    }
    this.#io.send(immediateResponse(err));
    this.#closed = true;
    this.#io.end();
    this.#settle();
  }

  #fail(code: 'UNIMPLEMENTED' | 'INTERNAL', message: string): void {
    if (!this.#closed) {
      this.#closed = true;
      this.#io.fail(code, message);
    }
    this.#status ??= 500;
    this.#settle();
  }

  #release(): void {
    if (this.#released || !this.#picked) return;
    this.#released = true;
    this.#ctx.picker.finish(this.#picked, Date.now());
  }

  #settle(): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#gone.abort();
    this.#release();
    const m = this.#ctx.metrics;
    const endpoint = endpointOfPath(this.#headers.get(':path')) ?? 'other';
    const picked = this.#picked;
    const model = m.modelLabel(picked?.model ?? null);
    const tenant = m.tenantLabel(picked?.tenant ?? null);
    m.requests.series(endpoint, String(this.#status ?? CLIENT_CLOSED_STATUS), model, tenant).inc();
    if (picked)
      m.e2eSeconds.series(model, tenant).observe((performance.now() - this.#arrivedMs) / 1000);
  }
}
