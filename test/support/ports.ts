/**
 * Ports for servers whose port must be known before they start (a doc's command line, a
 * nats-server flag, a topic naming its own port). A port-0 bind asked a moment ago can be taken
 * before the server binds it: port-0 binds and outgoing connections (ZMQ reconnects, HTTP
 * clients) all draw from the kernel's ephemeral range. These come from below that range, from a
 * block of this process's own, each checked free by a bind, so only another test's explicit bind
 * could take one in between.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const BLOCK_PORTS = 64;

/** The ephemeral range's first port (Linux; 32768 where it cannot be read). */
function ephemeralLow(): number {
  try {
    const low = Number(
      readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0],
    );
    return Number.isInteger(low) && low > 12_000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

const LOW = ephemeralLow() - 12_000;
const BLOCKS = Math.floor(12_000 / BLOCK_PORTS);
// The pid picks the block: the suite's files run as separate processes side by side.
const BLOCK_START = LOW + (process.pid % BLOCKS) * BLOCK_PORTS;
let next = 0;

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A port on 127.0.0.1 free now, outside the ephemeral range, never handed out twice here. */
export async function freePort(): Promise<number> {
  for (let tried = 0; tried < 12_000; tried++) {
    const port = LOW + ((BLOCK_START - LOW + next++) % 12_000);
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port in ${LOW}..${LOW + 11_999}`);
}
