// The live part of the page: the invariants (red once one breaks), every
// instance with its share and the demo's kill button, and the charts. Fed by
// app.js with each snapshot of /api/events. Plain browser JavaScript.
'use strict';
const OUTCOME_LABELS = {
  created: '201 bought',
  sold_out: 'Sold out',
  already_purchased: 'Already bought',
  busy: 'Busy (429)',
  error: 'Error / other',
};
const OUTCOME_COLORS = {
  created: '#16a34a',
  sold_out: '#6b7280',
  already_purchased: '#2563eb',
  busy: '#ea580c',
  error: '#dc2626',
};
/** Coupons drawn in the per-coupon charts (the newest on sale). */
const CHARTED_COUPONS = 8;

const invariantsBox = document.getElementById('invariants');
const invariantsText = document.getElementById('invariants-text');
const invariantsDetail = document.getElementById('invariants-detail');
const instanceList = document.getElementById('instances');
const adminInput = document.getElementById('admin-token');
const killResult = document.getElementById('kill-result');

const chart = (id, options) =>
  window.saleCharts.createTimeChart(document.getElementById(id), options);
const charts = {
  outcomes: chart('chart-outcomes', {
    colors: OUTCOME_COLORS,
    labels: (name) => OUTCOME_LABELS[name] ?? name,
    unit: '/s',
    decimals: 1,
  }),
  latency: chart('chart-latency', { unit: ' ms', decimals: 1, points: true }),
  stock: chart('chart-stock', {}),
  queue: chart('chart-queue', {}),
  lockTime: chart('chart-lock-time', {
    unit: ' ms',
    decimals: 1,
    points: true,
  }),
  share: chart('chart-share', { unit: '/s', decimals: 1 }),
};

// The admin token: typed in, or handed over once in the URL's fragment
// (#admin=…, as `npm run demo` prints it); kept for this tab only.
const TOKEN_KEY = 'flash-sale-admin-token';
const fromFragment = /^#admin=([^&]+)$/.exec(location.hash);
if (fromFragment) {
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(fromFragment[1]));
  history.replaceState(null, '', location.pathname + location.search);
}
adminInput.value = sessionStorage.getItem(TOKEN_KEY) ?? '';
adminInput.addEventListener('input', () =>
  sessionStorage.setItem(TOKEN_KEY, adminInput.value.trim()),
);
const adminHeaders = () =>
  adminInput.value.trim()
    ? { Authorization: `Bearer ${adminInput.value.trim()}` }
    : {};

const clockTime = (iso) =>
  new Date(iso).toLocaleTimeString([], { hourCycle: 'h23' });

/** The previousSnapshot snapshot's figures, to turn totals into rates. */
let previousSnapshot = null;
/** The first break seen since the page opened: the page stays red. */
let firstBreak = null;

function renderInvariants(snapshot) {
  const broken = snapshot.coupons
    .map((coupon) => ({ coupon, check: snapshot.invariants[coupon.id] }))
    .filter(({ check }) => check && check.state === 'broken');
  if (broken.length > 0 && !firstBreak) {
    firstBreak = {
      at: snapshot.at,
      text: broken
        .map(
          ({ coupon, check }) => `#${coupon.id}: ${check.problems.join('; ')}`,
        )
        .join(' · '),
    };
  }
  if (broken.length > 0) {
    invariantsBox.dataset.state = 'broken';
    invariantsText.textContent = 'Invariant broken';
    invariantsDetail.textContent = broken
      .map(({ coupon, check }) => `#${coupon.id}: ${check.problems.join('; ')}`)
      .join(' · ');
  } else if (firstBreak) {
    invariantsBox.dataset.state = 'broken';
    invariantsText.textContent = `Invariant broke at ${clockTime(firstBreak.at)}`;
    invariantsDetail.textContent = `${firstBreak.text} (it holds again now)`;
  } else {
    invariantsBox.dataset.state = 'ok';
    invariantsText.textContent = 'Invariants hold';
    invariantsDetail.textContent =
      'For every coupon shown: sold = orders = stock − remaining, and no buyer has two orders.';
  }
}

/** `:port (pid n)` as the demo runs them; several apps of one process (tests) get a part of their id. */
const instanceLabel = (instance) =>
  instance.port
    ? `:${instance.port} (pid ${instance.pid})`
    : `pid ${instance.pid} ${instance.id.slice(-4)}`;

async function killInstance(instance, button) {
  button.disabled = true;
  const response = await fetch(
    `/api/demo/instances/${encodeURIComponent(instance.id)}/kill`,
    { method: 'POST', headers: adminHeaders() },
  ).catch(() => null);
  const body = response ? await response.json().catch(() => null) : null;
  killResult.textContent =
    response && response.ok
      ? `Killed ${instanceLabel(instance)} (SIGKILL).`
      : `Kill refused: ${body?.message ?? 'no answer'}`;
  killResult.dataset.kind = response && response.ok ? 'ok' : 'error';
}

