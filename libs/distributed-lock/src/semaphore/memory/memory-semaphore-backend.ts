import { LockBackendError } from '../../errors/lock-errors.js';
import type {
  SemaphoreBackend,
  SemaphoreBusy,
  SemaphoreGrant,
  SemaphoreRequest,
} from '../semaphore-backend.js';
import { SemaphoreLimitMismatchError } from '../semaphore-errors.js';

interface Holder {
  readonly permits: number;
  expiresAt: number;
  timer: NodeJS.Timeout;
}

interface Waiter {
  readonly request: SemaphoreRequest;
  /** When acquire was called: the grant's lease counts from then. */
  readonly startedAt: number;
  readonly settle: (outcome: SemaphoreGrant | SemaphoreBusy) => void;
}

interface Semaphore {
  readonly limit: number;
  readonly holders: Map<string, Holder>;
  readonly queue: Waiter[];
}

/**
 * Semaphores in this process only, with the Redis backend's semantics (one
 * limit per semaphore while in use, FIFO queue whose head holds back later
 * requests, leases that expire): for tests and single-instance apps. Freed
 * permits go straight to the head of the queue.
 */
export class MemorySemaphoreBackend implements SemaphoreBackend {
  private readonly semaphores = new Map<string, Semaphore>();
  /** Last fencing token issued per key; outlives the semaphores (idle ones too). */
  private readonly fences = new Map<string, number>();
  private closed = false;

  acquire(request: SemaphoreRequest): Promise<SemaphoreGrant | SemaphoreBusy> {
    if (this.closed) return Promise.reject(closedError());
    const startedAt = performance.now();
    const semaphore = this.semaphores.get(request.key) ?? {
      limit: request.limit,
      holders: new Map<string, Holder>(),
      queue: [],
    };
    if (semaphore.limit !== request.limit)
      return Promise.reject(
        new SemaphoreLimitMismatchError(
          request.name,
          request.limit,
          semaphore.limit,
        ),
      );
    this.semaphores.set(request.key, semaphore);
    if (semaphore.queue.length === 0 && this.fits(semaphore, request))
      return Promise.resolve(this.grant(semaphore, request, startedAt));
    if (request.waitMs <= 0 || request.signal?.aborted) {
      this.forgetIfIdle(request.key, semaphore);
      return Promise.resolve(this.busy(semaphore));
    }
    return new Promise((resolve) => {
      const { signal } = request;
      const giveUp = () => {
        const at = semaphore.queue.indexOf(waiter);
        if (at < 0) return;
        semaphore.queue.splice(at, 1);
        waiter.settle(this.busy(semaphore));
        // The head left: the next one may fit now.
        if (at === 0) this.serve(request.key, semaphore);
      };
      const timer = setTimeout(giveUp, request.waitMs);
      signal?.addEventListener('abort', giveUp, { once: true });
      const waiter: Waiter = {
        request,
        startedAt,
        settle: (outcome) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', giveUp);
          resolve(outcome);
        },
      };
      semaphore.queue.push(waiter);
    });
  }

  async extend(key: string, token: string, leaseMs: number): Promise<boolean> {
    if (this.closed) throw closedError();
    const semaphore = this.semaphores.get(key);
    const holder = semaphore?.holders.get(token);
    if (!semaphore || !holder) return false;
    clearTimeout(holder.timer);
    holder.expiresAt = performance.now() + leaseMs;
    holder.timer = this.expiry(key, semaphore, token, leaseMs);
    return true;
  }

  async release(key: string, token: string): Promise<boolean> {
    const semaphore = this.semaphores.get(key);
    const holder = semaphore?.holders.get(token);
    if (!semaphore || !holder) return false;
    clearTimeout(holder.timer);
    semaphore.holders.delete(token);
    this.serve(key, semaphore);
    return true;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const semaphore of this.semaphores.values()) {
      for (const holder of semaphore.holders.values())
        clearTimeout(holder.timer);
      for (const waiter of semaphore.queue.splice(0))
        waiter.settle({ acquired: false });
    }
    this.semaphores.clear();
  }

  private fits(semaphore: Semaphore, request: SemaphoreRequest): boolean {
    let used = 0;
    for (const holder of semaphore.holders.values()) used += holder.permits;
    return used + request.permits <= semaphore.limit;
  }

  private grant(
    semaphore: Semaphore,
    request: SemaphoreRequest,
    startedAt: number,
  ): SemaphoreGrant {
    const { key, token, permits, leaseMs } = request;
    const waited = performance.now() - startedAt;
    semaphore.holders.set(token, {
      permits,
      expiresAt: performance.now() + leaseMs,
      timer: this.expiry(key, semaphore, token, leaseMs),
    });
    if (!request.fence) return { acquired: true, leaseMs: leaseMs + waited };
    const fencingToken = (this.fences.get(key) ?? 0) + 1;
    this.fences.set(key, fencingToken);
    return { acquired: true, leaseMs: leaseMs + waited, fencingToken };
  }

  private expiry(
    key: string,
    semaphore: Semaphore,
    token: string,
    leaseMs: number,
  ): NodeJS.Timeout {
    const timer = setTimeout(() => {
      semaphore.holders.delete(token);
      this.serve(key, semaphore);
    }, leaseMs);
    timer.unref();
    return timer;
  }

  /** Grants the head of the queue while it fits, in order. */
  private serve(key: string, semaphore: Semaphore): void {
    while (semaphore.queue.length > 0) {
      const head = semaphore.queue[0];
      if (!this.fits(semaphore, head.request)) break;
      semaphore.queue.shift();
      head.settle(this.grant(semaphore, head.request, head.startedAt));
    }
    this.forgetIfIdle(key, semaphore);
  }

  /** An idle semaphore is forgotten, its limit with it (as on Redis). */
  private forgetIfIdle(key: string, semaphore: Semaphore): void {
    if (semaphore.holders.size === 0 && semaphore.queue.length === 0)
      this.semaphores.delete(key);
  }

  private busy(semaphore: Semaphore): SemaphoreBusy {
    let earliest = Infinity;
    for (const holder of semaphore.holders.values())
      earliest = Math.min(earliest, holder.expiresAt);
    return Number.isFinite(earliest)
      ? {
          acquired: false,
          retryAfterMs: Math.max(0, earliest - performance.now()),
        }
      : { acquired: false };
  }
}

function closedError(): LockBackendError {
  return new LockBackendError('The semaphore backend is closed');
}
