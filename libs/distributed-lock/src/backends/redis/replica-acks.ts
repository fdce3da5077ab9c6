import type { Redis } from 'ioredis';
import { LockBackendError } from '../../errors/lock-errors.js';
import type { AcquireRequest, LockBusy, LockGrant } from '../lock-backend.js';
import type { LockContext } from './lock-context.js';
import { defineLockScripts, type LockScriptCommands } from './lock-scripts.js';
import type { ReplicaAcks } from './redis-lock-options.js';

const defaultTimeoutMs = 1000;

/**
 * Holds a grant back until enough replicas have it. `WAIT` counts the
 * replicas that acknowledged every write its connection made so far, and
 * blocks that connection meanwhile: so it runs on a connection of its own,
 * which first writes the lease again (an EXTEND of the holder's own; a lock
 * handed over from the queue was written by the releaser's connection
 * anyway), then waits. A grant that is not replicated in time is released.
 */
export class ReplicaAckCheck {
  private readonly replicas: number;
  private readonly timeoutMs: number;
  private readonly connection: Redis;
  private readonly scripts: LockScriptCommands;

  constructor(
    private readonly c: LockContext,
    acks: ReplicaAcks,
    private readonly release: (key: string, token: string) => Promise<boolean>,
  ) {
    const timeoutMs = acks.timeoutMs ?? defaultTimeoutMs;
    if (!Number.isSafeInteger(acks.replicas) || acks.replicas < 1)
      throw new RangeError(
        `replicaAcks.replicas must be a positive integer, got ${acks.replicas}`,
      );
    // WAIT 0 would block forever.
    if (!(timeoutMs >= 1) || !(timeoutMs < c.settings.commandTimeoutMs))
      throw new RangeError(
        `replicaAcks.timeoutMs must be at least 1 and below the command timeout (${c.settings.commandTimeoutMs} ms), got ${timeoutMs}`,
      );
    if (c.client.isCluster)
      throw new RangeError(
        'replicaAcks needs one Redis server with replicas, not a Cluster',
      );
    this.replicas = acks.replicas;
    this.timeoutMs = Math.ceil(timeoutMs);
    this.connection = (c.client as Redis).duplicate();
    this.connection.on('error', () => undefined);
    this.scripts = defineLockScripts(this.connection);
  }

  /** Resolves `grant` once replicated; rejects, having released it, if it is not in time. */
  async confirm(
    request: AcquireRequest,
    grant: LockGrant | LockBusy,
  ): Promise<LockGrant | LockBusy> {
    if (!grant.acquired) return grant;
    const { key, token } = request;
    // A lock passed on in memory stays stored under its first holder's token.
    const storedAs = this.c.holds.of(key, token)?.storedAs ?? token;
    let acked = 0;
    try {
      const extended = await this.c.calls.call(
        this.scripts.lockExtend(key, storedAs, Math.ceil(request.leaseMs)),
        'replica wait',
      );
      if (Number(extended) === 1) {
        const reply = await this.c.calls.call(
          this.connection.call('WAIT', this.replicas, this.timeoutMs),
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

  close(): void {
    this.connection.disconnect();
  }
}
