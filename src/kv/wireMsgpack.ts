/**
 * A minimal MessagePack writer that emits the same bytes as Python's msgspec for the types the KV
 * event wire format uses: non-negative integers in the smallest unsigned form (uint64 for hashes
 * at or above 2^63, where generic JS encoders fall back to int64 or float64), floats as float64,
 * str8 for 32..255-byte strings, nil, arrays and maps. Kept separate so the event encoder reads as
 * a schema, not as byte fiddling.
 */

const INITIAL_BYTES = 1024;
/** `#tiered`'s m8 for a type with no one-byte tier (arrays and maps). */
const NO_MARKER = -1;

export class MsgpackWriter {
  #buf: Buffer;
  #pos = 0;

  constructor(initialBytes = INITIAL_BYTES) {
    this.#buf = Buffer.allocUnsafe(initialBytes);
  }

  /** The bytes written so far (a copy, so the writer can be reused). */
  take(): Buffer {
    const out = Buffer.from(this.#buf.subarray(0, this.#pos));
    this.#pos = 0;
    return out;
  }

  #room(bytes: number): void {
    if (this.#pos + bytes <= this.#buf.length) return;
    let size = this.#buf.length * 2;
    while (size < this.#pos + bytes) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.#buf.copy(next, 0, 0, this.#pos);
    this.#buf = next;
  }

  /**
   * Writes a type `marker` and reserves the `payloadBytes` after it; returns where the payload
   * goes (write it through `this.#buf` read after this call: room may have moved the buffer).
   */
  #marker(marker: number, payloadBytes: number): number {
    this.#room(1 + payloadBytes);
    this.#buf[this.#pos++] = marker;
    const at = this.#pos;
    this.#pos += payloadBytes;
    return at;
  }

  nil(): this {
    this.#marker(0xc0, 0);
    return this;
  }

  bool(value: boolean): this {
    this.#marker(value ? 0xc3 : 0xc2, 0);
    return this;
  }

  /** A safe integer (negative ones as msgspec does: fixneg, int8..int64). */
  int(value: number): this {
    if (!Number.isSafeInteger(value)) throw new RangeError(`not a safe integer: ${value}`);
    if (value >= 0) return this.#uint(value);
    this.#room(9);
    const b = this.#buf;
    if (value >= -32) b[this.#pos++] = value & 0xff;
    else if (value >= -0x80) {
      b[this.#pos++] = 0xd0;
      b.writeInt8(value, this.#pos);
      this.#pos += 1;
    } else if (value >= -0x8000) {
      b[this.#pos++] = 0xd1;
      b.writeInt16BE(value, this.#pos);
      this.#pos += 2;
    } else if (value >= -0x80000000) {
      b[this.#pos++] = 0xd2;
      b.writeInt32BE(value, this.#pos);
      this.#pos += 4;
    } else {
      b[this.#pos++] = 0xd3;
      b.writeBigInt64BE(BigInt(value), this.#pos);
      this.#pos += 8;
    }
    return this;
  }

  #uint(value: number): this {
    if (value >= 0x100000000) return this.u64(BigInt(value));
    this.#tiered(value, 0x80, 0x00, 0xcc, 0xcd, 0xce);
    return this;
  }

  /** An unsigned 64-bit integer (block hashes), in the smallest unsigned form that holds it. */
  u64(value: bigint): this {
    if (value < 0n || value > 0xffffffffffffffffn) throw new RangeError(`not a u64: ${value}`);
    if (value < 0x100000000n) return this.#uint(Number(value));
    const at = this.#marker(0xcf, 8);
    this.#buf.writeBigUInt64BE(value, at);
    return this;
  }

  float64(value: number): this {
    const at = this.#marker(0xcb, 8);
    this.#buf.writeDoubleBE(value, at);
    return this;
  }

  str(value: string): this {
    const bytes = Buffer.byteLength(value, 'utf8');
    this.#tiered(bytes, 32, 0xa0, 0xd9, 0xda, 0xdb);
    this.#room(bytes);
    this.#pos += this.#buf.write(value, this.#pos, 'utf8');
    return this;
  }

  bin(value: Uint8Array): this {
    this.#tiered(value.length, 0, 0x00, 0xc4, 0xc5, 0xc6);
    this.#room(value.length);
    this.#buf.set(value, this.#pos);
    this.#pos += value.length;
    return this;
  }

  array(length: number): this {
    this.#tiered(length, 16, 0x90, NO_MARKER, 0xdc, 0xdd);
    return this;
  }

  map(entries: number): this {
    this.#tiered(entries, 16, 0x80, NO_MARKER, 0xde, 0xdf);
    return this;
  }

  /**
   * A length or an unsigned value in msgpack's tiered form: `fix | n` in one byte below
   * `fixBelow`; else a marker and `n` in one byte below 2^8 (`m8`; NO_MARKER for a type without
   * that tier), in two below 2^16 (`m16`), in four (`m32`).
   */
  #tiered(n: number, fixBelow: number, fix: number, m8: number, m16: number, m32: number): void {
    this.#room(5);
    const b = this.#buf;
    if (n < fixBelow) b[this.#pos++] = fix | n;
    else if (n < 0x100 && m8 !== NO_MARKER) {
      b[this.#pos++] = m8;
      b[this.#pos++] = n;
    } else if (n < 0x10000) {
      b[this.#pos++] = m16;
      b.writeUInt16BE(n, this.#pos);
      this.#pos += 2;
    } else {
      b[this.#pos++] = m32;
      b.writeUInt32BE(n, this.#pos);
      this.#pos += 4;
    }
  }

  /** Any plain value: used for free-form fields (extra_keys entries). */
  value(v: unknown): this {
    if (v === null || v === undefined) return this.nil();
    if (typeof v === 'string') return this.str(v);
    if (typeof v === 'boolean') return this.bool(v);
    if (typeof v === 'bigint') return v >= 0n ? this.u64(v) : this.int(Number(v));
    if (typeof v === 'number') return Number.isSafeInteger(v) ? this.int(v) : this.float64(v);
    if (v instanceof Uint8Array) return this.bin(v);
    if (Array.isArray(v)) {
      this.array(v.length);
      for (const item of v) this.value(item);
      return this;
    }
    throw new TypeError(`cannot encode ${typeof v} in a KV event`);
  }
}
