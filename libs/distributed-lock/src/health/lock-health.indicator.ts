import { Inject, Injectable } from '@nestjs/common';
import type {
  LockBackendHealth,
  LockNodeHealth,
  LockStoreKind,
} from '../backends/backend-health.js';
import { answerWithin } from '../backends/answer-deadline.js';
import type { LockBackend } from '../backends/lock-backend.js';
import { monotonicNow } from '../lease/lease-clock.js';
import { checkedMs } from '../lock-service/lock-settings.js';
import { LockService } from '../lock-service/lock.service.js';
import {
  sessionHealthOf,
  type LockSessionHealth,
} from '../session/session-health.js';

/** Options of {@link LockHealthIndicator.isHealthy}. */
export interface LockHealthOptions {
  /**
   * Longest time, in ms, each Redis server may take to answer before the
   * check reports it down. Default: the backend's own limit, the module's
   * `commandTimeout` (2000 ms) on Redis, `nodeTimeoutMs` (200 ms) per node
   * of a quorum.
   */
  readonly timeout?: number;
}

/** What one lock health check reports, under its key. */
export interface LockHealthDetails {
  /** `up` when the store can serve locks and the session is alive. */
  readonly status: 'up' | 'down';
  readonly store: LockStoreKind;
  /**
   * The store answered in time: its server; on a Cluster, every master;
   * on a quorum, a majority of voting nodes.
   */
  readonly reachable: boolean;
  /** The round trip a lock call waits for, in ms (see {@link LockBackendHealth.latencyMs}). */
  readonly latencyMs?: number;
  /**
   * The lock scripts are in the script cache of every server that answered
   * (the check loads those missing). A detail only: a server without them
   * still serves locks, each script being sent again on its first use.
   */
  readonly scriptsLoaded?: boolean;
  /** Quorum only: how many voting nodes make a majority. */
  readonly quorum?: number;
  readonly session: LockSessionHealth;
  /** Each server, with its own reachability, latency and scripts. */
  readonly nodes: readonly LockNodeHealth[];
  /** Why the check is down. */
  readonly message?: string;
}

/**
 * The result of {@link LockHealthIndicator.isHealthy}: the shape of a
 * `@nestjs/terminus` `HealthIndicatorResult`, `{ [key]: { status, ... } }`.
 */
export type LockHealthResult<Key extends string = 'lock'> = Record<
  Key,
  LockHealthDetails
>;

/** Limit of a check on a custom backend without `probe`. */
const customBackendTimeoutMs = 2000;
/** The lock an `isLocked` check on a custom backend looks at. */
const customBackendKey = 'health-check';

/**
 * A `@nestjs/terminus` health indicator for the lock store, provided and
 * exported by `DistributedLockModule`. The library does not depend on
 * terminus: the result is terminus's plain result shape, and a `down`
 * status in it is what fails the check (with 503), so it never throws.
 *
 * Up when the store can serve locks (its Redis, every Cluster master, or a
 * majority of a quorum's nodes answer within the time limit) and the
 * process session is alive. The details say how each server answered, with
 * its round trip and whether the lock scripts are in its cache.
 *
 * ```ts
 * @Get('health')
 * @HealthCheck()
 * check() {
 *   return this.health.check([() => this.lockHealth.isHealthy('lock')]);
 * }
 * ```
 */
@Injectable()
export class LockHealthIndicator {
  constructor(@Inject(LockService) private readonly locks: LockService) {}

  /**
   * Probes the store and reads the session's state. Settles within the
   * time limit, also when a server is frozen or gone.
   *
   * @param key the key the result is reported under. Default `'lock'`.
   * @throws RangeError when `options.timeout` is not a positive number
   */
  async isHealthy<const Key extends string = 'lock'>(
    key: Key = 'lock' as Key,
    options: LockHealthOptions = {},
  ): Promise<LockHealthResult<Key>> {
    const timeoutMs =
      options.timeout === undefined
        ? undefined
        : checkedMs('timeout', options.timeout, false);
    const { backend, session } = this.locks.healthSources;
    const store = await this.probe(backend, timeoutMs);
    const sessionHealth = sessionHealthOf(session);
    const up = store.up && sessionHealth.alive;
    const message = store.up
      ? sessionHealth.alive
        ? undefined
        : `the lock session's renewals are overdue: it lapses in ${sessionHealth.expiresInMs} ms`
      : (store.message ?? 'the lock store did not answer');
    const details: LockHealthDetails = {
      status: up ? 'up' : 'down',
      store: store.store,
      reachable: store.up,
      latencyMs: store.latencyMs,
      scriptsLoaded: store.scriptsLoaded,
      quorum: store.quorum,
      session: sessionHealth,
      nodes: store.nodes,
      message,
    };
    return { [key]: details } as LockHealthResult<Key>;
  }

  private async probe(
    backend: LockBackend,
    timeoutMs: number | undefined,
  ): Promise<LockBackendHealth> {
    if (!backend.probe)
      return this.timeIsLocked(timeoutMs ?? customBackendTimeoutMs);
    try {
      return await backend.probe(timeoutMs);
    } catch (error) {
      return customBackendDown(error);
    }
  }

  /**
   * A backend without `probe` is up when an `isLocked` call answers in time
   * (an answer read after this process's own stall counts).
   */
  private async timeIsLocked(timeoutMs: number): Promise<LockBackendHealth> {
    const startedAt = monotonicNow();
    try {
      await answerWithin(this.locks.isLocked(customBackendKey), timeoutMs);
      const latencyMs = Math.round((monotonicNow() - startedAt) * 10) / 10;
      return { up: true, store: 'custom', latencyMs, nodes: [] };
    } catch (error) {
      return customBackendDown(error);
    }
  }
}

/** A backend of the user's whose probe or `isLocked` failed with `error`. */
function customBackendDown(error: unknown): LockBackendHealth {
  const message = error instanceof Error ? error.message : String(error);
  return { up: false, store: 'custom', nodes: [], message };
}
