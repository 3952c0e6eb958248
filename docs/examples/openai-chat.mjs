// A chat through kvroute with the official OpenAI client (`npm ci` installs it).
import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: process.env.KVROUTE_URL ?? 'http://127.0.0.1:8080/v1',
  apiKey: process.env.KVROUTE_API_KEY ?? 'none', // the gateway needs none unless started with --api-key
});
// The model the server serves (its /v1/models), unless KVROUTE_MODEL names one.
const model = process.env.KVROUTE_MODEL ?? (await client.models.list()).data[0]?.id;
const system = 'You are a terse assistant. '.repeat(40); // a shared prefix: cached after the first call
for (const question of ['What is a KV cache?', 'Why route by prefix?']) {
  const chat = await client.chat.completions.create({
    model,
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: question },
    ],
    max_tokens: 16,
  });
  const cached = chat.usage?.prompt_tokens_details?.cached_tokens ?? 0;
  console.log(`${chat.usage?.prompt_tokens} prompt tokens, ${cached} cached: ${chat.choices[0]?.message.content}`);
}
