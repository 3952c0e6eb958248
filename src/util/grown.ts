/** Growth of the typed arrays the cores keep per replica, per request or per slot. */

type Grows = Uint8Array | Int32Array | Float64Array;

/** `to` (a new, larger array) holding `from`'s values first; the rest is as `to` was made. */
export function grown<T extends Grows>(from: T, to: T): T {
  to.set(from);
  return to;
}
