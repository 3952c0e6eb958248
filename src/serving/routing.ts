/**
 * A request's pool resolved and routed, as the gateway and the endpoint picker both do it; the
 * header that names the replica that served it.
 */
import { ApiError } from '../openai/errors.ts';
import { type Endpoint, readGenerationRequest } from '../openai/request.ts';
import type { FlowControl } from './flowControl.ts';
import type { ModelPool, PoolRoute } from './pool.ts';
import type { ModelPools, Target } from './pools.ts';
import { RouterError, type RouteRequest } from '../router/index.ts';

/** Names the replica that served a response (its label, `replicaLabels.ts`), as llm-d's gateway names its destination. */
export const REPLICA_HEADER = 'x-kvroute-replica';

/**
 * `pool.route`; with flow control on, away from the replicas without room (llm-d's scheduler
 * filters after its flow controller), or onto `onto`, the replica finish-first chose for it
 * (`FlowPass.replica`), unless that leaves none for this request.
 */
export function routeWithRoom(
  pool: ModelPool,
  request: RouteRequest,
  flow: FlowControl | null,
  onto: string | null = null,
): PoolRoute {
  const roomless = flow?.avoidFor(pool, onto) ?? [];
  if (roomless.length > 0) {
    try {
      return pool.route({ ...request, avoid: [...(request.avoid ?? []), ...roomless] }, Date.now());
    } catch (err) {
      if (!(err instanceof RouterError)) throw err;
    }
  }
  return pool.route(request, Date.now());
}

/** The request's pool; as vLLM, a body of the wrong shape is a 400 before its model is looked up. */
export async function resolveModel(
  ctx: { pools: ModelPools },
  endpoint: Endpoint,
  json: unknown,
  model: string | null,
): Promise<Target> {
  try {
    return await ctx.pools.resolve(model);
  } catch (err) {
    // Token ids are checked against the vocabulary later, as vLLM does after the model check.
    if (err instanceof ApiError && err.param === 'model') {
      readGenerationRequest(endpoint, json, Number.MAX_SAFE_INTEGER);
    }
    throw err;
  }
}
