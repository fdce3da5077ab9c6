/**
 * One contract suite for every {@link LockBackend}: the same tests run
 * unchanged against each backend, so adding a backend means adding one small
 * factory file (see `memory.contract.spec.ts`, `redis.contract.redis.spec.ts`)
 * that calls {@link describeBackendContract}.
 *
 * A factory opens "processes": each its own backend instance with its own
 * connections, all against one shared store, as separate OS processes of an
 * application would be. The suite wraps each in its own `LockService` (what
 * users see) and tests mostly through it, and through the `LockBackend`
 * interface where the contract is the backend's own.
 *
 * What a backend cannot do is declared in its {@link BackendCapabilities}, and
 * the tests that need it are registered as skipped, never silently left out.
 * A test a backend fails for a known bug is listed in its factory's
 * `knownBugs` and runs as `it.fails`.
 */
import { randomBytes } from 'node:crypto';
import type { LockBackend } from '../../src/backends/lock-backend.js';
import type { LockLostEvent } from '../../src/lock-service/lock-events.js';
import { LockService } from '../../src/lock-service/lock.service.js';
import { acquireContract } from './acquire.contract.js';
import { keyPrefix, maxKeyLength } from './contract-support.js';
import { errorsContract } from './errors.contract.js';
import { extendContract } from './extend.contract.js';
import { fenceContract } from './fence.contract.js';
import { fenceWithGrantContract } from './fence-with-grant.contract.js';
import { lostContract } from './lost.contract.js';
import { multiKeyContract } from './multi-key.contract.js';
import { releaseContract } from './release.contract.js';
import { sessionsContract } from './sessions.contract.js';
import { waitingContract } from './waiting.contract.js';

/** What a backend can do or be made to do; tests that need more are skipped. */
export interface BackendCapabilities {
  /**
   * `'strict'`: waiters from several processes are served in arrival order
   * (given {@link ProcessOptions.localHandoffs} 0 where the backend has that
   * option). `'approximate'`: every waiter is served, in roughly that order.
   */
  readonly fifo: 'strict' | 'approximate';
  /** {@link ContractBackendFactory.cutOff} can make the store unreachable. */
  readonly unreachable: boolean;
  /**
   * Every "process" is the same backend instance (the store lives in it), so
   * closing one process closes the store for all of them.
   */
  readonly sharedInstance: boolean;
  /**
   * The backend keeps process sessions (`LockBackend.sessions`); without
   * them the sessions tests are skipped.
   */
  readonly sessions: boolean;
}

/** Backend settings a test may ask for; a backend ignores what it does not have. */
export interface ProcessOptions {
  /**
   * How often a release may go to a waiter in the releasing process ahead of
   * an older waiter elsewhere (the Redis backend's `localHandoffs`); 0 is
   * strictly first come, first served. Unset: the backend's default.
   */
  readonly localHandoffs?: number;
}

/** Backends opened by a factory: one per process, on one shared store. */
export interface OpenedBackends {
  readonly backends: readonly LockBackend[];
  /** Closes every backend and what it owns (connections). Idempotent. */
  close(): Promise<void>;
}

/** What a backend's contract spec file provides. */
export interface ContractBackendFactory {
  readonly capabilities: BackendCapabilities;
  /** Before the suite: starts what the store needs (a server). */
  setUp?(): Promise<void>;
  /** After the suite. */
  tearDown?(): Promise<void>;
  /**
   * Opens `count` processes on the shared store, each its own backend
   * instance with its own connections (unless `sharedInstance`). A test may
   * call it more than once; all of them share the store.
   */
  open(count: number, options?: ProcessOptions): Promise<OpenedBackends>;
  /** After each test, once its processes are closed: forget the test's store state. */
  reset?(): Promise<void>;
  /**
   * Makes the store unreachable for every open process and resolves a
   * function that makes it reachable again (its data may be gone). Needed
   * when `capabilities.unreachable`.
   */
  cutOff?(): Promise<() => Promise<void>>;
  /**
   * Titles of contract tests this backend fails for a known bug, each with
   * what goes wrong: they run as `it.fails`, so a fix shows up as a failure
   * asking to remove the entry. A title no test has is an error.
   */
  readonly knownBugs?: Readonly<Record<string, string>>;
}

/** Settings of the `LockService` of each process. */
export interface ServiceOptions {
  /** Default 3000 ms. */
  readonly watchdogLeaseTime?: number;
  /**
   * TTL of the service's process session: holds without a `leaseTime` are
   * bound to it (when the backend keeps sessions). Default: no session.
   */
  readonly sessionTtl?: number;
}

