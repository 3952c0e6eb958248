/**
 * The dashboard in a real browser: headless Chromium (Debian's, driven by puppeteer-core) opens
 * `/` of a gateway in front of the embedded fleet, sees its four replicas and empty charts that
 * say so, and sees the numbers move once requests are sent; a page opened after that traffic
 * draws it at once, on wall-clock time axes. The screenshot is saved to out/dashboard.png.
 *
 * Chromium must be installed (`.ci/run` installs Debian's package when it is missing); without
 * it this test fails and says so rather than skipping.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { defaultConfig } from '../../src/serving/config.ts';
import { startGatewayWithFleet, type ServeHandle } from '../../src/embedded/gateway.ts';
import { ROOT } from '../support/cli.ts';
import { tokens } from '../support/gateway.harness.ts';

const CHROMIUM = process.env.KVROUTE_CHROMIUM ?? '/usr/bin/chromium';
/** Generous: a busy 2-core machine starts Chromium and lays the page out slowly. */
const WAIT_MS = 90_000;

let gw: ServeHandle;
let browser: Browser;
let page: Page;
const profile = mkdtempSync(join(tmpdir(), 'kvroute-chromium-'));

before(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium is not at ${CHROMIUM}: install it (apt-get install -y chromium; .ci/run does) or set KVROUTE_CHROMIUM`,
    );
  }
  gw = await startGatewayWithFleet(
    { ...defaultConfig(), port: 0, embeddedReplicas: 4 },
    { embeddedSpeedup: 20 },
  );
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    protocolTimeout: WAIT_MS,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      `--user-data-dir=${profile}`,
    ],
  });
  page = await browser.newPage();
  page.setDefaultTimeout(WAIT_MS);
  await page.setViewport({ width: 1280, height: 900 });
});

after(async () => {
  await browser?.close();
  await gw?.close();
  rmSync(profile, { recursive: true, force: true });
});

// Page-side code is written as strings: this project's TypeScript has no DOM types.

/** The numbers of the table's column `field`, by replica. */
async function column(field: string): Promise<Record<string, number>> {
  return (await page.evaluate(`Object.fromEntries([...document.querySelectorAll('tr[data-replica] td[data-field="${field}"]')]
    .map((c) => [c.parentElement.dataset.replica, Number(c.textContent.replace(/,/g, ''))]))`)) as Record<
    string,
    number
  >;
}

/** Per chart: x values, values neither null nor 0, the time axis's labels, the empty note. */
const CHARTS = `Object.fromEntries([...document.querySelectorAll('#charts .chart > div[id]')].map((el) => [el.id, {
  points: Number(el.dataset.points ?? 0), values: Number(el.dataset.values ?? 0),
  xLabels: el.dataset.xLabels ?? '', empty: el.parentElement.querySelector('.empty')?.hidden === false
    ? el.parentElement.querySelector('.empty').textContent : null }]))`;
type Charts = Record<
  string,
  { points: number; values: number; xLabels: string; empty: string | null }
>;
const CHART_IDS = ['chart-decisions', 'chart-hits', 'chart-ttft', 'chart-queued'];

const TOTAL = `Number(document.getElementById('total-decisions')?.textContent?.replace(/,/g, ''))`;
const UPDATES = 'Number(document.body.dataset.updates ?? 0)';

/** Requests in four shared-prefix groups, four at a time, until `stop` says so. */
async function sendLoad(stop: () => boolean): Promise<number> {
  let sent = 0;
  const worker = async (w: number) => {
    for (let i = 0; !stop() && i < 400; i++) {
      const group = (w + i) % 4;
      const prompt = [...tokens(100 + group, 1024), ...tokens(1000 * w + i, 64)];
      const res = await fetch(`${gw.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt, max_tokens: 16 }),
      });
      await res.arrayBuffer();
      assert.equal(res.status, 200);
      sent++;
    }
  };
  await Promise.all([0, 1, 2, 3].map(worker));
  return sent;
}

