import { LockBackendError } from '../../errors/lock-errors.js';
import type { AcquireRequest, LockBusy, LockGrant } from '../lock-backend.js';
import type { LockContext } from './lock-context.js';
import type { ReplicaAcks } from './redis-lock-options.js';

const defaultTimeoutMs = 1000;

/**
 * Holds a grant back until enough replicas have it. `WAIT` counts the
 * replicas that acknowledged every write this connection made so far; a lock
 * handed over from the queue was written by the releaser's connection, so the
 * lease is first written again here (an EXTEND of the holder's own), and then
 * waited for. A grant that is not replicated in time is released.
 */
export class ReplicaAckCheck {
  private readonly replicas: number;
  private readonly timeoutMs: number;

  constructor(
    private readonly c: LockContext,
    acks: ReplicaAcks,
    private readonly extend: (
      key: string,
      token: string,
      leaseMs: number,
    ) => Promise<boolean>,
    private readonly release: (key: string, token: string) => Promise<boolean>,
  ) {
    if (!Number.isSafeInteger(acks.replicas) || acks.replicas < 1)
      throw new RangeError(
        `replicaAcks.replicas must be a positive integer, got ${acks.replicas}`,
      );
    if (c.client.isCluster)
      throw new RangeError(
        'replicaAcks needs one Redis server with replicas, not a Cluster',
      );
    this.replicas = acks.replicas;
    this.timeoutMs = acks.timeoutMs ?? defaultTimeoutMs;
  }

  /** Resolves `grant` once replicated; rejects, having released it, if it is not in time. */
  async confirm(
    request: AcquireRequest,
    grant: LockGrant | LockBusy,
  ): Promise<LockGrant | LockBusy> {
    if (!grant.acquired) return grant;
    const { key, token } = request;
    let acked = 0;
    try {
      if (await this.extend(key, token, request.leaseMs)) {
        const reply = await this.c.calls.call(
          this.c.client.call('WAIT', this.replicas, this.timeoutMs),
          'replica wait',
        );
        acked = Number(reply);
      }
    } catch (error) {
      await this.release(key, token).catch(() => false);
      throw error;
    }
    if (acked >= this.replicas) return grant;
    await this.release(key, token).catch(() => false);
    throw new LockBackendError(
      `Lock "${key}" reached ${acked} of ${this.replicas} replicas within ${this.timeoutMs} ms; released`,
    );
  }
}
