/**
 * Flow control's settings: the config file's `flow-control` key and the tenants' `flow-weight`
 * (each bad value named by its key), the `--flow-*` flags over them (each bad value named by its
 * flag; a tuning flag without flow control on is an error), and a request's priority class (its
 * `x-kvroute-priority` header, else its tenant's, else `default`; an unknown name a 400).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { readFlags } from '../../src/cli/args.ts';
import { readServeConfig } from '../../src/cli/serve.ts';
import { applyConfigDoc, defaultConfig } from '../../src/serving/config.ts';
import { FlowControl } from '../../src/serving/flowControl.ts';
import { GatewayMetrics } from '../../src/serving/metrics.ts';
import { ApiError } from '../../src/openai/errors.ts';
import { FLOW_OPTIONS } from '../../src/cli/flowFlags.ts';
import { specOf } from '../../src/cli/options/spec.ts';
import {
  DEFAULT_FLOW_CHARGE,
  DEFAULT_FLOW_OWNER_HOLD_MS,
  DEFAULT_FLOW_OWNER_PASS_MS,
  DEFAULT_FLOW_SPARSE_FINISH_FIRST,
} from '../../src/sim/flowControl.ts';

const FLAGS = { config: { type: 'string' as const }, ...specOf(FLOW_OPTIONS) };
const serve = (argv: string[]) => readServeConfig(readFlags(argv, FLAGS) as never);

describe('the flow-control config key', () => {
  test("is off by default and read whole, with the tenants' weights", () => {
    assert.equal(defaultConfig().flowControl.enabled, false);
    const c = applyConfigDoc(
      {
        'flow-control': {
          enabled: true,
          'max-queued': 50,
          'max-queued-per-tenant': 10,
          'max-wait-ms': 4000,
          release: 'owner',
          'owner-slack-tokens': 256,
          'owner-hold-ms': 300,
          'look-ahead': 4,
          'owner-pass-ms': 1500,
          'finish-first': false,
          charge: 'prompt',
          saturation: { 'queue-depth': 2, 'kv-usage': 0.9, 'queued-prefill-ms': 500 },
        },
        tenants: { acme: { 'flow-weight': 3 } },
      },
      defaultConfig(),
    ).flowControl;
    assert.deepEqual(c, {
      enabled: true,
      maxQueued: 50,
      maxQueuedPerTenant: 10,
      maxWaitMs: 4000,
      saturation: { queueDepth: 2, kvUsage: 0.9, queuedPrefillMs: 500 },
      release: 'owner',
      ownerSlackTokens: 256,
      ownerHoldMs: 300,
      lookAhead: 4,
      ownerPassMs: 1500,
      finishFirst: false,
      charge: 'prompt',
      tenantWeights: { acme: 3 },
    });
    assert.equal(defaultConfig().flowControl.release, 'room');
    // The simulator's defaults (src/sim/flowControl.ts), so that it predicts the gateway.
    assert.equal(defaultConfig().flowControl.finishFirst, DEFAULT_FLOW_SPARSE_FINISH_FIRST);
    assert.equal(defaultConfig().flowControl.charge, DEFAULT_FLOW_CHARGE);
    assert.equal(defaultConfig().flowControl.ownerPassMs, DEFAULT_FLOW_OWNER_PASS_MS);
    assert.equal(defaultConfig().flowControl.ownerHoldMs, DEFAULT_FLOW_OWNER_HOLD_MS);
  });

  test('names the key of a bad value', () => {
    const bad: [object, RegExp][] = [
      [{ 'flow-control': { enabled: 'yes' } }, /flow-control\.enabled must be true or false/],
      [{ 'flow-control': { 'max-queued': 0 } }, /flow-control\.max-queued must be within/],
      [
        { 'flow-control': { saturation: { 'kv-usage': 2 } } },
        /saturation\.kv-usage must be within/,
      ],
      [{ 'flow-control': { speed: 1 } }, /flow-control\.speed is not a known key/],
      [
        { 'flow-control': { release: 'cache' } },
        /flow-control\.release must be one of room, owner/,
      ],
      [{ 'flow-control': { 'look-ahead': 0 } }, /flow-control\.look-ahead must be within/],
      [{ 'flow-control': { 'owner-pass-ms': -1 } }, /flow-control\.owner-pass-ms must be within/],
      [
        { 'flow-control': { 'finish-first': 'on' } },
        /flow-control\.finish-first must be true or false/,
      ],
      [
        { 'flow-control': { charge: 'tokens' } },
        /flow-control\.charge must be one of prompt, uncached/,
      ],
      [{ 'flow-control': { 'owner-hold-ms': -1 } }, /flow-control\.owner-hold-ms must be within/],
      [{ tenants: { acme: { 'flow-weight': 0 } } }, /tenants\.acme\.flow-weight must be within/],
      [
        { 'flow-control': { 'max-queued': 5, 'max-queued-per-tenant': 6 } },
        /max-queued-per-tenant must not exceed max-queued \(5\)/,
      ],
    ];
    for (const [doc, message] of bad) {
      assert.throws(() => applyConfigDoc(doc, defaultConfig()), message, JSON.stringify(doc));
    }
  });
});

describe('the --flow-* flags', () => {
  test('turn it on and tune it', () => {
    const c = serve([
      '--flow-control',
      '--flow-max-queued',
      '20',
      '--flow-max-queued-per-tenant',
      '5',
      '--flow-max-wait-ms',
      '1500',
      '--flow-queue-depth',
      '0',
      '--flow-kv-usage',
      '0.7',
      '--flow-queued-prefill-ms',
      '0',
      '--flow-release',
      'owner',
      '--flow-owner-slack-tokens',
      '64',
      '--flow-owner-hold-ms',
      '250',
      '--flow-look-ahead',
      '8',
      '--flow-owner-pass-ms',
      '0',
      '--flow-finish-first',
      'off',
      '--flow-charge',
      'prompt',
    ]).flowControl;
    assert.equal(c.enabled, true);
    assert.equal(c.maxQueued, 20);
    assert.equal(c.maxQueuedPerTenant, 5);
    assert.equal(c.maxWaitMs, 1500);
    assert.deepEqual(c.saturation, { queueDepth: 0, kvUsage: 0.7, queuedPrefillMs: 0 });
    assert.deepEqual(
      [c.release, c.ownerSlackTokens, c.ownerHoldMs, c.lookAhead],
      ['owner', 64, 250, 8],
    );
    assert.deepEqual([c.finishFirst, c.charge, c.ownerPassMs], [false, 'prompt', 0]);
  });

  test('refuse tuning without flow control on, and bad values, naming the flag', () => {
    assert.throws(
      () => serve(['--flow-max-wait-ms', '10']),
      /--flow-max-wait-ms needs --flow-control/,
    );
    assert.throws(
      () => serve(['--flow-control', '--flow-max-queued', '0']),
      /--flow-max-queued must be greater than 0/,
    );
    assert.throws(() => serve(['--flow-release', 'owner']), /--flow-release needs --flow-control/);
    assert.throws(
      () => serve(['--flow-control', '--flow-release', 'cache']),
      /--flow-release must be one of room, owner; got 'cache'/,
    );
    assert.throws(
      () => serve(['--flow-control', '--flow-charge', 'tokens']),
      /--flow-charge must be one of prompt, uncached; got 'tokens'/,
    );
    assert.throws(
      () => serve(['--flow-control', '--flow-finish-first', 'yes']),
      /--flow-finish-first must be one of on, off; got 'yes'/,
    );
    assert.throws(() => serve(['--flow-charge', 'prompt']), /--flow-charge needs --flow-control/);
    assert.throws(
      () => serve(['--flow-control', '--flow-look-ahead', '0']),
      /--flow-look-ahead must be at least 1/,
    );
    assert.throws(
      () => serve(['--flow-control', '--flow-kv-usage', '1.5']),
      /--flow-kv-usage must be at most 1/,
    );
    assert.throws(
      () =>
        serve(['--flow-control', '--flow-max-queued', '2', '--flow-max-queued-per-tenant', '3']),
      /--flow-max-queued-per-tenant \(3\) must not exceed --flow-max-queued \(2\)/,
    );
  });
});

describe("a request's priority class", () => {
  const admission = {
    priorityClasses: { interactive: -10, batch: 10 },
    tenantClass: { acme: 'batch' },
    prefillUsPerToken: 71.3,
  };
  const flow = new FlowControl(
    defaultConfig().flowControl,
    admission,
    new GatewayMetrics({ replicaLoads: () => [] }),
  );

  test("is the header, else the tenant's, else default", () => {
    assert.deepEqual(flow.classNames, ['interactive', 'batch', 'default']);
    assert.equal(flow.classOf('interactive', 'acme'), 'interactive');
    assert.equal(flow.classOf(undefined, 'acme'), 'batch');
    assert.equal(flow.classOf(undefined, 'other'), 'default');
    assert.equal(flow.classOf('', null), 'default');
  });

  test('an unknown name in the header is a 400 naming the classes', () => {
    assert.throws(
      () => flow.classOf('urgent', null),
      (err: unknown) =>
        err instanceof ApiError &&
        err.status === 400 &&
        /x-kvroute-priority must name a priority class \(interactive, batch, default\), got 'urgent'/.test(
          err.message,
        ),
    );
  });
});
