/**
 * Does the gateway tokenize as each backend does? The router keys its index on token ids, so a
 * gateway whose ids differ from a backend's sees every prompt as uncached there, and KV-aware
 * routing silently degrades to least-queued. At start and whenever a backend comes back, two
 * probes (a plain completion and a chat with a system message) go to the backend's tokenizer,
 * asked in its engine's dialect (`engines/`: vLLM's `POST /tokenize`, llama-server's
 * `/apply-template` and `/tokenize {content}`), and their ids are compared with the gateway's. The result per replica
 * ('agrees' | 'differs' | 'unknown': no answer, or no /tokenize) is shown in /router/replicas and
 * the `kvroute_gateway_tokenizer_agrees` gauge; a mismatch is logged loudly. The answers also
 * carry each backend's `max_model_len`, the gateway's bound for refusing over-long prompts.
 */
import { sglangTokenizeRequest } from '../engines/sglang/tokenize.ts';
import { chatInput } from '../tokenizer/chat.ts';
import type { PromptTokenizer } from '../tokenizer/promptTokenizer.ts';
import type { Backend } from './backends.ts';
import { askBackend } from './requestTokenizers.ts';

export type TokenizerAgreement = 'agrees' | 'differs' | 'unknown';

const PROBE_TIMEOUT_MS = 5_000;

/** The probes: plain text with numbers and non-ASCII, and a two-message chat. */
export const PROBE_PROMPT =
  'KV-aware routing probe: the quick brown fox jumps over 13 lazy dogs, 2,048 tokens each. Ünïcödé, 日本語, emoji 🎉.';
export const PROBE_MESSAGES = [
  { role: 'system', content: 'You are a helpful assistant. Answer briefly.' },
  { role: 'user', content: 'Hello! What is 2 + 2?' },
];

export interface CheckResult {
  agreement: TokenizerAgreement;
  /** What differed or failed, for the log line; null when they agree. */
  detail: string | null;
  maxModelLen: number | null;
}

export class TokenizerChecker {
  readonly #prompts: PromptTokenizer;
  readonly #onResult: (backend: Backend, result: CheckResult) => void;
  readonly #states = new Map<string, TokenizerAgreement>();
  readonly #maxModelLens = new Map<string, number>();
  #closed = false;

  constructor(
    prompts: PromptTokenizer,
    onResult: (backend: Backend, result: CheckResult) => void = () => {},
  ) {
    this.#prompts = prompts;
    this.#onResult = onResult;
  }

  agreement(backend: Backend): TokenizerAgreement {
    return this.#states.get(backend.name) ?? 'unknown';
  }

  /** The largest context window a backend reported (Infinity while none has). */
  maxModelLen(): number {
    return this.#maxModelLens.size === 0
      ? Number.POSITIVE_INFINITY
      : Math.max(...this.#maxModelLens.values());
  }

  /**
   * A backend's context window learned another way than its tokenizer: llama-server's
   * per-slot `n_ctx` from `/props` (a slot holds one sequence, so a prompt must fit one slot).
   */
  setMaxModelLen(backend: string, tokens: number): void {
    if (Number.isInteger(tokens) && tokens > 0) this.#maxModelLens.set(backend, tokens);
  }

  /** Probes one backend and records the outcome. */
  async check(backend: Backend): Promise<CheckResult> {
    const result = await this.#compare(backend);
    if (this.#closed) return result;
    this.#states.set(backend.name, result.agreement);
    if (result.maxModelLen !== null) this.#maxModelLens.set(backend.name, result.maxModelLen);
    this.#onResult(backend, result);
    return result;
  }

  close(): void {
    this.#closed = true;
  }

  async #compare(backend: Backend): Promise<CheckResult> {
    if (backend.dialect && !backend.dialect.tokenizes) {
      return {
        agreement: 'unknown',
        detail: `its engine (${backend.dialect.kind}) has no tokenizer endpoint`,
        maxModelLen: null,
      };
    }
    const probes = [
      {
        name: 'completion',
        body: { prompt: PROBE_PROMPT },
        local: () => this.#prompts.encodePrompt(PROBE_PROMPT),
      },
      {
        name: 'chat',
        body: { messages: PROBE_MESSAGES },
        local: () => this.#prompts.encodeChat(chatInput(PROBE_MESSAGES)),
      },
    ].filter(
      // SGLang's /tokenize takes text only: its chat probe cannot be asked.
      (probe) =>
        (backend.dialect?.kind ?? backend.config.engine) !== 'sglang' ||
        sglangTokenizeRequest(probe.body) !== null,
    );
    let maxModelLen: number | null = null;
    const problems: string[] = [];
    let unanswered = 0;
    for (const probe of probes) {
      let remote: number[];
      try {
        const answer = await askBackend(backend, probe.body, PROBE_TIMEOUT_MS);
        remote = answer.ids;
        maxModelLen = answer.maxModelLen ?? maxModelLen;
      } catch (err) {
        unanswered++;
        problems.push(`${probe.name} probe unanswered (${(err as Error).message})`);
        continue;
      }
      let local: number[];
      try {
        local = probe.local();
      } catch (err) {
        problems.push(
          `${probe.name} probe: the gateway cannot render it (${(err as Error).message})`,
        );
        continue;
      }
      const at = firstDifference(local, remote);
      if (at >= 0) {
        problems.push(
          `${probe.name} probe ids differ at position ${at} of ${local.length} (gateway) / ${remote.length} (backend): ` +
            `gateway ${JSON.stringify(local.slice(at, at + 4))}, backend ${JSON.stringify(remote.slice(at, at + 4))}`,
        );
      }
    }
    const agreement: TokenizerAgreement =
      problems.length > unanswered ? 'differs' : unanswered > 0 ? 'unknown' : 'agrees';
    return { agreement, detail: problems.length > 0 ? problems.join('; ') : null, maxModelLen };
  }
}

function firstDifference(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}
