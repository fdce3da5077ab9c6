// The flash-sale page: renders the snapshots of /api/events, buys and creates
// coupons through the JSON API. Plain browser JavaScript, no build step.
'use strict';

const couponList = document.getElementById('coupons');
const noCoupons = document.getElementById('no-coupons');
const ordersTable = document.getElementById('orders');
const noOrders = document.getElementById('no-orders');
const connection = document.querySelector('.connection');
const connectionText = document.getElementById('connection-text');
const updatedAt = document.getElementById('updated-at');
const template = document.getElementById('coupon-template');
const createForm = document.getElementById('create-form');
const lockStats = document.getElementById('lock-stats');

/** Cards by coupon id, kept across updates so typed user ids survive. */
const cards = new Map();

const HEADLINES = {
  SOLD_OUT: 'Sold out',
  ALREADY_PURCHASED: 'Already purchased',
  BUSY: 'Busy, try again',
  NOT_ON_SALE: 'Not on sale',
  NOT_FOUND: 'No such coupon',
  BAD_REQUEST: 'Invalid request',
  UNAVAILABLE: 'Service unavailable',
  UNAUTHORIZED: 'Admin token needed',
  FORBIDDEN: 'Admin token refused',
};

const STATE_LABELS = {
  on_sale: 'On sale',
  upcoming: 'Upcoming',
  ended: 'Ended',
  disabled: 'Disabled',
};

const money = (value) => Number(value).toFixed(2);
const time = (iso) =>
  new Date(iso).toLocaleTimeString([], {
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
  });