/** One "process": its backend, the `LockService` over it, and its `lost` events. */
export interface ContractProcess {
  readonly backend: LockBackend;
  readonly locks: LockService;
  readonly lost: readonly LockLostEvent[];
}

/** A contract test's body. */
export type ContractTest = () => Promise<void>;

/** What each themed contract module gets. */
export interface ContractContext {
  readonly capabilities: BackendCapabilities;
  /** Registers a test: `it`, or `it.fails` when the factory lists it in `knownBugs`. */
  test(title: string, fn: ContractTest): void;
  /** {@link test} when `runs`, else registered as skipped (never silently left out). */
  testIf(runs: boolean, title: string, fn: ContractTest): void;
  /** Opens `count` processes, closed after the test. */
  processes(
    count: number,
    options?: ProcessOptions & ServiceOptions,
  ): Promise<ContractProcess[]>;
  /** A lock name (without prefix) no other test uses. */
  key(label?: string): string;
  /** The key as the services store it, for calls on the backend itself. */
  storeKey(name: string): string;
  /** A fresh owner token, as the service makes them (128 random bits). */
  token(): string;
  /** See {@link ContractBackendFactory.cutOff}; restored after the test if the test did not. */
  cutOff(): Promise<() => Promise<void>>;
}

/** Registers the whole contract for `factory` under `describe(name)`. */
export function describeBackendContract(
  name: string,
  factory: ContractBackendFactory,
): void {
  describe(`${name}: LockBackend contract`, () => {
    const titles = new Set<string>();
    const ctx = useContractContext(factory, titles);
    // Titles are known once the themes' describe blocks were collected.
    beforeAll(() => {
      const unknown = Object.keys(factory.knownBugs ?? {}).filter(
        (title) => !titles.has(title),
      );
      if (unknown.length > 0)
        throw new Error(
          `knownBugs names no contract test: ${unknown.join('; ')}`,
        );
    });
    describe('acquire & try-once', () => acquireContract(ctx));
    describe('waiting, wake-up & hand-off order', () => waitingContract(ctx));
    describe('release', () => releaseContract(ctx));
    describe('extend', () => extendContract(ctx));
    describe('lost', () => lostContract(ctx));
    describe('fence', () => fenceContract(ctx));
    describe('fence with the grant', () => fenceWithGrantContract(ctx));
    describe('multi-key', () => multiKeyContract(ctx));
    describe('errors', () => errorsContract(ctx));
    describe('sessions', () => sessionsContract(ctx));
  });
}

let keySequence = 0;

function useContractContext(
  factory: ContractBackendFactory,
  titles: Set<string>,
): ContractContext {
  const opened: OpenedBackends[] = [];
  const services: LockService[] = [];
  let restore: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    await factory.setUp?.();
  });
  afterEach(async () => {
    const pendingRestore = restore;
    restore = undefined;
    await pendingRestore?.();
    await Promise.all(services.splice(0).map((s) => s.close()));
    await Promise.all(opened.splice(0).map((o) => o.close()));
    await factory.reset?.();
  });
  afterAll(async () => {
    await factory.tearDown?.();
  });

  const register = (title: string, fn: ContractTest, runs: boolean) => {
    if (titles.has(title)) throw new Error(`two contract tests: ${title}`);
    titles.add(title);
    if (!runs) it.skip(title, fn);
    else if (factory.knownBugs?.[title] !== undefined) it.fails(title, fn);
    else it(title, fn);
  };

  return {
    capabilities: factory.capabilities,
    test: (title, fn) => register(title, fn, true),
    testIf: (runs, title, fn) => register(title, fn, runs),
    async processes(count, options = {}) {
      const set = await factory.open(count, options);
      opened.push(set);
      return set.backends.map((backend) => {
        const locks = new LockService({
          backend,
          keyPrefix,
          watchdogLeaseTime: options.watchdogLeaseTime ?? 3000,
          sessionTtl: options.sessionTtl,
          waitTime: 2000,
          maxKeyLength,
        });
        services.push(locks);
        const lost: LockLostEvent[] = [];
        locks.events.on('lost', (event) => lost.push(event));
        return { backend, locks, lost };
      });
    },
    key(label = 'k') {
      keySequence += 1;
      return `${label}-${process.pid}-${keySequence}-${randomBytes(3).toString('hex')}`;
    },
    storeKey(name) {
      return `${keyPrefix}{${name}}`;
    },
    token() {
      return randomBytes(16).toString('base64url');
    },
    async cutOff() {
      if (!factory.cutOff)
        throw new Error('this factory cannot make its store unreachable');
      const back = await factory.cutOff();
      let done: Promise<void> | undefined;
      const once = () => (done ??= back());
      restore = once;
      return once;
    },
  };
}
