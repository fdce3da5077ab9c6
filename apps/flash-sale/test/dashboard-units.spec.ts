import type { ExecutionContext } from '@nestjs/common';
import { firstValueFrom, take, toArray } from 'rxjs';
import { outcomeOf } from '../src/metrics/purchase-metrics.js';
import { PurchaseTracker } from '../src/metrics/purchase-tracker.js';
import { AdminTokenGuard } from '../src/web/admin-token.guard.js';
import { buyerTag } from '../src/web/buyer-tag.js';
import {
  couponLoad,
  forgottenInstances,
  instanceViews,
} from '../src/web/instance-figures.js';
import {
  INVARIANT_GRACE_MS,
  InvariantWatch,
} from '../src/web/live-invariants.js';
import { SaleFeed, serialiseUpdate } from '../src/web/sale-feed.service.js';
import type {
  SaleSnapshots,
  SaleUpdate,
} from '../src/web/sale-snapshot.service.js';

/** The dashboard's parts that need no Redis, database or browser. */

/** A request context with this Authorization header, and the reply's setHeader spy. */
const context = (authorization?: string) => {
  const headers: Record<string, string> = {};
  const reply = { setHeader: vi.fn() };
  return {
    reply,
    context: {
      switchToHttp: () => ({
        getRequest: () => ({
          headers: authorization ? { authorization } : headers,
        }),
        getResponse: () => reply,
      }),
    } as unknown as ExecutionContext,
  };
};
const statusOf = (fn: () => unknown) => {
  try {
    fn();
    return 200;
  } catch (error) {
    return (error as { getStatus(): number }).getStatus();
  }
};

/** An entry of the instances hash. */
const entry = (id: string, at: number, extra: object = {}) =>
  JSON.stringify({
    id,
    host: 'h',
    pid: 1,
    port: null,
    at,
    outcomes: {},
    buckets: [],
    inFlight: {},
    lockTime: {},
    ...extra,
  });

describe('buyer tags', () => {
  it('shows 8 hex characters of a hash, the same for the same buyer, never the id', () => {
    const tag = buyerTag('alice');
    expect(tag).toMatch(/^[0-9a-f]{8}$/);
    expect(buyerTag('alice')).toBe(tag);
    expect(buyerTag('bob')).not.toBe(tag);
    expect(tag).not.toContain('alice');
  });
});

describe('AdminTokenGuard', () => {
  const token = 'a-long-enough-admin-token';
  let saved: string | undefined;
  beforeEach(() => {
    saved = process.env.ADMIN_TOKEN;
    process.env.ADMIN_TOKEN = token;
  });
  afterEach(() => {
    if (saved === undefined) delete process.env.ADMIN_TOKEN;
    else process.env.ADMIN_TOKEN = saved;
  });

  it('lets the right bearer token through', () => {
    const guard = new AdminTokenGuard();
    expect(guard.canActivate(context(`Bearer ${token}`).context)).toBe(true);
  });

  it('answers 401 with WWW-Authenticate without a token, 403 with a wrong one', () => {
    const guard = new AdminTokenGuard();
    const missing = context();
    expect(statusOf(() => guard.canActivate(missing.context))).toBe(401);
    expect(missing.reply.setHeader).toHaveBeenCalledWith(
      'WWW-Authenticate',
      'Bearer',
    );
    expect(
      statusOf(() => guard.canActivate(context('Bearer nope').context)),
    ).toBe(403);
    expect(
      statusOf(() => guard.canActivate(context(`Basic ${token}`).context)),
    ).toBe(401);
  });

  it('closes admin routes when no token, or a too short one, is configured', () => {
    const guard = new AdminTokenGuard();
    for (const configured of [undefined, 'short']) {
      if (configured === undefined) delete process.env.ADMIN_TOKEN;
      else process.env.ADMIN_TOKEN = configured;
      expect(
        statusOf(() =>
          guard.canActivate(context(`Bearer ${configured ?? 'x'}`).context),
        ),
      ).toBe(403);
    }
  });
});

