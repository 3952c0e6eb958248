/**
 * The catalog against its sources: each model's shape as its Hugging Face config.json states it
 * (the fields below are copied from those files, keys as upstream spells them), so KV bytes per
 * token = 2 (K and V) x num_hidden_layers x num_key_value_heads x head_dim x 2 bytes (BF16),
 * head_dim being hidden_size / num_attention_heads where the config does not set it. Every GPU
 * has a datasheet source and a dated list price from a named sheet.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { GPUS, MODELS } from '../../src/model/catalog.ts';
import { kvBytesPerToken } from '../../src/model/cost.ts';

interface HfConfig {
  num_hidden_layers: number;
  num_key_value_heads: number;
  num_attention_heads: number;
  hidden_size: number;
  head_dim?: number;
}

/** From each model's config.json (the URL is the catalog entry's `source`). */
const UPSTREAM: Record<string, HfConfig> = {
  'llama-3.3-70b': {
    hidden_size: 8192,
    num_attention_heads: 64,
    num_hidden_layers: 80,
    num_key_value_heads: 8,
  },
  'llama-3.1-70b': {
    hidden_size: 8192,
    num_attention_heads: 64,
    num_hidden_layers: 80,
    num_key_value_heads: 8,
  },
  'llama-3.1-8b': {
    hidden_size: 4096,
    num_attention_heads: 32,
    num_hidden_layers: 32,
    num_key_value_heads: 8,
  },
  'qwen2.5-7b': {
    hidden_size: 3584,
    num_attention_heads: 28,
    num_hidden_layers: 28,
    num_key_value_heads: 4,
  },
  'qwen2.5-72b': {
    hidden_size: 8192,
    num_attention_heads: 64,
    num_hidden_layers: 80,
    num_key_value_heads: 8,
  },
  'qwen3-8b': {
    head_dim: 128,
    hidden_size: 4096,
    num_attention_heads: 32,
    num_hidden_layers: 36,
    num_key_value_heads: 8,
  },
  'qwen3-32b': {
    head_dim: 128,
    hidden_size: 5120,
    num_attention_heads: 64,
    num_hidden_layers: 64,
    num_key_value_heads: 8,
  },
  'qwen3-30b-a3b': {
    head_dim: 128,
    hidden_size: 2048,
    num_attention_heads: 32,
    num_hidden_layers: 48,
    num_key_value_heads: 4,
  },
  'mistral-7b': {
    head_dim: 128,
    hidden_size: 4096,
    num_attention_heads: 32,
    num_hidden_layers: 32,
    num_key_value_heads: 8,
  },
  'mixtral-8x7b': {
    hidden_size: 4096,
    num_attention_heads: 32,
    num_hidden_layers: 32,
    num_key_value_heads: 8,
  },
};

describe('models: KV bytes per token from config.json', () => {
  for (const [name, c] of Object.entries(UPSTREAM)) {
    test(name, () => {
      const m = MODELS[name];
      assert.ok(m, `${name} is in the catalog`);
      const headDim = c.head_dim ?? c.hidden_size / c.num_attention_heads;
      assert.deepEqual(
        [m.layers, m.kvHeads, m.headDim, m.hiddenSize, m.attentionHeads],
        [c.num_hidden_layers, c.num_key_value_heads, headDim, c.hidden_size, c.num_attention_heads],
      );
      assert.equal(
        kvBytesPerToken(m, 'bf16'),
        2 * c.num_hidden_layers * c.num_key_value_heads * headDim * 2,
      );
      assert.match(m.source, /^https:\/\/huggingface\.co\/[^/]+\/[^/]+\/blob\/main\/config\.json$/);
    });
  }

  test("the seed's 327,680 B/token and a MoE's active parameters apart", () => {
    assert.equal(kvBytesPerToken(MODELS['llama-3.3-70b']!, 'bf16'), 327_680);
    // Qwen3-30B-A3B: 48 x 4 x 128 x 2 x 2 = 98,304 B/token; 3.3B of 30.5B parameters active.
    const moe = MODELS['qwen3-30b-a3b']!;
    assert.equal(kvBytesPerToken(moe, 'bf16'), 98_304);
    assert.ok(moe.activeParams < moe.totalParams / 9);
  });
});

describe('GPUs: a source and a dated list price each', () => {
  for (const name of [
    'a10g',
    'l4',
    'l40s',
    'a100-40gb',
    'a100-80gb',
    'h100-sxm',
    'h200',
    'b200',
    'mi300x',
  ]) {
    test(name, () => {
      const g = GPUS[name];
      assert.ok(g, `${name} is in the catalog`);
      assert.ok(g.source.length > 0);
      assert.ok(g.price.dollarsPerHour > 0);
      assert.match(g.price.asOf, /^\d{4}-\d{2}(-\d{2})?$/);
      assert.ok(g.price.sheet.length > 10);
    });
  }
});
