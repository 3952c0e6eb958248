/**
 * The endpoint picker's decision, over the gateway's model pools (`src/serving/pool.ts`, its
 * contract in that folder's README): the request is read as the gateway reads it (the model
 * picks the pool, whose tokenizer gives the prompt's ids and salted block keys), admitted as
 * the gateway admits it, and routed by the pool's router among the candidates the data plane
 * allows. What it returns holds the router's ledger entry until `finish`.
 *
 * An endpoint picker does not authenticate: the Gateway in front of it does. The tenant, when
 * there is one, is the `x-kvroute-tenant` header (set by the Gateway, e.g. from a verified
 * token's claim); it salts the block keys and the `cache_salt` written into the forwarded body,
 * and its admission limits apply, exactly as in `kvroute serve` without client keys.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import { ApiError } from '../openai/errors.ts';
import { asObject, optString } from '../openai/fields.ts';
import { parseJson } from '../openai/http.ts';
import { decodeUtf8 } from '../openai/utf8.ts';
import type { Endpoint } from '../openai/request.ts';
import type { GatewayAdmission } from '../serving/admission.ts';
import { auditable } from '../serving/audit/observe.ts';
import { type Authenticator, TENANT_HEADER } from '../serving/auth.ts';
import { refuseGatewayOnlyFields } from '../serving/clientFields.ts';
import { toApiError } from '../serving/errors.ts';
import { type FlowControl, PRIORITY_HEADER } from '../serving/flowControl.ts';
import { resolveModel, routeWithRoom } from '../serving/routing.ts';
import type { GatewayMetrics } from '../serving/metrics.ts';
import { type GatewayPlanner, outputTokensOf } from '../serving/planner.ts';
import type { ModelPool, PoolRoute } from '../serving/pool.ts';
import type { ModelPools } from '../serving/pools.ts';
import { type ParsedRequest, parseRequest } from '../serving/request.ts';
import { type EndpointBook, splitEndpoint } from './endpoints.ts';

/** The generate paths: their prompts are tokenized and routed by cache; any other by load. */
const GENERATE_PATHS: Record<string, Endpoint> = {
  '/v1/completions': 'completions',
  '/v1/chat/completions': 'chat',
};

/** The generate endpoint of a request's `:path` (its query left out), or null. */
export function endpointOfPath(path: string | undefined): Endpoint | null {
  const bare = (path ?? '/').split('?')[0]!;
  return Object.hasOwn(GENERATE_PATHS, bare) ? GENERATE_PATHS[bare]! : null;
}

export interface PickerContext {
  pools: ModelPools;
  /** No client keys: it only turns the tenant header into a tenant and its salt. */
  auth: Authenticator;
  admission: GatewayAdmission;
  /** `--flow-control`: requests wait while their pool is saturated; null: off. */
  flow: FlowControl | null;
  /** `--planner`: each request served whole is observed into its pool's window; null: off. */
  planner?: GatewayPlanner | null;
  metrics: GatewayMetrics;
  endpoints: EndpointBook;
  blockSize: number;
  nextLedgerId(): string;
}

export interface PickInput {
  /** Request headers, names in lower case (`:path`, `:method` among them). */
  headers: ReadonlyMap<string, string>;
  /** The whole request body (empty for a request without one). */
  body: Buffer;
  /** The subset hint: null when none was set. */
  subset: readonly string[] | null;
  /** Aborts when the data plane gives the request up (a waiting request then leaves the queue). */
  signal?: AbortSignal;
}

/** A picked endpoint. Hand it back to `finish` once the exchange is over, however it ended. */
export interface Picked {
  /** `ip:port` for the header and the metadata. */
  readonly endpoint: string;
  /** The replica's name in the router (`/router/replicas`, `x-kvroute-replica`). */
  readonly replica: string;
  /** The body to forward: the client's, or with the tenant's salt or priority written in. */
  readonly body: Buffer;
  /** The request asked for a stream (`"stream": true`). */
  readonly stream: boolean;
  readonly model: string | null;
  readonly tenant: string | null;
  readonly pool: ModelPool;
  readonly route: PoolRoute;
  readonly release: () => void;
  /** The router's prediction is for this many prompt tokens (the audit's denominator). */
  readonly promptTokens: number;
  /** A response the audit can grade (a generate request, not a completions batch). */
  readonly auditable: boolean;
  /** What the online planner keeps of it once served; null: not a generate request. */
  readonly planned: PlannedRequest | null;
}

