import {
  Injectable,
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
import { SaleSnapshots, type SaleUpdate } from './sale-snapshot.service.js';

export {
  SNAPSHOT_COUPONS,
  SNAPSHOT_ORDERS,
  type CouponSummary,
  type RecentOrder,
  type SaleUpdate,
} from './sale-snapshot.service.js';

/** How often the feed reads the sale while anyone is watching, in ms. */
export const SALE_FEED_INTERVAL_MS = 500;
/** An unchanged snapshot is sent again after this long, so proxies keep the stream open. */
export const SALE_FEED_HEARTBEAT_MS = 15_000;
/** How long a browser waits before reconnecting a dropped stream, in ms (SSE `retry`). */
export const SALE_FEED_RETRY_MS = 2_000;
/** How long shutdown waits for the open streams to finish, in ms. */
const SHUTDOWN_WAIT_MS = 1_000;

/** The HTTP response of a stream, to know when it has been sent in full. */
export interface StreamResponse {
  readonly writableFinished: boolean;
  readonly destroyed: boolean;
  once(event: 'finish' | 'close', listener: () => void): unknown;
}

/**
 * A snapshot as sent: `{"at":…,…}`, serialised once for every client
 * (Nest writes a string `data` as is).
 */
export function serialiseUpdate(content: string, at: string): string {
  // `content` is the snapshot without `at`, a non-empty JSON object.
  return `{"at":${JSON.stringify(at)},${content.slice(1)}`;
}

/**
 * The live view of the sale for the web page: one poll of the database and
 * Redis every {@link SALE_FEED_INTERVAL_MS} ms, shared by every connected
 * client, running only while at least one is connected. It only reads: it
 * never takes a coupon's lock, so watchers never slow down buyers.
 */
@Injectable()
export class SaleFeed implements BeforeApplicationShutdown {
  /** Replays, so that a client arriving during shutdown is ended at once too. */
  private readonly shutdown = new ReplaySubject<void>(1);
  /** The serialised snapshots, shared by every client. */
  private readonly updates: Observable<string>;
  private clients = 0;
  /** Settles when the response of an open stream has finished or closed. */
  private readonly responses = new Set<Promise<void>>();
  private pollers = 0;

  constructor(private readonly snapshots: SaleSnapshots) {
    this.updates = new Observable<string>((subscriber) => {
      this.pollers += 1;
      let stopped = false;
      let timer: NodeJS.Timeout | undefined;
      let lastKey = '';
      let lastSentAt = 0;
      const tick = async () => {
        const update = await this.snapshot();
        if (stopped) return;
        const { at, ...content } = update;
        // The one serialisation of this snapshot: it is the change check
        // and, with `at` put in front, what every client receives.
        const key = JSON.stringify(content);
        const now = Date.now();
        if (key !== lastKey || now - lastSentAt >= SALE_FEED_HEARTBEAT_MS) {
          lastKey = key;
          lastSentAt = now;
          subscriber.next(serialiseUpdate(key, at));
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
        connector: () => new ReplaySubject<string>(1),
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
        map((data, index): MessageEvent =>
          index === 0 ? { data, retry: SALE_FEED_RETRY_MS } : { data },
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

  /** The sale now (what the next event will carry); an error update when a backend fails. */
  snapshot(): Promise<SaleUpdate> {
    return this.snapshots.read();
  }
}
