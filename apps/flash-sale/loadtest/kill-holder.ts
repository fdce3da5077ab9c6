import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { couponLockKey } from '../src/coupon/stock-reconciler.js';
import type { CrashContext, CrashScenario, SentRequest } from './drive-load.js';
import { restartKilled } from './instance-crash.js';
import type { AppInstance } from './instances.js';
import {
  holderKillReport,
  type HolderKillReport,
} from './kill-holder-report.js';
import type { CrashReport } from './load-test-report.js';

const MAX_TRIES = 200;
// Commands the instance wrote before it froze may still be on their way:
// Redis runs them first, so that the holder read afterwards is final.
const SETTLE_MS = 25;
const WATCH_POLL_MS = 10;
const WATCH_MAX_MS = 120_000;

interface Caught {
  readonly victim: AppInstance;
  readonly session: string;
  readonly token: string;
  readonly killedAtMs: number;
  readonly killedAt: Date;
}

/**
 * `killHolder`: when request `atRequest` is sent, SIGKILL an instance while
 * it holds the coupon's lock. The holder's token starts with its instance's
 * lock session id, which every instance's /health names; the instance is
 * frozen (SIGSTOP) and, if Redis still shows its session holding the lock,
 * killed; else thawed and tried again shortly, up to {@link MAX_TRIES} times.
 * It is restarted (to reconcile the coupon) once the lock left its session.
 * Redis is read every 10 ms from the kill to the end of the load, to see
 * how long the lock stayed with the dead session.
 */
export class LockHolderKill implements CrashScenario {
  readonly lockKey: string;
  private tries = 0;
  private caught?: Caught;
  private lockFreedAtMs?: number;
  private deadSessionLastHeldAtMs?: number;

  constructor(
    private readonly instances: readonly AppInstance[],
    private readonly redisUrl: string,
    couponId: number,
    readonly atRequest: number,
    private readonly restartDelayMs: number,
    private readonly event: (message: string) => void,
  ) {
    this.lockKey = `lock:{${couponLockKey(couponId)}}`;
  }

  async run(context: CrashContext): Promise<CrashReport | undefined> {
    const redis = new Redis(this.redisUrl, {
      maxRetriesPerRequest: 2,
      commandTimeout: 2_000,
    });
    redis.on('error', () => undefined);
    let loadDone = false;
    void context.loadDone.then(() => {
      loadDone = true;
    });
    const isLoadDone = () => loadDone;
    try {
      context.note('looking for the lock holder');
      this.event(
        `Looking for the instance holding ${this.lockKey}: freeze it, check, kill (up to ${MAX_TRIES} tries)`,
      );
      const caught = await this.catchHolder(redis, context, isLoadDone);
      if (!caught) {
        this.event(
          `No instance was caught holding ${this.lockKey} in ${this.tries} tries; nothing killed`,
        );
        return undefined;
      }
      const { victim } = caught;
      context.note(`instance ${victim.index + 1} killed holding the lock`);
      this.event(
        `SIGKILL instance ${victim.index + 1} (port ${victim.port}) at request ${this.atRequest}, ` +
          `while it held ${this.lockKey} as ${caught.token} (try ${this.tries})`,
      );
      let onFreed: (() => void) | undefined;
      const freed = new Promise<void>((resolve) => {
        onFreed = resolve;
      });
      const watching = this.watchDeadSession(redis, caught, context, {
        loadDone: isLoadDone,
        freed: () => onFreed?.(),
      });
      await Promise.race([freed, watching]);
      await sleep(
        Math.max(
          0,
          caught.killedAtMs + this.restartDelayMs - context.sinceStart(),
        ),
      );
      const crash = await restartKilled(
        victim,
        {
          instance: victim.index,
          port: victim.port,
          atRequest: this.atRequest,
          killedAtMs: caught.killedAtMs,
        },
        context,
        this.event,
      );
      await watching;
      return crash;
    } finally {
      redis.disconnect();
    }
  }

  /** The report, once the load is over and `records` are all its requests. */
  report(records: readonly SentRequest[]): HolderKillReport {
    const { caught } = this;
    return holderKillReport(
      {
        lockKey: this.lockKey,
        tries: this.tries,
        caught: caught && {
          instance: caught.victim.index,
          session: caught.session,
          token: caught.token,
          killedAtMs: caught.killedAtMs,
          killedAt: caught.killedAt,
        },
        lockFreedAtMs: this.lockFreedAtMs,
        deadSessionLastHeldAtMs: this.deadSessionLastHeldAtMs,
      },
      records,
    );
  }

