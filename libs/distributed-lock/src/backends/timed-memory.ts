/**
 * Remembers strings for a fixed time. Every entry lives equally long and is
 * (re)inserted last, so the map stays in expiry order and forgetting stops
 * at the first live entry: no timers, and O(1) per call on average.
 */
export class TimedMemory {
  private readonly until = new Map<string, number>();

  constructor(private readonly ms: number) {}

  /** How many entries are kept (some may have expired but not been dropped yet). */
  get size(): number {
    return this.until.size;
  }

  /** Remembers `key` from now on, and forgets what has expired. */
  remember(key: string): void {
    const now = Date.now();
    this.forgetExpired(now);
    this.until.delete(key);
    this.until.set(key, now + this.ms);
  }

  /** Whether `key` is remembered and not expired. */
  has(key: string): boolean {
    if (this.until.size === 0) return false;
    this.forgetExpired(Date.now());
    return this.until.has(key);
  }

  /** Forgets `key`; whether it was remembered. */
  delete(key: string): boolean {
    return this.until.delete(key);
  }

  clear(): void {
    this.until.clear();
  }

  private forgetExpired(now: number): void {
    for (const [old, until] of this.until) {
      if (until > now) break;
      this.until.delete(old);
    }
  }
}
