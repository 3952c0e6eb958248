// The dashboard page: reads /dashboard/events (one JSON state a second; the first message
// carries up to five minutes of points, drawn at once) and redraws the replica table and four
// uPlot charts on wall-clock time axes. Plain script, no build step, nothing from a CDN.
(() => {
  const HISTORY = 300;
  const COLORS = [
    '#3b82f6',
    '#ef4444',
    '#10b981',
    '#f59e0b',
    '#8b5cf6',
    '#ec4899',
    '#14b8a6',
    '#6b7280',
  ];
  const points = [];
  const charts = {};
  const status = document.getElementById('status');
  const keyForm = document.getElementById('key');

  const fmt = (v, digits = 0) =>
    v === null || v === undefined || Number.isNaN(v)
      ? '–'
      : v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const pct = (v) => (v === null || v === undefined ? '–' : `${fmt(v * 100, 1)} %`);

  function keyFromPage() {
    const m = /(?:^|[#&])key=([^&]+)/.exec(location.hash);
    if (m) sessionStorage.setItem('kvroute-admin-key', decodeURIComponent(m[1]));
    return sessionStorage.getItem('kvroute-admin-key');
  }

  keyForm.addEventListener('submit', (e) => {
    e.preventDefault();
    sessionStorage.setItem('kvroute-admin-key', keyForm.elements.key.value);
    keyForm.style.display = 'none';
    connect();
  });

  function renderTable(sample) {
    // The cache audit: verdict, prediction error over its window, and where predictions come from.
    const auditCell = (a) =>
      a === null || a === undefined
        ? '–'
        : `${a.verdict}${a.hitRateError === null ? '' : ` (${pct(a.hitRateError)} off)`}${a.indexSource === 'approx' ? ' · approx' : ''}`;
    const rows = sample.replicas.map((r) => {
      const routed = r.cachedTokens + r.uncachedTokens;
      const kv = r.kvUsage === null ? 0 : Math.min(1, r.kvUsage);
      const verdict = r.verdict ?? (r.healthy ? 'eligible' : 'down');
      return (
        `<tr data-replica="${r.name}"><td>${r.name}</td><td class="${verdict}">${verdict}</td>` +
        `<td><span class="bar"><i style="width:${(kv * 100).toFixed(1)}%"></i></span>${pct(r.kvUsage)}</td>` +
        `<td data-field="queued">${fmt(r.queuedPromptTokens)}</td><td>${fmt(r.running)}</td>` +
        `<td>${fmt(r.waiting)}</td><td>${fmt(r.inFlight)}</td>` +
        `<td data-field="hit-rate">${routed > 0 ? pct(r.cachedTokens / routed) : '–'}</td>` +
        `<td data-field="indexed">${fmt(r.indexedBlocks)}</td>` +
        `<td data-field="decisions">${fmt(r.decisions)}</td><td>${fmt(r.spills)}</td>` +
        `<td data-field="audit">${auditCell(r.audit)}</td></tr>`
      );
    });
    document.getElementById('replicas').innerHTML = rows.join('');
    const up = sample.replicas.filter((r) => r.healthy).length;
    const total = Object.values(sample.decisionsByPolicy).reduce((a, b) => a + b, 0);
    const policies = Object.keys(sample.decisionsByPolicy).join(', ') || '–';
    status.innerHTML =
      `<span class="live">live</span> · ${up} of ${sample.replicas.length} replicas up · ` +
      `policy ${policies} · <span id="total-decisions">${fmt(total)}</span> decisions · ` +
      `TTFT p50 ${fmt(sample.ttftP50Ms)} ms, p99 ${fmt(sample.ttftP99Ms)} ms`;
  }

  const pad2 = (n) => String(n).padStart(2, '0');
  /** Seconds since the epoch as the viewer's wall clock, HH:MM:SS. */
  const clock = (s) => {
    const d = new Date(s * 1000);
    return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
  };

  /** "no traffic in the last N minutes", N the minutes the points span (at least 1). */
  function emptyNote() {
    const spanMs = points.length > 1 ? points[points.length - 1].atMs - points[0].atMs : 0;
    const minutes = Math.max(1, Math.ceil(spanMs / 60_000));
    return `no traffic in the last ${minutes} minute${minutes === 1 ? '' : 's'}`;
  }

  /**
   * A chart of one series per name; rebuilt when the names change. The chart's element carries
   * what it drew: `data-points` (x values), `data-values` (values neither null nor 0) and
   * `data-x-labels` (the time axis's last labels).
   */
  function draw(id, names, valuesOf) {
    const el = document.getElementById(id);
    const key = names.join('\u0000');
    let chart = charts[id];
    if (!chart || chart.key !== key) {
      if (chart) chart.plot.destroy();
      const opts = {
        width: Math.max(320, el.clientWidth || 540),
        height: 200,
        series: [
          {},
          ...names.map((name, i) => ({
            label: name,
            stroke: COLORS[i % COLORS.length],
            width: 1.5,
            spanGaps: false,
          })),
        ],
        axes: [
          {
            values: (_u, splits) => {
              const labels = splits.map(clock);
              el.dataset.xLabels = labels.join(' ');
              return labels;
            },
          },
          { size: 60 },
        ],
        scales: { x: { time: true } },
        legend: { live: false },
      };
      chart = { key, plot: new uPlot(opts, [[], ...names.map(() => [])], el) };
      charts[id] = chart;
    }
    const xs = points.map((p) => p.atMs / 1000);
    const series = names.map((name) => points.map((p) => valuesOf(p, name)));
    chart.plot.setData([xs, ...series]);
    const values = series.flat().filter((v) => v !== null && v !== undefined && v !== 0).length;
    el.dataset.points = String(xs.length);
    el.dataset.values = String(values);
    let note = el.parentElement.querySelector('.empty');
    if (!note) {
      note = document.createElement('p');
      note.className = 'empty';
      el.parentElement.appendChild(note);
    }
    note.textContent = values === 0 ? emptyNote() : '';
    note.hidden = values > 0;
  }

  function renderCharts(sample) {
    const policies = Object.keys(sample.decisionsByPolicy);
    draw(
      'chart-decisions',
      policies.length > 0 ? policies : ['decisions'],
      (p, name) => p.decisionsPerS[name] ?? 0,
    );
    draw('chart-hits', ['hit rate'], (p) => (p.hitRate === null ? null : p.hitRate * 100));
    draw('chart-ttft', ['p50', 'p99'], (p, name) => (name === 'p50' ? p.ttftP50Ms : p.ttftP99Ms));
    draw(
      'chart-queued',
      sample.replicas.map((r) => r.name),
      (p, name) => p.queuedPromptTokens[name] ?? null,
    );
  }

  function onMessage(message) {
    // The first message of a stream carries the last minutes: drawn at once below.
    if (document.body.dataset.firstPoints === undefined) {
      document.body.dataset.firstPoints = String(message.points.length);
    }
    for (const p of message.points) points.push(p);
    points.splice(0, Math.max(0, points.length - HISTORY));
    renderTable(message.sample);
    renderCharts(message.sample);
    document.body.dataset.updates = String(Number(document.body.dataset.updates ?? 0) + 1);
  }

  async function connect() {
    const key = keyFromPage();
    const headers = key ? { authorization: `Bearer ${key}` } : {};
    try {
      const res = await fetch('/dashboard/events', { headers });
      if (res.status === 401 || res.status === 403) {
        status.innerHTML = '<span class="down">admin key needed</span>';
        keyForm.style.display = 'block';
        return;
      }
      if (!res.ok || !res.body) throw new Error(`status ${res.status}`);
      points.length = 0;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end = buffer.indexOf('\n\n');
        while (end >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = event
            .split('\n')
            .filter((line) => line.startsWith('data: '))
            .map((line) => line.slice(6))
            .join('\n');
          if (data) onMessage(JSON.parse(data));
          end = buffer.indexOf('\n\n');
        }
      }
      throw new Error('stream ended');
    } catch (err) {
      status.innerHTML = `<span class="down">disconnected</span> (${err.message}); retrying…`;
      setTimeout(connect, 2000);
    }
  }

  connect();
})();
