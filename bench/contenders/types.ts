/** A lock held by a contender; release it exactly once. */
export interface HeldLock {
  release(): Promise<void>;
}

export interface AcquireOptions {
  /** Lease (TTL) in ms, for contenders that take one. */
  readonly ttlMs: number;
  /** Aborting it makes a waiting acquisition give up (where the contender supports it). */
  readonly signal?: AbortSignal;
  /** Permits the semaphore has in all (I's semaphore contenders take one of them; locks ignore it). */
  readonly limit?: number;
  /** J: a read (shared) or write (exclusive) hold of a read-write lock; mutex contenders ignore it. */
  readonly mode?: 'read' | 'write';
}

/** One process's handle on a lock implementation: its clients, its lock objects. */
export interface ContenderInstance {
  /**
   * Acquires `key`, waiting as the implementation does (its own retries,
   * queue, or polling). Rejects when it gives up (retries exhausted, timeout).
   */
  acquire(key: string, options: AcquireOptions): Promise<HeldLock>;
  /** Closes every connection and timer this instance opened. */
  close(): Promise<void>;
}

/** What a contender needs to start: Redis URLs (one, or several for quorum modes). */
export interface ContenderContext {
  readonly urls: readonly string[];
}

/** Opens one instance of a contender. */
export type OpenContender = (
  context: ContenderContext,
) => Promise<ContenderInstance>;

/** What a contender module exports: the openers of its contenders, by id. */
export interface ContenderModule {
  readonly openers: Readonly<Record<string, OpenContender>>;
}

/**
 * A contender as the registry describes it. Its code is in a module of its
 * own, imported only when a process opens it: a worker that runs the raw
 * baseline never loads Nest, reflect-metadata or the library.
 */
export interface Contender {
  /** Stable id, used on the command line of workers and in the JSON. */
  readonly id: string;
  /** Row label in the report. */
  readonly label: string;
  /** Package and version, e.g. `redlock 4.2.0 on ioredis 4.31.0`. */
  readonly detail: string;
  readonly kind: 'baseline' | 'ours' | 'peer';
  /** The package it runs (for the report; every contender has worker processes of its own). */
  readonly library: string;
  /**
   * Another contender whose cost this one adds to (the fenced cycle: the
   * unfenced one): A and B run the two in the same turns and report the
   * ratio between them.
   */
  readonly comparedWith?: string;
  /** Imports the module that implements it. */
  readonly load: () => Promise<ContenderModule>;
}
