import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type MessageEvent,
} from '@nestjs/common';
import {
  Observable,
  ReplaySubject,
  defer,
  finalize,
  map,
  share,
  takeUntil,
} from 'rxjs';
import { CouponService } from '../coupon/coupon.service.js';
import type { SaleState } from '../coupon/coupon.types.js';
import { DATABASE } from '../database/database.module.js';
import type { Db } from '../database/database.types.js';

/** How often the feed reads the sale while anyone is watching, in ms. */
export const SALE_FEED_INTERVAL_MS = 500;
/** An unchanged snapshot is sent again after this long, so proxies keep the stream open. */
export const SALE_FEED_HEARTBEAT_MS = 15_000;
/** How long a browser waits before reconnecting a dropped stream, in ms (SSE `retry`). */
export const SALE_FEED_RETRY_MS = 2_000;
/** How long shutdown waits for the open streams to finish, in ms. */
const SHUTDOWN_WAIT_MS = 1_000;
/** Coupons in a snapshot (newest first). */
export const SNAPSHOT_COUPONS = 20;
/** Orders in a snapshot (newest first, all coupons). */
export const SNAPSHOT_ORDERS = 15;

/** The HTTP response of a stream, to know when it has been sent in full. */
export interface StreamResponse {
  readonly writableFinished: boolean;
  readonly destroyed: boolean;
  once(event: 'finish' | 'close', listener: () => void): unknown;
}

export interface CouponSummary {
  readonly id: number;
  readonly name: string;
  readonly price: number;
  /** The initial stock. */
  readonly stock: number;
  /** Units left (Redis). */
  readonly remaining: number;
  /** Orders (database). */
  readonly sold: number;
  readonly saleState: SaleState;
  readonly startAt: string;
  readonly endAt: string;
}

export interface RecentOrder {
  readonly id: number;
  readonly couponId: number;
  readonly couponName: string;
  readonly userId: string;
  readonly amountPaid: number;
  readonly createdAt: string;
}

/** What one server-sent event carries. */
export type SaleUpdate =
  | {
      readonly ok: true;
      readonly at: string;
      readonly coupons: CouponSummary[];
      readonly orders: RecentOrder[];
    }
  | { readonly ok: false; readonly at: string; readonly message: string };

/**
 * The live view of the sale for the web page: one poll of the database and
 * Redis every {@link SALE_FEED_INTERVAL_MS} ms, shared by every connected
 * client, running only while at least one is connected. It only reads: it
 * never takes a coupon's lock, so watchers never slow down buyers.
 */
@Injectable()
export class SaleFeed implements BeforeApplicationShutdown {
  private readonly logger = new Logger('SaleFeed');
  /** Replays, so that a client arriving during shutdown is ended at once too. */
  private readonly shutdown = new ReplaySubject<void>(1);
  private readonly updates: Observable<SaleUpdate>;
  private clients = 0;
  /** Settles when the response of an open stream has finished or closed. */
  private readonly responses = new Set<Promise<void>>();
  private pollers = 0;
  private lastError = '';

  constructor(
    private readonly coupons: CouponService,
    @Inject(DATABASE) private readonly db: Db,
  ) {
    this.updates = new Observable<SaleUpdate>((subscriber) => {
      this.pollers += 1;
      let stopped = false;
      let timer: NodeJS.Timeout | undefined;
      let lastKey = '';
      let lastSentAt = 0;
      const tick = async () => {
        const update = await this.snapshot();
        if (stopped) return;
        const { at: _at, ...content } = update;
        const key = JSON.stringify(content);
        const now = Date.now();
        if (key !== lastKey || now - lastSentAt >= SALE_FEED_HEARTBEAT_MS) {
          lastKey = key;
          lastSentAt = now;
          subscriber.next(update);
        }
        // The next read starts once this one is done: a slow database never
        // piles up reads.
        timer = setTimeout(() => void tick(), SALE_FEED_INTERVAL_MS);
      };
      void tick();
      return () => {
        stopped = true;
        clearTimeout(timer);
        this.pollers -= 1;
      };
    }).pipe(
      // One poll for all clients; a client that joins gets the latest
      // snapshot at once. The poll stops when the last client leaves.
      share({
        connector: () => new ReplaySubject<SaleUpdate>(1),
        resetOnRefCountZero: true,
        resetOnComplete: true,
        resetOnError: true,
      }),
    );
  }

  /** Clients connected now. */
  get clientCount(): number {
    return this.clients;
  }

  /** Polls running now: 1 while anyone watches, else 0. */
  get pollerCount(): number {
    return this.pollers;
  }

  /**
   * The stream of one client, as server-sent events. It ends when the client
   * disconnects (Nest unsubscribes) or when the app shuts down. Pass the HTTP
   * response so that shutdown can wait until it has been sent.
   */
  events(response?: StreamResponse): Observable<MessageEvent> {
    if (response) this.track(response);
    return defer(() => {
      this.clients += 1;
      return this.updates.pipe(
        map((update, index): MessageEvent =>
          index === 0
            ? { data: update, retry: SALE_FEED_RETRY_MS }
            : { data: update },
        ),
        takeUntil(this.shutdown),
        finalize(() => {
          this.clients -= 1;
        }),
      );
    });
  }

  /**
   * Ends every open stream and waits (briefly) until their responses are
   * sent: the HTTP server, closed next, then finds their connections idle and
   * closes them at once instead of after the keep-alive timeout.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.shutdown.next();
    if (this.responses.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(this.responses),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, SHUTDOWN_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
  }

  private track(response: StreamResponse): void {
    if (response.writableFinished || response.destroyed) return;
    const sent = new Promise<void>((resolve) => {
      response.once('finish', resolve);
      response.once('close', resolve);
    });
    this.responses.add(sent);
    void sent.then(() => this.responses.delete(sent));
  }

  /** The coupons with their counts and the newest orders; an error update when a backend fails. */
  async snapshot(): Promise<SaleUpdate> {
    const at = new Date().toISOString();
    try {
      const [coupons, orders] = await Promise.all([
        this.coupons.list(SNAPSHOT_COUPONS),
        this.recentOrders(SNAPSHOT_ORDERS),
      ]);
      this.lastError = '';
      return {
        ok: true,
        at,
        coupons: coupons.map((coupon) => ({
          id: coupon.id,
          name: coupon.name,
          price: coupon.price,
          stock: coupon.stock,
          remaining: coupon.remaining,
          sold: coupon.sold,
          saleState: coupon.saleState,
          startAt: coupon.startAt,
          endAt: coupon.endAt,
        })),
        orders,
      };
    } catch (error) {
      const cause = (error as Error).message ?? String(error);
      if (cause !== this.lastError) {
        this.logger.warn(`Cannot read the sale: ${cause}`);
        this.lastError = cause;
      }
      return {
        ok: false,
        at,
        message: 'Redis or the database is not answering; retrying',
      };
    }
  }

  private async recentOrders(limit: number): Promise<RecentOrder[]> {
    const rows = await this.db
      .selectFrom('orders')
      .innerJoin('coupons', 'coupons.id', 'orders.couponId')
      .select([
        'orders.id',
        'orders.couponId',
        'coupons.name as couponName',
        'orders.userId',
        'orders.amountPaid',
        'orders.createdAt',
      ])
      .orderBy('orders.id', 'desc')
      .limit(limit)
      .execute();
    return rows.map((row) => ({
      ...row,
      createdAt: row.createdAt.toISOString(),
    }));
  }
}
