/**
 * What watches a response as it passes to the client (first token, engine fields, usage), and two
 * watchers chained into one.
 */
/** A reader in the response path: the bytes it returns are what the client gets. */
export interface ResponseTap {
  start(status: number, contentType: string): void;
  data(chunk: Buffer): Buffer;
  /** What it still held, sent before the response ends. */
  end(): Buffer;
}

/** Two taps in a row: what the first returns is what the second sees. */
export function chainTaps(first: ResponseTap, second: ResponseTap): ResponseTap {
  return {
    start(status, contentType) {
      first.start(status, contentType);
      second.start(status, contentType);
    },
    data(chunk) {
      const passed = first.data(chunk);
      return passed.length === 0 ? passed : second.data(passed);
    },
    end() {
      const rest = first.end();
      const passed = rest.length === 0 ? rest : second.data(rest);
      const last = second.end();
      if (last.length === 0) return passed;
      return passed.length === 0 ? last : Buffer.concat([passed, last]);
    },
  };
}
