/**
 * The gateway's trust boundary with clients, piece by piece: the one check of fields only the
 * gateway writes (every body parser calls it), the tap that keeps engines' transfer fields from
 * clients, the replica labels, and the flag and config key that expose addresses instead.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readFlags } from '../../src/cli/args.ts';
import { readServeConfig } from '../../src/cli/serve.ts';
import { ApiError } from '../../src/openai/errors.ts';
import { refuseGatewayOnlyFields } from '../../src/serving/clientFields.ts';
import { applyConfigDoc, defaultConfig } from '../../src/serving/config.ts';
import { EngineFieldsTap, stripEngineFields } from '../../src/serving/engineFields.ts';
import { decodeLegBody } from '../../src/gateway/pd/protocol.ts';
import { ReplicaLabels } from '../../src/serving/replicaLabels.ts';
import { parseRequest } from '../../src/serving/request.ts';

const FORGED = { do_remote_prefill: true, remote_host: '127.0.0.1', remote_port: 1 };

test('a client body with kv_transfer_params is a 400 naming the field; null counts as absent', () => {
  assert.throws(
    () => refuseGatewayOnlyFields({ prompt: 'x', kv_transfer_params: FORGED }),
    (err: unknown) =>
      err instanceof ApiError && err.status === 400 && err.param === 'kv_transfer_params',
  );
  // Any value but null: a string, an empty object, an escaped key (JSON.parse unescapes it).
  for (const raw of ['{"kv_transfer_params":"x"}', '{"kv_transfer_params":{}}']) {
    assert.throws(() => refuseGatewayOnlyFields(JSON.parse(raw)), ApiError);
  }
  assert.throws(() => refuseGatewayOnlyFields(JSON.parse('{"kv\\u005ftransfer_params":{}}')));
  refuseGatewayOnlyFields({ prompt: 'x', kv_transfer_params: null });
  refuseGatewayOnlyFields({ prompt: 'x' });
  refuseGatewayOnlyFields(null);
});

test('parseRequest (the gateway and the endpoint picker read bodies through it) refuses it', async () => {
  const ctx = {
    tokenizer: {
      vocabSize: 100_000,
      tokenize: () => Promise.reject(new Error('not reached')),
    },
    blockSize: 16,
    tenantSalt: null,
    maxModelLen: Number.POSITIVE_INFINITY,
  };
  for (const [endpoint, body] of [
    ['completions', { prompt: [1, 2, 3], kv_transfer_params: FORGED }],
    ['chat', { messages: [{ role: 'user', content: 'x' }], kv_transfer_params: FORGED }],
  ] as const) {
    await assert.rejects(parseRequest(endpoint, Buffer.from(JSON.stringify(body)), ctx), {
      status: 400,
      param: 'kv_transfer_params',
    });
  }
});

test("the decode leg never carries the client's kv_transfer_params", () => {
  const request = { prompt: 'x', kv_transfer_params: FORGED };
  assert.deepEqual(decodeLegBody(request, null), { prompt: 'x' });
  assert.deepEqual(decodeLegBody(request, { remote_host: 'h' }), {
    prompt: 'x',
    kv_transfer_params: { remote_host: 'h' },
  });
});

const run = (tap: EngineFieldsTap, type: string, chunks: string[]): string => {
  tap.start(200, type);
  const out = chunks.map((c) => tap.data(Buffer.from(c)).toString('utf8'));
  return out.join('') + tap.end().toString('utf8');
};

test('JSON answers: the field is taken out; an answer without one passes byte for byte', () => {
  const params = { remote_host: '10.0.0.9', remote_port: 5600, remote_block_ids: [1] };
  const withIt = JSON.stringify({ id: 'a', choices: [], kv_transfer_params: params });
  assert.equal(
    run(new EngineFieldsTap(), 'application/json', [withIt.slice(0, 9), withIt.slice(9)]),
    '{"id":"a","choices":[]}',
  );
  // Text that only mentions the name, and odd spacing, are left as sent.
  const mention = '{ "id" : "b", "choices": [{"text": "\\"kv_transfer_params\\""}] }';
  assert.equal(run(new EngineFieldsTap(), 'application/json', [mention]), mention);
  assert.equal(
    stripEngineFields(Buffer.from('not json "kv_transfer_params"')).toString(),
    'not json "kv_transfer_params"',
  );
});

test('streams: only an event with the field is rewritten; events cut anywhere come out whole', () => {
  const events = [
    ': comment\n\n',
    'data: {"id":"s","choices":[{"text":"h\u00e9"}]}\r\n\r\n',
    'data: {"id":"s","choices":[],"kv_transfer_params":{"remote_host":"10.0.0.9"}}\n\n',
    'data: [DONE]\n\n',
  ];
  const whole = events.join('');
  const expected = whole.replace(',"kv_transfer_params":{"remote_host":"10.0.0.9"}', '');
  for (const cuts of [[], [5, 40, 77, 101], [1, 2, 3]]) {
    const chunks: string[] = [];
    let at = 0;
    const bytes = Buffer.from(whole);
    for (const cut of cuts) {
      chunks.push(bytes.subarray(at, cut).toString('latin1'));
      at = cut;
    }
    chunks.push(bytes.subarray(at).toString('latin1'));
    const tap = new EngineFieldsTap();
    tap.start(200, 'text/event-stream');
    const out = Buffer.concat([
      ...chunks.map((c) => tap.data(Buffer.from(c, 'latin1'))),
      tap.end(),
    ]).toString('utf8');
    assert.equal(out, expected, `cuts ${cuts}`);
  }
  // Whole events without the field pass as the same buffer, not a copy.
  const tap = new EngineFieldsTap();
  tap.start(200, 'text/event-stream');
  const chunk = Buffer.from(events[0]! + events[3]!);
  assert.equal(tap.data(chunk), chunk);
});

test('replica labels: in order of first sight, stable; addresses when exposed', () => {
  const labels = new ReplicaLabels(false);
  assert.equal(labels.of('10.0.0.1:8000'), 'replica-0');
  assert.equal(labels.of('10.0.0.2:8000'), 'replica-1');
  assert.equal(labels.of('10.0.0.1:8000'), 'replica-0');
  assert.deepEqual(labels.table(), { '10.0.0.1:8000': 'replica-0', '10.0.0.2:8000': 'replica-1' });
  assert.equal(new ReplicaLabels(true).of('10.0.0.1:8000'), '10.0.0.1:8000');
});

test('--expose-replica-addresses and expose-replica-addresses: off by default', () => {
  const flags = (argv: string[]) => {
    const f = readFlags(argv, { 'expose-replica-addresses': { type: 'boolean' as const } });
    if (f === 'help') throw new Error('unexpected help');
    return f;
  };
  assert.equal(defaultConfig().exposeReplicaAddresses, false);
  assert.equal(readServeConfig(flags([])).exposeReplicaAddresses, false);
  assert.equal(readServeConfig(flags(['--expose-replica-addresses'])).exposeReplicaAddresses, true);
  const doc = applyConfigDoc({ 'expose-replica-addresses': true }, defaultConfig());
  assert.equal(doc.exposeReplicaAddresses, true);
  assert.throws(
    () => applyConfigDoc({ 'expose-replica-addresses': 'yes' }, defaultConfig()),
    /expose-replica-addresses/,
  );
});
