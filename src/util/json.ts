/** JSON text read where it is JSON. */

/** `text` parsed as JSON, or `fallback` where it does not parse. */
export function parseJsonOr<T>(text: string, fallback: T): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return fallback;
  }
}