function renderInstances(snapshot, handled) {
  const total = Object.values(handled).reduce((sum, n) => sum + n, 0);
  instanceList.replaceChildren(
    ...snapshot.instances.map((instance) => {
      const item = document.createElement('li');
      item.className = 'instance';
      item.dataset.alive = String(instance.alive);
      item.dataset.instanceId = instance.id;
      const title = document.createElement('strong');
      title.textContent =
        instanceLabel(instance) + (instance.self ? ' · this page' : '');
      const state = document.createElement('span');
      state.className = 'instance-state';
      const answered = Object.values(instance.outcomes).reduce(
        (s, n) => s + n,
        0,
      );
      const share =
        total > 0 ? Math.round(((handled[instance.id] ?? 0) / total) * 100) : 0;
      state.textContent = instance.alive
        ? `up · ${answered.toLocaleString()} answers · ${share}% now`
        : 'gone';
      item.append(title, ' ', state);
      if (snapshot.demo && instance.alive && !instance.self) {
        const button = document.createElement('button');
        button.type = 'button';
        button.className = 'kill';
        button.textContent = 'Kill';
        button.addEventListener(
          'click',
          () => void killInstance(instance, button),
        );
        item.append(' ', button);
      }
      return item;
    }),
  );
}

const sumOf = (values) => values.reduce((total, n) => total + n, 0);

const couponSeriesName = (coupon) => `#${coupon.id} ${coupon.name}`;

/** Per-interval figures from two snapshots' per-instance totals (an instance restarted counts from 0). */
function deltas(snapshot) {
  const outcomes = {};
  const buckets = Array.from(
    { length: snapshot.bucketBoundsMs.length + 1 },
    () => 0,
  );
  const handled = {};
  for (const instance of snapshot.instances) {
    const before = previousSnapshot?.instances.get(instance.id);
    const outcomeDelta = {};
    for (const [outcome, n] of Object.entries(instance.outcomes)) {
      const d = Math.max(0, n - (before?.outcomes[outcome] ?? n));
      outcomeDelta[outcome] = d;
      outcomes[outcome] = (outcomes[outcome] ?? 0) + d;
    }
    handled[instance.id] = sumOf(Object.values(outcomeDelta));
    instance.buckets.forEach((n, i) => {
      buckets[i] += Math.max(0, n - (before?.buckets[i] ?? n));
    });
  }
  return { outcomes, buckets, handled };
}

function renderDashboard(snapshot) {
  renderInvariants(snapshot);
  const seconds = Date.parse(snapshot.at) / 1_000;
  const { outcomes, buckets, handled } = deltas(snapshot);
  renderInstances(snapshot, handled);
  const elapsed = previousSnapshot ? seconds - previousSnapshot.seconds : 0;
  if (previousSnapshot && elapsed > 0) {
    const perSecond = (n) => n / elapsed;
    charts.outcomes.push(
      seconds,
      Object.fromEntries(
        Object.keys(OUTCOME_LABELS).map((o) => [
          o,
          perSecond(outcomes[o] ?? 0),
        ]),
      ),
    );
    charts.latency.push(seconds, {
      p50: window.saleCharts.bucketQuantile(
        buckets,
        snapshot.bucketBoundsMs,
        0.5,
      ),
      p95: window.saleCharts.bucketQuantile(
        buckets,
        snapshot.bucketBoundsMs,
        0.95,
      ),
      p99: window.saleCharts.bucketQuantile(
        buckets,
        snapshot.bucketBoundsMs,
        0.99,
      ),
    });
    charts.share.push(
      seconds,
      Object.fromEntries(
        snapshot.instances
          .filter((instance) => instance.alive)
          .map((instance) => [
            instanceLabel(instance),
            perSecond(handled[instance.id] ?? 0),
          ]),
      ),
    );
  }
  const onSale = snapshot.coupons
    .filter((coupon) => coupon.saleState === 'on_sale')
    .slice(0, CHARTED_COUPONS);
  charts.stock.push(
    seconds,
    Object.fromEntries(
      onSale.map((coupon) => [couponSeriesName(coupon), coupon.remaining]),
    ),
  );
  charts.queue.push(
    seconds,
    Object.fromEntries(
      onSale.map((coupon) => [
        couponSeriesName(coupon),
        snapshot.load[coupon.id]?.queue ?? 0,
      ]),
    ),
  );
  charts.lockTime.push(
    seconds,
    Object.fromEntries(
      onSale.map((coupon) => {
        const now = snapshot.load[coupon.id];
        const before = previousSnapshot?.load[coupon.id];
        const count = (now?.lockCount ?? 0) - (before?.lockCount ?? 0);
        const ms = (now?.lockTotalMs ?? 0) - (before?.lockTotalMs ?? 0);
        return [
          couponSeriesName(coupon),
          previousSnapshot && count > 0 ? ms / count : null,
        ];
      }),
    ),
  );
  previousSnapshot = {
    seconds,
    load: snapshot.load,
    instances: new Map(
      snapshot.instances.map((instance) => [instance.id, instance]),
    ),
  };
}

window.saleDashboard = { update: renderDashboard, adminHeaders };
