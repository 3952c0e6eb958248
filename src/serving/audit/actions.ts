/**
 * The repairs of a pool's audit, carried out on its router and its backends' watches. Only the
 * named replica is touched: its index entries, its event replay, its routing record.
 */
import { DEFAULT_APPROX_CAPACITY_BLOCKS, type Router } from '../../router/index.ts';
import type { Backend } from '../backends.ts';
import type { SubscriberStats } from '../subscriber.ts';
import type { TokenizerChecker } from '../tokenizerCheck.ts';
import type { AuditActions } from './poolAudit.ts';

export interface AuditMember {
  backend: Backend;
  /** Clears nothing itself: replays the event buffer into the router. */
  rebuild(): Promise<void>;
  stats(): SubscriberStats | null;
}

export interface ActionDeps {
  router: Router;
  checker: TokenizerChecker;
  member(replica: string): AuditMember | undefined;
  /** The replica's KV pool in blocks (`vllm:cache_config_info`), when it said. */
  kvBlocks(replica: string): number | undefined;
}

export function makeAuditActions(deps: ActionDeps): AuditActions {
  const indexed = (replica: string): number =>
    deps.router.snapshot().replicas.find((r) => r.name === replica)?.indexedBlocks ?? 0;
  return {
    async replay(replica) {
      const m = deps.member(replica);
      if (!m || m.backend.config.replay === null || m.stats() === null) return 'unavailable';
      const before = indexed(replica);
      const replayedBefore = m.stats()?.batchesReplayed ?? 0;
      deps.router.clearReplica(replica);
      await m.rebuild();
      if ((m.stats()?.batchesReplayed ?? 0) === replayedBefore) return 'unavailable';
      return indexed(replica) < before ? 'mended' : 'unchanged';
    },
    distrust(replica) {
      deps.router.distrustEvents(replica, deps.kvBlocks(replica) ?? DEFAULT_APPROX_CAPACITY_BLOCKS);
    },
    trust(replica) {
      deps.router.trustEvents(replica);
    },
    clear(replica) {
      deps.router.clearReplica(replica);
    },
    async diagnose(replica, approxOnly) {
      const m = deps.member(replica);
      if (!m) return 'the replica left';
      const result = await deps.checker.check(m.backend);
      const causes: string[] = [];
      if (result.agreement === 'differs') {
        causes.push(`tokenizer differs (${result.detail ?? 'token ids differ'})`);
      } else if (result.agreement === 'unknown') {
        causes.push('tokenizer agreement unknown (/tokenize did not answer)');
      }
      if (approxOnly) {
        if (causes.length > 0) return causes.join('; ');
        return "tokenizer agrees: on the approximate index the router's own record predicts, and the engine keeps blocks it counts as evicted (a pool larger than the capacity used), or renders chats with another template than /tokenize uses";
      }
      const stats = m.stats();
      if (stats === null) causes.push('no KV event stream (no events endpoint)');
      else if (stats.gapsUnfilled > 0 || stats.decodeErrors > 0) {
        causes.push(
          `event stream lossy (${stats.gapsUnfilled} gaps unfilled, ${stats.decodeErrors} batches undecodable)`,
        );
      }
      if (causes.length === 0) {
        return 'tokenizer agrees and the event stream has no gap: BlockStored lost at the engine, or chats rendered with another template than /tokenize uses';
      }
      return causes.join('; ');
    },
  };
}
