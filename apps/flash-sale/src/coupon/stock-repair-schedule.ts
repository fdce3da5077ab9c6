import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { CouponRepository } from './coupon.repository.js';
import { StockReconciler } from './stock-reconciler.js';

/**
 * Longest wait of the startup rebuild for a coupon's lock (and no longer than
 * a purchase waits, SECKILL_WAIT_MS). A purchase holds it for milliseconds; a
 * lock still busy after this is stuck (its holder died with a lease, or
 * froze), and the coupon is left to its first purchase or the next periodic
 * pass rather than holding up the start.
 */
const MAX_STARTUP_LOCK_WAIT_MS = 5_000;
/** How long a periodic pass waits for each coupon's lock before skipping it until the next pass. */
const PASS_LOCK_WAIT_MS = 100;
/** Longest periodic pass: at most half the interval, and never more than this. */
const MAX_PASS_MS = 10_000;

/**
 * When the reconciler runs on its own: at startup it rebuilds every coupon
 * that is or will be on sale (so a restart, even after Redis lost its data,
 * neither resells nor lets a user buy twice), then every
 * STOCK_REPAIR_INTERVAL_MS it checks them and repairs what differs (a ghost
 * left by an instance that died between seckill.lua and its commit, a count
 * changed by hand) without a restart. Errors are logged, never thrown: a
 * coupon that could not be handled is marked suspect, so that its next
 * purchase reconciles it first.
 */
@Injectable()
export class StockRepairSchedule
  implements OnApplicationBootstrap, OnModuleDestroy
{
  private readonly logger = new Logger('StockRepair');
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly coupons: CouponRepository,
    private readonly reconciler: StockReconciler,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.rebuildAll();
    // Without the lock a pass would race with purchases it cannot exclude.
    if (this.config.stockRepairInterval > 0 && this.config.seckill.lock) {
      this.schedule();
    }
  }

  // Before the runtime closes Redis and the database (onApplicationShutdown).
  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One periodic pass now (also what the timer runs). Resolves when it is over. */
  runPass(): Promise<void> {
    this.running ??= this.checkAll().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.runPass().finally(() => this.schedule());
    }, this.config.stockRepairInterval);
    this.timer.unref();
  }

  private async rebuildAll(): Promise<void> {
    const lockWait = Math.min(
      MAX_STARTUP_LOCK_WAIT_MS,
      this.config.seckill.waitTime,
    );
    let loaded = 0;
    for (const coupon of await this.sellable()) {
      try {
        await this.reconciler.reconcile(coupon, lockWait);
        loaded++;
      } catch (error) {
        this.reconciler.markSuspect(coupon.id);
        this.logger.warn(
          `Could not load coupon ${coupon.id} into Redis at startup (${describe(error)}); ` +
            'its next purchase or the next periodic check does',
        );
      }
    }
    if (loaded > 0) {
      this.logger.log(
        `Loaded the stock and buyers of ${loaded} coupon(s) from the database into Redis`,
      );
    }
  }

  private async checkAll(): Promise<void> {
    const deadline =
      Date.now() + Math.min(this.config.stockRepairInterval / 2, MAX_PASS_MS);
    for (const coupon of await this.sellable()) {
      if (this.stopped) return;
      if (Date.now() >= deadline) {
        this.logger.debug(
          'Periodic check out of time; the rest waits for the next pass',
        );
        return;
      }
      try {
        await this.reconciler.check(coupon, PASS_LOCK_WAIT_MS);
      } catch (error) {
        this.reconciler.markSuspect(coupon.id);
        this.logger.warn(
          `Periodic check of coupon ${coupon.id} failed: ${describe(error)}`,
        );
      }
    }
  }

  /** Coupons that are or will be on sale; none (logged) when the database does not answer. */
  private async sellable() {
    try {
      return await this.coupons.listSellable(new Date());
    } catch (error) {
      this.logger.warn(
        `Could not list the coupons on sale: ${describe(error)}`,
      );
      return [];
    }
  }
}

function describe(error: unknown): string {
  return error instanceof Error
    ? `${error.name}: ${error.message}`
    : String(error);
}
