import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { PurchaseTracker } from '../metrics/purchase-tracker.js';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis-client.js';
import {
  INSTANCES_KEY,
  PUBLISH_INTERVAL_MS,
  forgottenInstances,
  instanceViews,
  thisInstance,
  type InstanceFigures,
  type InstanceView,
} from './instance-figures.js';

/** Forgotten entries are looked for every this many publications. */
const PRUNE_EVERY = 20;

/**
 * Every instance writes its purchase figures into one Redis hash every
 * {@link PUBLISH_INTERVAL_MS} ms, so that the page of any instance shows
 * all of them. A killed instance stops writing and is shown as gone; one
 * that shuts down cleanly removes its entry.
 */
@Injectable()
export class InstanceRegistry
  implements OnApplicationBootstrap, BeforeApplicationShutdown
{
  private readonly logger = new Logger('InstanceRegistry');
  private readonly identity = thisInstance();
  private timer?: NodeJS.Timeout;
  private publications = 0;
  private lastError = '';
  private stopped = false;

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly tracker: PurchaseTracker,
  ) {}

  get id(): string {
    return this.identity.id;
  }

  onApplicationBootstrap(): void {
    const tick = async () => {
      await this.publish();
      if (!this.stopped) {
        this.timer = setTimeout(() => void tick(), PUBLISH_INTERVAL_MS);
        this.timer.unref();
      }
    };
    void tick();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.redis.hdel(INSTANCES_KEY, this.id).catch(() => undefined);
  }

  /** Writes this instance's figures now. */
  async publish(): Promise<void> {
    try {
      const figures: InstanceFigures = {
        ...this.identity,
        ...(await this.tracker.figures()),
        at: Date.now(),
      };
      // A publication that started before shutdown must not re-add the entry.
      if (this.stopped) return;
      await this.redis.hset(INSTANCES_KEY, this.id, JSON.stringify(figures));
      this.publications += 1;
      if (this.publications % PRUNE_EVERY === 1) await this.prune();
      this.lastError = '';
    } catch (error) {
      const cause = (error as Error).message ?? String(error);
      if (cause !== this.lastError) {
        this.logger.warn(`Cannot publish this instance's figures: ${cause}`);
        this.lastError = cause;
      }
    }
  }

  /** Every instance listed in Redis (this one included), alive or recently gone. */
  async read(): Promise<InstanceView[]> {
    const raw = await this.redis.hgetall(INSTANCES_KEY);
    return instanceViews(raw, this.id, Date.now());
  }

  private async prune(): Promise<void> {
    const raw = await this.redis.hgetall(INSTANCES_KEY);
    const gone = forgottenInstances(raw, Date.now());
    if (gone.length > 0) await this.redis.hdel(INSTANCES_KEY, ...gone);
  }
}
