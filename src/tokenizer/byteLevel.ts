/**
 * GPT-2's byte-level alphabet: each of the 256 byte values as one printable character, the form
 * in which byte-level BPE vocabularies (GPT-2, Llama 3, Qwen, cl100k as Hugging Face converts it)
 * spell their tokens. Printable ASCII and most of Latin-1 stand for themselves; the rest map to
 * U+0100 onwards.
 */
export const BYTE_CHARS: readonly string[] = (() => {
  const direct = new Set<number>();
  for (let b = 0x21; b <= 0x7e; b++) direct.add(b);
  for (let b = 0xa1; b <= 0xac; b++) direct.add(b);
  for (let b = 0xae; b <= 0xff; b++) direct.add(b);
  const chars = new Array<string>(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) chars[b] = String.fromCharCode(direct.has(b) ? b : 256 + extra++);
  return chars;
})();

const utf8 = new TextEncoder();

export function utf8Bytes(text: string): Uint8Array {
  return utf8.encode(text);
}

/** Text as byte-level characters (one per UTF-8 byte). */
export function toByteChars(bytes: Uint8Array): string {
  let out = '';
  for (let i = 0; i < bytes.length; i++) out += BYTE_CHARS[bytes[i]!];
  return out;
}
