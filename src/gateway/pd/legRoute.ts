/**
 * Where a leg of a P/D request is routed: the pool's router over the replicas that may take it,
 * through the plain path's `routeWithRoom` (`src/serving/routing.ts`), so that with flow
 * control on a leg goes where the plain path would: onto the replica flow control's pass names
 * (finish-first chose it), else away from the replicas without room.
 *
 * The pass is the prefill leg's: flow control's view of a pool is about prefill (a replica's
 * room is its queued prefill, waiting requests and KV; finish-first's estimate is where the
 * prompt's prefill ends first; a cache owner is where the prompt's blocks are), and in a P/D
 * pool that view is over the replicas that can prefill (`FlowControl`'s readiness). The decode
 * replica computes no prompt on the disaggregated path, and is picked by decode load
 * (`src/model/decodePick.ts`), which flow control does not model.
 */
import type { FlowControl } from '../../serving/flowControl.ts';
import { canPrefill } from '../../serving/pdRoles.ts';
import type { ModelPool, PoolRoute } from '../../serving/pool.ts';
import type { ParsedRequest } from '../../serving/request.ts';
import { routeWithRoom } from '../../serving/routing.ts';

/** What routing a leg reads of the request (`PdRequest` has it). */
export interface LegRequest {
  parsed: Pick<ParsedRequest, 'blockKeys' | 'promptTokens'>;
  blockSize: number;
  tenant: string | null;
  adapter: string | null;
}

/**
 * The pool's router over the replicas `exclude` leaves (their ledger, index and policy); with
 * `flow`, through `routeWithRoom` (onto `onto`, or among those with room); null when no replica
 * is left.
 */
export function routeLeg(
  pool: ModelPool,
  r: LegRequest,
  id: string,
  exclude: (name: string) => boolean,
  flow: FlowControl | null = null,
  onto: string | null = null,
): PoolRoute | null {
  const avoid = pool.names.filter(exclude);
  try {
    return routeWithRoom(
      pool,
      {
        id,
        blockKeys: r.parsed.blockKeys,
        promptTokens: r.parsed.promptTokens,
        blockSize: r.blockSize,
        ...(r.tenant !== null && { tenant: r.tenant }),
        ...(avoid.length > 0 && { avoid }),
        ...(r.adapter !== null && { lora: r.adapter }),
      },
      flow,
      onto,
    );
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_NO_HEALTHY_REPLICA') return null;
    throw err;
  }
}

/**
 * The replica the prefill leg's attempt goes onto: the pass's (`FlowPass.replica`) on the
 * first attempt, when that replica may prefill; null otherwise (a retry routes as any other, as
 * on the plain path; a decode-only replica cannot take the leg).
 */
export function prefillOnto(
  pool: Pick<ModelPool, 'backendOf'>,
  passReplica: string | null,
  attempt: number,
): string | null {
  if (attempt > 0 || passReplica === null) return null;
  return canPrefill(pool.backendOf(passReplica)?.config.role) ? passReplica : null;
}