describe('purchase outcomes', () => {
  it('groups answers as the charts show them', () => {
    expect(outcomeOf(201)).toBe('created');
    expect(outcomeOf(409, 'SOLD_OUT')).toBe('sold_out');
    expect(outcomeOf(409, 'ALREADY_PURCHASED')).toBe('already_purchased');
    expect(outcomeOf(429, 'BUSY')).toBe('busy');
    expect(outcomeOf(409, 'NOT_ON_SALE')).toBe('error');
    expect(outcomeOf(503, 'UNAVAILABLE')).toBe('error');
    expect(outcomeOf(0)).toBe('error');
  });

  it('tracks the queue per coupon and the time of purchases that reached the lock', async () => {
    const tracker = new PurchaseTracker();
    const a = tracker.start('901');
    const b = tracker.start('901');
    expect((await tracker.figures()).inFlight).toEqual({ '901': 2 });
    a(201);
    b(409, 'SOLD_OUT');
    b(201); // a second call is ignored
    const figures = await tracker.figures();
    expect(figures.inFlight).toEqual({});
    expect(figures.lockTime['901'].count).toBe(1);
  });
});

describe('instances from the Redis hash', () => {
  const now = 1_000_000;

  it('marks each alive or gone, drops forgotten and broken entries', () => {
    const raw = {
      a: entry('a', now - 100, { port: 3001, inFlight: { '7': 2 } }),
      b: entry('b', now - 3_000, {
        port: 3002,
        inFlight: { '7': 5 },
        lockTime: { '7': { count: 2, totalMs: 30 } },
      }),
      c: entry('c', now - 120_000),
      d: 'not json',
    };
    const views = instanceViews(raw, 'a', now);
    expect(views.map((v) => [v.id, v.alive, v.self])).toEqual([
      ['a', true, true],
      ['b', false, false],
    ]);
    expect(forgottenInstances(raw, now).toSorted()).toEqual(['c', 'd']);
    // The queue counts live instances only; lock time every listed one.
    expect(couponLoad(views)).toEqual({
      '7': { queue: 2, lockCount: 2, lockTotalMs: 30 },
    });
  });
});

describe('live invariants', () => {
  const counts = {
    id: 1,
    stock: 10,
    remaining: 7,
    sold: 3,
    orders: 3,
    buyers: 3,
  };

  it('holds when sold = orders = stock − remaining and nobody bought twice', () => {
    expect(new InvariantWatch().check(counts)).toEqual({
      state: 'ok',
      problems: [],
    });
  });

  it('calls a difference between Redis and the database settling at first and broken once it lasts', () => {
    const watch = new InvariantWatch();
    // A unit taken in Redis whose order is not written yet.
    const inFlight = { ...counts, remaining: 6 };
    expect(watch.check(inFlight, 0).state).toBe('settling');
    const later = watch.check(inFlight, INVARIANT_GRACE_MS);
    expect(later.state).toBe('broken');
    expect(later.problems.join()).toContain('orders (3)');
    expect(watch.check(counts, INVARIANT_GRACE_MS + 1).state).toBe('ok');
  });

  it('calls a difference within the database broken at once', () => {
    const watch = new InvariantWatch();
    const offSold = watch.check({ ...counts, sold: 4 }, 0);
    expect(offSold.state).toBe('broken');
    expect(offSold.problems).toEqual(['sold (4) ≠ orders (3)']);
    const twice = watch.check({ ...counts, buyers: 2 }, 0);
    expect(twice.state).toBe('broken');
    expect(twice.problems.join()).toContain('more than one order');
  });
});

describe('the SSE feed', () => {
  const update: SaleUpdate = {
    ok: false,
    at: '2030-01-01T00:00:00.000Z',
    message: 'x',
  };

  it('puts `at` in front of the serialised content', () => {
    const { at, ...content } = update;
    expect(JSON.parse(serialiseUpdate(JSON.stringify(content), at))).toEqual(
      update,
    );
  });

  it('serialises each snapshot once, whatever the number of clients', async () => {
    const snapshots = { read: vi.fn(async () => update) };
    const feed = new SaleFeed(snapshots as unknown as SaleSnapshots);
    const stringify = vi.spyOn(JSON, 'stringify');
    try {
      const clients = Array.from({ length: 3 }, () =>
        firstValueFrom(feed.events().pipe(take(1), toArray())),
      );
      const [first, ...others] = await Promise.all(clients);
      expect(typeof first[0].data).toBe('string');
      for (const other of others) expect(other[0].data).toBe(first[0].data);
      expect(snapshots.read).toHaveBeenCalledTimes(1);
      // One serialisation of the snapshot (the `at` string aside).
      const objects = stringify.mock.calls.filter(
        ([value]) => typeof value === 'object',
      );
      expect(objects).toHaveLength(1);
    } finally {
      stringify.mockRestore();
      await feed.beforeApplicationShutdown();
    }
  });
});
