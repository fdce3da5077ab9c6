// Minimal typings for the two peer packages that ship none (only what the
// benchmark calls).

declare module 'ioredis4' {
  namespace IORedis {
    interface Redis {
      connect(): Promise<void>;
      quit(): Promise<unknown>;
      disconnect(): void;
      on(event: string, listener: (...args: unknown[]) => void): this;
    }
  }
  interface IORedisConstructor {
    new (url: string, options?: Record<string, unknown>): IORedis.Redis;
  }
  const IORedis: IORedisConstructor;
  export default IORedis;
}

declare module 'redlock4' {
  interface Redlock4Options {
    driftFactor?: number;
    retryCount?: number;
    retryDelay?: number;
    retryJitter?: number;
  }
  interface Redlock4Lock {
    unlock(): Promise<void>;
  }
  class Redlock4 {
    constructor(clients: readonly unknown[], options?: Redlock4Options);
    lock(resource: string, ttl: number): Promise<Redlock4Lock>;
    on(event: string, listener: (...args: unknown[]) => void): this;
  }
  export default Redlock4;
}

// redlock 5.0.0-beta.2 ships types, but its package.json "exports" hides them
// from NodeNext resolution.
declare module 'redlock5' {
  interface Redlock5Settings {
    driftFactor?: number;
    retryCount?: number;
    retryDelay?: number;
    retryJitter?: number;
    automaticExtensionThreshold?: number;
  }
  interface Redlock5Lock {
    release(): Promise<unknown>;
  }
  class Redlock5 {
    constructor(clients: Iterable<unknown>, settings?: Redlock5Settings);
    acquire(resources: string[], duration: number): Promise<Redlock5Lock>;
    on(event: string, listener: (...args: unknown[]) => void): this;
  }
  export default Redlock5;
}