/** A picked generate request as the online planner will observe it (`EppPicker.served`). */
export interface PlannedRequest {
  /** When the picker got it (wall clock), ms: its arrival in the planner's window. */
  readonly atMs: number;
  readonly promptTokens: number;
  readonly blockKeys: readonly BlockKey[];
  /** Output tokens when the response reports no usage: its max_tokens, else a default. */
  readonly outputTokensAsked: number;
}

export class EppPicker {
  readonly #ctx: PickerContext;

  constructor(ctx: PickerContext) {
    this.#ctx = ctx;
  }

  /**
   * Reads, admits and routes one request. Throws an ApiError: 400 for a malformed body, 404 for
   * an unknown model, 429 when admission refuses or the flow-control queue is full, 503 when no
   * candidate endpoint can take it or the request waited past the flow-control deadline;
   * FlowCancelled when `input.signal` aborted while it waited.
   */
  async pick(input: PickInput): Promise<Picked> {
    const arrivedAtMs = Date.now();
    const { headers } = input;
    const { caller, json, model, pool, adapter, parsed } = await this.#read(input);
    const avoid = await this.#outsideSubset(pool, input.subset);
    const priorityClass = this.#ctx.flow?.classOf(headers.get(PRIORITY_HEADER), caller.tenant);
    const admitted = this.#ctx.admission.admit(
      {
        tenant: caller.tenant,
        promptTokens: parsed?.promptTokens ?? 0,
        priority: parsed?.priority ?? null,
        body: parsed?.body ?? input.body,
        queues: () => pool.queues(Date.now()),
      },
      Date.now(),
    );
    const id = this.#ctx.nextLedgerId();
    let onto: string | null;
    try {
      onto = await this.#waitInFlow(pool, id, caller.tenant, priorityClass, parsed, input.signal);
    } catch (err) {
      admitted.release();
      throw err;
    }
    let route: PoolRoute;
    try {
      route = this.#route(pool, id, parsed, caller.tenant, avoid, adapter, onto);
    } catch (err) {
      admitted.release();
      throw toApiError(err);
    }
    try {
      this.#ctx.admission.checkRoute(route.decision, caller.tenant);
    } catch (err) {
      pool.finish(route, Date.now());
      admitted.release();
      throw err;
    }
    const stream = parsed?.stream ?? false;
    if (parsed !== null && !stream) pool.watchPrefill(route, parsed.blockKeys);
    return {
      // Every candidate resolved before routing (#outsideSubset avoids the rest).
      endpoint: this.#ctx.endpoints.get(route.backend.config.url)!,
      replica: route.backend.name,
      body: admitted.body,
      stream,
      model,
      tenant: caller.tenant,
      pool,
      route,
      release: admitted.release,
      promptTokens: parsed?.promptTokens ?? 0,
      auditable: parsed !== null && auditable(json),
      planned:
        parsed === null
          ? null
          : {
              atMs: arrivedAtMs,
              promptTokens: parsed.promptTokens,
              blockKeys: parsed.blockKeys,
              outputTokensAsked: outputTokensOf(null, json),
            },
    };
  }

  /**
   * Flow control: when every endpoint of the pool is saturated the request waits here (llm-d's
   * EPP holds it in its flow controller at the same point, before scheduling). Returns the
   * replica finish-first chose, or null (the router chooses; also without flow control).
   */
  async #waitInFlow(
    pool: ModelPool,
    id: string,
    tenant: string | null,
    priorityClass: string | undefined,
    parsed: ParsedRequest | null,
    signal: AbortSignal | undefined,
  ): Promise<string | null> {
    const flow = this.#ctx.flow;
    if (!flow || priorityClass === undefined) return null;
    const entered = flow.enter(
      pool,
      {
        id,
        tenant,
        priorityClass,
        costTokens: parsed?.promptTokens ?? 0,
        ...(parsed && {
          prefix: { blockKeys: parsed.blockKeys, blockSize: this.#ctx.blockSize },
        }),
      },
      signal,
    );
    // Not awaited when it goes at once: it routes in this turn, seen by the next arrival.
    return (entered instanceof Promise ? await entered : entered).replica;
  }

  /** The request's body read and, on a generate path, tokenized for its pool. */
  async #read(input: PickInput) {
    const { headers } = input;
    const endpoint = endpointOfPath(headers.get(':path'));
    const caller = this.#ctx.auth.authenticate(undefined, headers.get(TENANT_HEADER));
    const json = endpoint ? parseJson(input.body) : lenientJson(input.body);
    // The generate paths are checked by parseRequest; any other body the engines may read here.
    if (!endpoint) refuseGatewayOnlyFields(json);
    const model = endpoint ? optString(asObject(json), 'model') : modelOf(json);
    const { pool, adapter } = endpoint
      ? await resolveModel(this.#ctx, endpoint, json, model)
      : await this.#ctx.pools.resolve(model);
    const parsed = endpoint
      ? await parseRequest(endpoint, input.body, {
          tokenizer: pool.requestTokenizer,
          blockSize: this.#ctx.blockSize,
          tenantSalt: caller.tenantSalt,
          maxModelLen: pool.maxModelLen(),
          loraName: adapter,
          json,
        })
      : null;
    return { caller, json, model, pool, adapter, parsed };
  }

  /** Routes (away from `avoid`) and records the decision's time. */
  #route(
    pool: ModelPool,
    id: string,
    parsed: ParsedRequest | null,
    tenant: string | null,
    avoid: string[],
    adapter: string | null,
    onto: string | null,
  ): PoolRoute {
    const startedNs = process.hrtime.bigint();
    const route = routeWithRoom(
      pool,
      {
        id,
        blockKeys: parsed?.blockKeys ?? [],
        promptTokens: parsed?.promptTokens ?? 0,
        blockSize: this.#ctx.blockSize,
        ...(tenant !== null && { tenant }),
        ...(avoid.length > 0 && { avoid }),
        ...(adapter !== null && { lora: adapter }),
      },
      this.#ctx.flow,
      onto,
    );
    const seconds = Number(process.hrtime.bigint() - startedNs) / 1e9;
    this.#ctx.metrics.recordDecision(route.decision, seconds, pool.model);
    return route;
  }

  /** The first generated token passed: the prompt leaves the replica's queue. */
  firstToken(picked: Picked, nowMs: number): void {
    picked.pool.firstToken(picked.route, nowMs);
  }

  /**
   * Its response ended whole with a status under 400: the planner observes it, with the
   * `usage.completion_tokens` the response reported (null: none seen, its max_tokens counts).
   */
  served(picked: Picked, completionTokens: number | null): void {
    const p = picked.planned;
    if (!this.#ctx.planner || p === null) return;
    this.#ctx.planner.observe(picked.pool.model, {
      atMs: p.atMs,
      promptTokens: p.promptTokens,
      outputTokens: completionTokens ?? p.outputTokensAsked,
      blockKeys: p.blockKeys,
    });
  }

  /** The exchange is over: the ledger entry and the admission slot are released. */
  finish(picked: Picked, nowMs: number): void {
    picked.pool.finish(picked.route, nowMs);
    picked.release();
  }

  /**
   * Names of the pool's backends the data plane does not allow, or whose address is not known.
   * The subset hint allows an `ip:port` exactly, or every port of a bare address. An empty
   * hint, or one naming none of the pool's endpoints, is the protocol's 503.
   */
  async #outsideSubset(pool: ModelPool, subset: readonly string[] | null): Promise<string[]> {
    if (subset !== null && subset.length === 0) {
      throw noEndpoint('the subset hint (envoy.lb.subset_hint) is empty');
    }
    const exact = new Set<string>();
    const anyPort = new Set<string>();
    for (const entry of subset ?? []) {
      const { ip, port } = splitEndpoint(entry);
      if (port === null) anyPort.add(ip);
      else exact.add(entry);
    }
    const avoid: string[] = [];
    let allowed = 0;
    for (const b of pool.backends()) {
      if (b.state !== 'active' && b.state !== 'down') continue;
      const endpoint = await this.#ctx.endpoints.resolve(b.url);
      const ok =
        endpoint !== null &&
        (subset === null || exact.has(endpoint) || anyPort.has(splitEndpoint(endpoint).ip));
      if (ok) allowed++;
      else avoid.push(b.name);
    }
    if (subset !== null && allowed === 0) {
      throw noEndpoint(`no endpoint of the subset hint is in the pool: ${subset.join(', ')}`);
    }
    return avoid;
  }
}

const noEndpoint = (message: string): ApiError => new ApiError('ERR_NO_HEALTHY_BACKEND', message);

/** A body outside the generate paths is not ours to judge: its JSON `model` if it has one. */
function lenientJson(body: Buffer): unknown {
  if (body.length === 0) return null;
  try {
    return JSON.parse(decodeUtf8(body));
  } catch {
    return null;
  }
}

function modelOf(json: unknown): string | null {
  const model = (json as { model?: unknown } | null)?.model;
  return typeof json === 'object' && typeof model === 'string' ? model : null;
}
