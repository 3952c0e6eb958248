/**
 * NATS subjects of a kvroute cluster. A model name becomes one subject token: NATS tokens may not
 * hold `.`, `*`, `>` or whitespace, and model names often hold dots (`Llama-3.3-70B`), so
 * anything but letters, digits, `-` and `_` is written `~XX` (hex of each UTF-8 byte); the
 * pool of unknown models is `~`.
 */

/** Default cluster name (`kvroute serve --cluster`). */
export const DEFAULT_CLUSTER = 'default';

/** A cluster name must be one subject token itself. */
export function isClusterName(name: string): boolean {
  return /^[A-Za-z0-9_-]+$/.test(name);
}

export function modelToken(model: string | null): string {
  if (model === null) return '~';
  let out = '';
  for (const byte of Buffer.from(model, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9_-]/.test(c) ? c : `~${byte.toString(16).padStart(2, '0')}`;
  }
  return out;
}

export interface Subjects {
  /** Decisions and releases of one model pool, batched (every 5 ms at most). */
  route(model: string | null): string;
  /** Every pool's records (the subscription). */
  allRoutes: string;
  /** Each gateway's heartbeat (and goodbye). */
  heartbeat: string;
  /**
   * A peer's own snapshot subject: a joiner asks each peer it has heard beating for that peer's
   * in-flight entries here (request/reply), never an anonymous first responder.
   */
  snapshot(peer: string): string;
  /** The online planners' requests and counts of one pool (plannerRecords.ts). */
  planner(pool: string): string;
  /** Every pool's (the subscription). */
  allPlanner: string;
}

export function subjectsOf(cluster: string): Subjects {
  const base = `kvroute.${cluster}`;
  return {
    route: (model) => `${base}.${modelToken(model)}.route`,
    allRoutes: `${base}.*.route`,
    heartbeat: `${base}.hb`,
    snapshot: (peer) => `${base}.snapshot.${peer}`,
    planner: (pool) => `${base}.${modelToken(pool)}.planner`,
    allPlanner: `${base}.*.planner`,
  };
}
