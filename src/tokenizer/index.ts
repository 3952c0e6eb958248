export { type ChatInput, type ChatMessage, type ChatTurn, chatInput } from './chat.ts';
export { encodeChat, renderChat } from './chatTemplate.ts';
export { TokenizerError } from './errors.ts';
export {
  BUILTIN_TOKENIZER,
  loadPromptTokenizer,
  type PromptInput,
  PromptTokenizer,
  type Tokenized,
  type TokenizerSpec,
} from './promptTokenizer.ts';
export { getTokenizer, type TextTokenizer, type Tokenizer } from './tokenizer.ts';