test('the page shows the four replicas, and its numbers move under load', async () => {
  await page.goto(`${gw.url}/`, { waitUntil: 'domcontentloaded' });
  await page.waitForFunction(`document.querySelectorAll('tr[data-replica]').length === 4`);
  const names = Object.keys(await column('decisions'));
  assert.deepEqual(names.sort(), gw.replicas.map((r) => r.name).sort());
  assert.equal(await page.evaluate(TOTAL), 0);
  // No traffic yet: every chart says so rather than staying blank.
  await page.waitForFunction(`document.querySelectorAll('#charts .empty').length === 4`);
  const idle = (await page.evaluate(CHARTS)) as Charts;
  assert.deepEqual(Object.keys(idle).sort(), [...CHART_IDS].sort());
  for (const id of CHART_IDS) {
    assert.equal(idle[id]!.empty, 'no traffic in the last 1 minute', id);
  }
  const indexedBefore = await column('indexed');

  let stopped = false;
  const load = sendLoad(() => stopped);
  try {
    // Numbers move: decisions counted, prefix hits seen, blocks indexed from the engines' events.
    await page.waitForFunction(`${TOTAL} >= 40`);
    const firstCount = await page.evaluate(TOTAL);
    await page.waitForFunction(`${TOTAL} > ${firstCount}`);
    await page.waitForFunction(
      `[...document.querySelectorAll('td[data-field="hit-rate"]')].some((c) => /[1-9]/.test(c.textContent))`,
    );
    // A few more seconds of series, so the charts show the load.
    const updates = Number(await page.evaluate(UPDATES));
    await page.waitForFunction(`${UPDATES} >= ${updates + 4}`);
  } finally {
    stopped = true;
  }
  const sent = await load;
  assert.ok(sent >= 40, `sent ${sent} requests`);
  const indexedAfter = await column('indexed');
  assert.ok(
    names.some((n) => indexedAfter[n]! > indexedBefore[n]!),
    `indexed blocks moved: ${JSON.stringify(indexedBefore)} -> ${JSON.stringify(indexedAfter)}`,
  );
  // The charts drew: uPlot puts a canvas in each of the four.
  assert.equal(await page.evaluate(`document.querySelectorAll('#charts canvas').length`), 4);
  const loaded = (await page.evaluate(CHARTS)) as Charts;
  for (const id of ['chart-decisions', 'chart-hits', 'chart-ttft']) {
    assert.ok(loaded[id]!.values > 0, `${id} drew the load: ${JSON.stringify(loaded[id])}`);
    assert.equal(loaded[id]!.empty, null, `${id} no longer says it is empty`);
  }
});

test('a page opened after the traffic draws the last minutes at once, on HH:MM:SS axes', async () => {
  const later = await browser.newPage();
  later.setDefaultTimeout(WAIT_MS);
  await later.setViewport({ width: 1280, height: 900 });
  try {
    await later.goto(`${gw.url}/`, { waitUntil: 'domcontentloaded' });
    await later.waitForFunction(
      `${UPDATES} >= 1 && document.querySelectorAll('#charts canvas').length === 4`,
    );
    // The first message alone carried the series: the traffic of the test before, seconds of it.
    const firstPoints = Number(await later.evaluate('Number(document.body.dataset.firstPoints)'));
    assert.ok(firstPoints >= 5, `first message carried ${firstPoints} points`);
    await later.waitForFunction(
      `[...document.querySelectorAll('#charts .chart > div[id]')].every((el) => el.dataset.xLabels)`,
    );
    const charts = (await later.evaluate(CHARTS)) as Charts;
    for (const id of ['chart-decisions', 'chart-hits', 'chart-ttft']) {
      assert.ok(charts[id]!.points >= firstPoints, `${id}: ${JSON.stringify(charts[id])}`);
      assert.ok(charts[id]!.values > 0, `${id} has points: ${JSON.stringify(charts[id])}`);
      assert.equal(charts[id]!.empty, null, id);
    }
    for (const id of CHART_IDS) {
      assert.match(charts[id]!.xLabels, /^\d\d:\d\d:\d\d( \d\d:\d\d:\d\d)*$/, id);
    }
    mkdirSync(join(ROOT, 'out'), { recursive: true });
    await later.screenshot({ path: join(ROOT, 'out/dashboard.png'), fullPage: true });
  } finally {
    await later.close();
  }
});