  private async catchHolder(
    redis: Redis,
    context: CrashContext,
    loadDone: () => boolean,
  ): Promise<Caught | undefined> {
    let sessions = new Map<string, AppInstance>();
    while (this.tries < MAX_TRIES && !loadDone()) {
      this.tries += 1;
      const token = await redis.get(this.lockKey);
      if (token !== null && holderIn(sessions, token) === undefined)
        sessions = await lockSessions(this.instances);
      const holder = token === null ? undefined : holderIn(sessions, token);
      if (holder) {
        const [session, victim] = holder;
        const caught = await this.killIfHolding(
          redis,
          context,
          victim,
          session,
        );
        if (caught) return (this.caught = caught);
      }
      await sleep(10 + Math.random() * 30);
    }
    return undefined;
  }

  /** Freezes `victim`; kills it if its session holds the lock, else thaws it. */
  private async killIfHolding(
    redis: Redis,
    context: CrashContext,
    victim: AppInstance,
    session: string,
  ): Promise<Caught | undefined> {
    let killed = false;
    try {
      await victim.pause();
      await sleep(SETTLE_MS);
      const token = await redis.get(this.lockKey);
      if (token === null || !token.startsWith(`${session}.`)) return undefined;
      const killedAtMs = context.sinceStart();
      const killedAt = new Date();
      killed = true;
      await victim.kill();
      return { victim, session, token, killedAtMs, killedAt };
    } finally {
      if (!killed) victim.resume();
    }
  }

  /**
   * Reads the lock's holder until the load is done: when the dead session
   * first no longer held it, and when it last did.
   */
  private async watchDeadSession(
    redis: Redis,
    caught: Caught,
    context: CrashContext,
    on: { loadDone(): boolean; freed(): void },
  ): Promise<void> {
    const endAt = performance.now() + WATCH_MAX_MS;
    const ofDead = `${caught.session}.`;
    while (!on.loadDone() && performance.now() < endAt) {
      const token = await redis.get(this.lockKey).catch(() => undefined);
      const at = context.sinceStart();
      if (token?.startsWith(ofDead)) {
        this.deadSessionLastHeldAtMs = at;
      } else if (token !== undefined && this.lockFreedAtMs === undefined) {
        this.lockFreedAtMs = at;
        on.freed();
        this.event(
          `${this.lockKey} left the dead instance's session ${seconds(at - caught.killedAtMs)} after the kill`,
        );
      }
      await sleep(WATCH_POLL_MS);
    }
    const lastHeld = this.deadSessionLastHeldAtMs;
    if (this.lockFreedAtMs === undefined) {
      this.event(`${this.lockKey} was held by the dead session to the end`);
    } else if (lastHeld !== undefined && lastHeld > this.lockFreedAtMs) {
      this.event(
        `${this.lockKey} went back to the dead session (a waiter it had queued) until ${seconds(lastHeld - caught.killedAtMs)} after the kill`,
      );
    }
  }
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

/** The instance whose lock session `token` belongs to, if any. */
function holderIn(
  sessions: ReadonlyMap<string, AppInstance>,
  token: string,
): [string, AppInstance] | undefined {
  const at = token.indexOf('.');
  const session = at > 0 ? token.slice(0, at) : undefined;
  const instance = session === undefined ? undefined : sessions.get(session);
  return session === undefined || !instance ? undefined : [session, instance];
}

/** Lock session id -> instance, from each instance's GET /health. */
async function lockSessions(
  instances: readonly AppInstance[],
): Promise<Map<string, AppInstance>> {
  const sessions = new Map<string, AppInstance>();
  await Promise.all(
    instances.map(async (instance) => {
      try {
        const response = await fetch(
          `http://127.0.0.1:${instance.port}/health`,
          { signal: AbortSignal.timeout(2_000) },
        );
        const body = (await response.json()) as { lockSession?: unknown };
        if (typeof body.lockSession === 'string')
          sessions.set(body.lockSession, instance);
      } catch {
        // not answering now: not the holder this round
      }
    }),
  );
  return sessions;
}
