/**
 * A backend's role in a disaggregated fleet: `prefill` (computes prompts and hands their KV on),
 * `decode` (pulls the KV and generates), or `both` (an aggregated replica, the default, which
 * can take either leg). Set with `--backend URL,role=prefill` or the config key `role`.
 */
export const BACKEND_ROLES = ['prefill', 'decode', 'both'] as const;
export type BackendRole = (typeof BACKEND_ROLES)[number];

export function isBackendRole(v: unknown): v is BackendRole {
  return typeof v === 'string' && (BACKEND_ROLES as readonly string[]).includes(v);
}

/** Whether a backend of this role may take the prefill leg / the decode leg. */
export const canPrefill = (role: BackendRole | undefined): boolean => role !== 'decode';
export const canDecode = (role: BackendRole | undefined): boolean => role !== 'prefill';
