/**
 * A choice's stop rules against a scripted token stream, checked against vLLM's detokenizer and
 * check_stop semantics: stop strings across tokens, in list order, cut or kept; stop token ids;
 * min_tokens; the stream's hold-back; every drawn token counted.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ChoiceText, checkStopStrings, type StopRules } from '../../src/engine/server/choice.ts';
import type { DrawnToken } from '../../src/engine/server/textGen.ts';

/** Tokens as given: id i+1 for the i-th text. */
function scripted(texts: string[]) {
  let i = 0;
  const banned: (ReadonlySet<number> | undefined)[] = [];
  return {
    banned,
    next(b?: ReadonlySet<number>): DrawnToken {
      banned.push(b);
      const text = texts[i++]!;
      return { tokenId: i, text, textJson: JSON.stringify(text), rank: 0, offset: 0 };
    },
  };
}

const rules = (r: Partial<StopRules>): StopRules => ({
  stop: [],
  stopTokenIds: [],
  includeStopStrInOutput: false,
  minTokens: 0,
  maxTokens: 100,
  ...r,
});

/** Runs a choice to its end; the deltas a stream would send, and the final text. */
function run(texts: string[], r: Partial<StopRules>) {
  const source = scripted(texts);
  const choice = new ChoiceText(source, rules(r));
  const deltas: string[] = [];
  while (!choice.finish) deltas.push(choice.step().delta);
  return { choice, deltas, banned: source.banned };
}

describe('check_stop_strings', () => {
  test("Python's find from a negative start, the first stop string of the list", () => {
    assert.deepEqual(checkStopStrings('hello world', 5, ['world'], false), ['world', 6]);
    assert.deepEqual(checkStopStrings('hello world', 5, ['world'], true), ['world', -1]);
    assert.deepEqual(checkStopStrings('hello world!', 2, ['world'], true), ['world', 11]);
    // A stop string wholly before the new text's reach was looked for before.
    assert.equal(checkStopStrings('hello world!', 1, ['world'], true), null);
    // Only the new text and what a stop string can reach back into are searched.
    assert.equal(checkStopStrings('hello world', 1, ['hello'], false), null);
    // List order wins over position.
    assert.deepEqual(checkStopStrings('ab cd', 5, ['cd', 'ab'], false), ['cd', 3]);
    assert.equal(checkStopStrings('abc', 0, ['abc'], false), null);
  });
});

describe('a choice', () => {
  test('a stop string across two tokens cuts the text; every token counts', () => {
    const { choice, deltas } = run([' one', ' tw', 'o three', ' four'], { stop: ['two'] });
    assert.equal(choice.text, ' one ');
    assert.deepEqual(choice.finish, { reason: 'stop', stopReason: 'two' });
    assert.equal(choice.tokens, 3);
    assert.equal(deltas.join(''), ' one ');
    // Held back: never a part of "two" on the wire before the stop is known.
    assert.ok(deltas.every((d) => !d.includes('tw')));
  });

  test('include_stop_str_in_output keeps the stop string and sends it', () => {
    const { choice, deltas } = run([' one', ' tw', 'o three'], {
      stop: ['two'],
      includeStopStrInOutput: true,
    });
    assert.equal(choice.text, ' one two');
    assert.equal(deltas.join(''), ' one two');
  });

  test('a stop token id ends the choice without its text, unless asked for', () => {
    const cut = run([' a', ' b', ' c'], { stopTokenIds: [2] });
    assert.equal(cut.choice.text, ' a');
    assert.deepEqual(cut.choice.finish, { reason: 'stop', stopReason: 2 });
    assert.equal(cut.choice.tokens, 2);
    const kept = run([' a', ' b', ' c'], { stopTokenIds: [2], includeStopStrInOutput: true });
    assert.equal(kept.choice.text, ' a b');
  });

  test('min_tokens: no stop string in its text, stop ids kept from being drawn', () => {
    const { choice, banned } = run([' x', ' stop', ' y', ' stop', ' z'], {
      stop: ['stop'],
      stopTokenIds: [99],
      minTokens: 3,
    });
    assert.equal(choice.text, ' x stop y ');
    assert.equal(choice.tokens, 4);
    assert.deepEqual(
      banned.map((b) => (b ? [...b] : null)),
      [[99], [99], [99], null],
    );
  });

  test('max_tokens ends with length and sends the held-back rest', () => {
    const { choice, deltas } = run([' a', ' b', ' c'], { stop: ['zzzz'], maxTokens: 3 });
    assert.deepEqual(choice.finish, { reason: 'length', stopReason: null });
    assert.equal(deltas.join(''), ' a b c');
    // Three characters ("zzzz" less one) wait until the end.
    assert.deepEqual(deltas, ['', ' ', 'a b c']);
  });
});
