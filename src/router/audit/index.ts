/** The router's self-audit: predicted against reported cached tokens, per replica. */
export { type AuditBound, auditBound, binomialTail, thresholdFor } from './bound.ts';
export {
  type AuditChange,
  type AuditEvidence,
  type AuditOptions,
  type AuditSample,
  type AuditState,
  type AuditVerdict,
  CacheAudit,
  classify,
  DEFAULT_AUDIT_WINDOW,
  DEFAULT_FALSE_ALARM_RATE,
  DEFAULT_HEALTHY_MISMATCH_RATE,
  DEFAULT_TOLERANCE_BLOCKS,
  DEFAULT_TOLERANCE_FRACTION,
  judgeCounts,
} from './verdict.ts';
export {
  type ClaimSpeed,
  type ClampedReport,
  clampReported,
  exceedsPool,
  MIN_POWER_RATIO,
  poolBoundBlocks,
  REFUTE_FRACTION,
  SMALL_POOL_PROMPTS,
  type SpeedEvidence,
  smallPool,
  speedEvidenceOf,
  testClaimSpeed,
  windowForPool,
} from './claims.ts';
