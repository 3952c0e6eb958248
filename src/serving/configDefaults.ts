/**
 * The gateway config's defaults and accepted values, in a module that imports nothing: the
 * config reader (`config.ts`) and `kvroute serve`'s option table (`src/cli/options/serve.ts`)
 * both take them from here, so each default has one source.
 */
export const DEFAULT_PORT = 8080;
export const DEFAULT_HOST = '127.0.0.1';
export const DEFAULT_SCRAPE_MS = 100;
export const DEFAULT_BLOCK_SIZE = 16;
/** OpenAI bodies with long prompts run to a few MB; anything past this is refused with 413. */
export const DEFAULT_BODY_LIMIT_BYTES = 8 * 1024 * 1024;
/** Attempts after the first when a backend refuses or resets before any byte reached the client. */
export const DEFAULT_MAX_RETRIES = 2;
/** Replicas the embedded fleet starts when no backend is given. */
export const DEFAULT_EMBEDDED_REPLICAS = 4;
/**
 * No byte of a response by then: the attempt is given up, retried on another replica, and the
 * silent one is probed. The worst modelled time to first token is a whole 131,072-token context
 * prefilled beside a full decode batch on the seed replica (Llama 3.3 70B, TP=2 H200): 64 chunks
 * of 2,048 tokens at 71.3 us/token, about 9.6 s. A few seconds above it, a live engine is never
 * cut for a long prefill; a frozen one holds its requests 15 s instead of the 300 s body timeout.
 */
export const DEFAULT_FIRST_BYTE_TIMEOUT_MS = 15_000;
/** A client must send its headers within this (slowloris), and its whole request within the next. */
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
/** A backend whose KV events never arrived while it served requests: warned about this often. */
export const DEFAULT_EVENTS_CHECK_MS = 60_000;
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The session header read when none is named. */
export const DEFAULT_SESSION_HEADER = 'x-session-id';
/**
 * Default slack: a conversation keeps its replica while that one has at most this many more
 * prompt tokens queued than the least loaded (about a second of prefill on a 70B TP=2 H200
 * replica at 71 us/token is 14,000; a quarter of that is spent on a cache the router cannot see).
 */
export const DEFAULT_SESSION_SLACK_TOKENS = 4_096;

export const DEFAULT_INDEX = 'events';
/** 'builtin': the simulated engines' cl100k_base. */
export const DEFAULT_TOKENIZER = 'builtin';
export const TOKENIZE_MODES = ['local', 'remote'] as const;
export type TokenizeMode = (typeof TOKENIZE_MODES)[number];
export const DEFAULT_TOKENIZE: TokenizeMode = 'local';
/** The router's seed (tie breaks, the random policy), as `kvroute sim`'s. */
export const DEFAULT_ROUTER_SEED = 1;
export const DEFAULT_LOG_LEVEL: LogLevel = 'info';

/**
 * The gateway config's defaults above, by its field names (config.ts's `defaultConfig` spreads
 * them; its other fields' defaults belong to the modules that own them).
 */
export const GATEWAY_DEFAULTS = {
  host: DEFAULT_HOST,
  port: DEFAULT_PORT,
  index: DEFAULT_INDEX,
  tokenizer: DEFAULT_TOKENIZER,
  tokenize: DEFAULT_TOKENIZE,
  scrapeMs: DEFAULT_SCRAPE_MS,
  blockSize: DEFAULT_BLOCK_SIZE,
  bodyLimitBytes: DEFAULT_BODY_LIMIT_BYTES,
  maxRetries: DEFAULT_MAX_RETRIES,
  seed: DEFAULT_ROUTER_SEED,
  embeddedReplicas: DEFAULT_EMBEDDED_REPLICAS,
  eventsCheckMs: DEFAULT_EVENTS_CHECK_MS,
  firstByteTimeoutMs: DEFAULT_FIRST_BYTE_TIMEOUT_MS,
  headersTimeoutMs: DEFAULT_HEADERS_TIMEOUT_MS,
  requestTimeoutMs: DEFAULT_REQUEST_TIMEOUT_MS,
  logLevel: DEFAULT_LOG_LEVEL,
} as const;
