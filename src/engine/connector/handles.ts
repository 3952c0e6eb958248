/**
 * The names a prefiller gives its held transfers (`remote_request_id`): 128 random bits, never
 * the engine's own request id (`req-1, req-2, ...` would let anyone name another's blocks).
 */
import { randomBytes } from 'node:crypto';

export const HANDLE_PREFIX = 'xfer-';

export class TransferHandles {
  readonly #byHandle = new Map<string, string>();

  /** A fresh handle for an engine request's held blocks. */
  issue(engineRequestId: string): string {
    const handle = `${HANDLE_PREFIX}${randomBytes(16).toString('hex')}`;
    this.#byHandle.set(handle, engineRequestId);
    return handle;
  }

  /** The engine request a handle names, or undefined. */
  resolve(handle: string): string | undefined {
    return this.#byHandle.get(handle);
  }

  forget(handle: string): void {
    this.#byHandle.delete(handle);
  }

  /** Forgets the handles whose blocks are no longer held (pulled, expired, freed). */
  sweep(isHeld: (engineRequestId: string) => boolean): void {
    for (const [handle, id] of this.#byHandle) if (!isHeld(id)) this.#byHandle.delete(handle);
  }

  get size(): number {
    return this.#byHandle.size;
  }
}