/** The connection state; announced only when it changes, not at every update. */
function setConnection(state, text) {
  connection.dataset.state = state;
  if (connectionText.textContent !== text) connectionText.textContent = text;
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Shows the full text on hover where the cell cuts it short. */
function withTitle(node) {
  node.title = node.textContent;
  return node;
}

/**
 * Shows an API answer in `box`: a headline, the server's message, the status
 * and code, and the raw JSON behind a disclosure.
 */
function showAnswer(box, { ok, headline, message, status, body }) {
  box.replaceChildren();
  box.dataset.kind = ok ? 'ok' : 'error';
  const line = element('p', 'answer');
  line.append(element('strong', 'headline', headline));
  if (message) line.append(' ', element('span', 'message', message));
  box.append(line);
  if (body !== undefined) {
    const code = body && body.code ? ` ${body.code}` : '';
    const details = element('details');
    details.append(
      element('summary', null, `HTTP ${status}${code}`),
      element('pre', null, JSON.stringify(body, null, 2)),
    );
    box.append(details);
  }
}

function showFailure(box, status, body) {
  const code = body && typeof body.code === 'string' ? body.code : '';
  showAnswer(box, {
    ok: false,
    headline: HEADLINES[code] ?? (code || `HTTP ${status}`),
    message: body && typeof body.message === 'string' ? body.message : '',
    status,
    body,
  });
}

/** fetch() that always resolves to `{ status, body }` (status 0: no answer). */
async function call(url, init) {
  try {
    const response = await fetch(url, init);
    let body = null;
    try {
      body = await response.json();
    } catch {
      body = null;
    }
    return { status: response.status, body };
  } catch {
    return {
      status: 0,
      body: {
        ok: false,
        code: 'NETWORK',
        message: 'The server did not answer',
      },
    };
  }
}

function createCard(coupon) {
  const item = template.content.firstElementChild.cloneNode(true);
  item.dataset.couponId = String(coupon.id);
  const inputId = `buy-user-${coupon.id}`;
  const input = item.querySelector('.buy-user');
  input.id = inputId;
  item.querySelector('.buy-label').htmlFor = inputId;
  const button = item.querySelector('.buy-button');
  const result = item.querySelector('.result');
  item.querySelector('.buy').addEventListener('submit', async (event) => {
    event.preventDefault();
    const userId = input.value.trim();
    if (!input.checkValidity() || userId === '') {
      showAnswer(result, {
        ok: false,
        headline: 'Check the user id',
        message: '1 to 64 letters, digits, "-" or "_".',
      });
      input.focus();
      return;
    }
    button.disabled = true;
    button.textContent = 'Buying…';
    const { status, body } = await call(`/api/coupon/seckill/${coupon.id}`, {
      method: 'POST',
      headers: { userId },
    });
    button.disabled = false;
    button.textContent = 'Buy';
    if (body && body.ok === true) {
      showAnswer(result, {
        ok: true,
        headline: 'Bought',
        message: `order #${body.orderId} for ${userId}`,
        status,
        body,
      });
    } else {
      showFailure(result, status, body);
    }
  });
  const card = {
    item,
    name: item.querySelector('.name'),
    badge: item.querySelector('.badge'),
    id: item.querySelector('.coupon-id'),
    price: item.querySelector('.price'),
    remaining: item.querySelector('.remaining'),
    stock: item.querySelector('.stock'),
    sold: item.querySelector('.sold'),
    fill: item.querySelector('.bar-fill'),
    last: undefined,
  };
  cards.set(coupon.id, card);
  return card;
}

function updateCard(card, coupon) {
  const soldOut = coupon.saleState === 'on_sale' && coupon.remaining === 0;
  card.name.textContent = coupon.name;
  card.id.textContent = `#${coupon.id}`;
  card.price.textContent = money(coupon.price);
  card.stock.textContent = String(coupon.stock);
  card.sold.textContent = String(coupon.sold);
  if (card.last !== undefined && card.last !== coupon.remaining) {
    // Restart the highlight of a changed figure.
    card.remaining.classList.remove('changed');
    void card.remaining.offsetWidth;
    card.remaining.classList.add('changed');
  }
  card.last = coupon.remaining;
  card.remaining.textContent = String(coupon.remaining);
  const share = coupon.stock > 0 ? coupon.remaining / coupon.stock : 0;
  card.fill.style.width = `${Math.round(share * 100)}%`;
  card.badge.textContent = soldOut
    ? 'Sold out'
    : (STATE_LABELS[coupon.saleState] ?? coupon.saleState);
  card.badge.dataset.state = soldOut ? 'sold_out' : coupon.saleState;
  card.badge.title =
    coupon.saleState === 'upcoming'
      ? `Starts ${new Date(coupon.startAt).toLocaleString()}`
      : `Ends ${new Date(coupon.endAt).toLocaleString()}`;
  card.item.dataset.state = soldOut ? 'sold_out' : coupon.saleState;
}

function renderCoupons(coupons) {
  const seen = new Set();
  coupons.forEach((coupon, index) => {
    seen.add(coupon.id);
    const card = cards.get(coupon.id) ?? createCard(coupon);
    updateCard(card, coupon);
    // Move only what is out of place: moving a card would take the focus
    // out of its input.
    const at = couponList.children[index];
    if (at !== card.item) couponList.insertBefore(card.item, at ?? null);
  });
  for (const [id, card] of cards) {
    if (!seen.has(id)) {
      card.item.remove();
      cards.delete(id);
    }
  }
  noCoupons.hidden = coupons.length > 0;
}

function renderOrders(orders) {
  const body = ordersTable.tBodies[0];
  body.replaceChildren(
    ...orders.map((order) => {
      const row = element('tr');
      const when = element('td', 'when');
      const stamp = element('time', null, time(order.createdAt));
      stamp.dateTime = order.createdAt;
      when.append(stamp);
      row.append(
        when,
        element('td', 'order-id', `#${order.id}`),
        withTitle(element('td', 'coupon-name', order.couponName)),
        withTitle(element('td', 'user', order.buyer)),
        element('td', 'num paid', money(order.amountPaid)),
      );
      return row;
    }),
  );
  ordersTable.hidden = orders.length === 0;
  noOrders.hidden = orders.length > 0;
}

const count = (record, key) => Math.round(record[key] ?? 0);
const waitText = (ms) => (ms === null ? '–' : `${ms.toFixed(1)} ms`);
function setStat(stat, text) {
  lockStats.querySelector(`[data-stat="${stat}"]`).textContent = text;
}

/** The instance's lock figures: the same numbers as its /metrics. */
function renderLocks(locks) {
  if (!locks) return;
  setStat('acquired', count(locks.acquisitions, 'acquired'));
  setStat(
    'refused',
    `${count(locks.acquisitions, 'busy')} / ${count(locks.acquisitions, 'timeout')}`,
  );
  setStat(
    'wait',
    `${waitText(locks.waitP50Ms)} / ${waitText(locks.waitP99Ms)}`,
  );
  setStat('now', `${locks.holds} / ${locks.waiters}`);
  setStat(
    'handoffs',
    `${count(locks.handoffs, 'local')} / ${count(locks.handoffs, 'remote')}`,
  );
  setStat('lost', locks.lost);
}

function connect() {
  const events = new EventSource('/api/events');
  events.addEventListener('message', (event) => {
    let update;
    try {
      update = JSON.parse(event.data);
    } catch {
      return;
    }
    if (!update.ok) {
      setConnection('trouble', update.message || 'The server has a problem');
      return;
    }
    renderCoupons(update.coupons);
    renderOrders(update.orders);
    renderLocks(update.locks);
    window.saleDashboard.update(update);
    setConnection('live', 'Live');
    updatedAt.textContent = `· updated ${time(update.at)}`;
  });
  events.addEventListener('error', () => {
    // EventSource reconnects by itself (after the server's retry delay).
    setConnection('offline', 'Disconnected, reconnecting…');
  });
}

createForm.addEventListener('submit', async (event) => {
  event.preventDefault();
  const result = createForm.querySelector('.result');
  if (!createForm.checkValidity()) {
    showAnswer(result, {
      ok: false,
      headline: 'Check the form',
      message: 'A name, a price of 0 or more and a whole stock are needed.',
    });
    return;
  }
  const data = new FormData(createForm);
  const button = createForm.querySelector('button');
  button.disabled = true;
  const { status, body } = await call('/api/coupons', {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      ...window.saleDashboard.adminHeaders(),
    },
    body: JSON.stringify({
      name: String(data.get('name')).trim(),
      price: Number(data.get('price')),
      stock: Number(data.get('stock')),
    }),
  });
  button.disabled = false;
  if (status === 201 && body) {
    showAnswer(result, {
      ok: true,
      headline: 'Created',
      message: `coupon #${body.id} “${body.name}”, stock ${body.stock}`,
      status,
      body,
    });
    createForm.reset();
  } else {
    showFailure(result, status, body);
  }
});

connect();
