export { type ChatTurn, encodeChat, renderChat } from './chatTemplate.ts';
export { getTokenizer, type Tokenizer } from './tokenizer.ts';
