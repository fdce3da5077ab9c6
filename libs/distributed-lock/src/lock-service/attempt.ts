import type { AcquireRequest, LockBusy } from '../backends/lock-backend.js';
import {
  LockBackendError,
  LockNotAcquiredError,
} from '../errors/lock-errors.js';
import type { ProcessSession } from '../session/process-session.js';
import { sessionToken } from '../session/session-token.js';
import type { LeasePolicy } from './held-key-init.js';
import {
  canonicalKeys,
  checkedFlag,
  checkedMs,
  checkedName,
  type LockOptions,
  type LockServiceSettings,
} from './lock-settings.js';
import { newOwnerToken } from './owner-token.js';

/** One call of `LockService.acquire`, checked. */
export interface Attempt {
  /** Canonical order. */
  readonly names: readonly string[];
  readonly policy: LeasePolicy;
  readonly token: string;
  /** The token names the live session already (else it is bound once one is open). */
  readonly bound: boolean;
  readonly startedAt: number;
  readonly deadline: number;
  readonly signal?: AbortSignal;
  /** Every key's fencing token comes with the grant (`LockOptions.fence`). */
  readonly fence: boolean;
  /** The name metrics and traces report it under, when they are on. */
  readonly name?: string;
  /** Metrics or traces report this acquisition and its holds. */
  readonly observed: boolean;
}

/**
 * The call, checked: its keys in canonical order, its lease policy, its
 * owner token (bound to the live session at once when there is one, the
 * common case) and its deadline. `name`, given only when telemetry observes
 * the call, is what it reports the call under.
 *
 * @throws the errors `LockService.acquire` documents for bad input
 */
export function newAttempt(
  keyOrKeys: string | readonly string[],
  options: LockOptions,
  settings: LockServiceSettings,
  session: ProcessSession | undefined,
  name: string | undefined,
): Attempt {
  const names = canonicalKeys(keyOrKeys, settings.maxKeyLength);
  const policy = leasePolicyOf(options.leaseTime, settings, session);
  const waitTime = checkedMs(
    'waitTime',
    options.waitTime ?? settings.waitTime,
    true,
  );
  const startedAt = Date.now();
  const sessionId = policy.session?.liveId;
  const random = newOwnerToken();
  return {
    names,
    policy,
    token: sessionId === undefined ? random : sessionToken(sessionId, random),
    bound: sessionId !== undefined,
    startedAt,
    deadline: startedAt + waitTime,
    signal: options.signal,
    fence: checkedFlag('fence', options.fence),
    name: checkedName(options.name) ?? name,
    observed: name !== undefined,
  };
}

/** The attempt, its owner token bound to session `sessionId`. */
export function bindToSession(attempt: Attempt, sessionId: string): Attempt {
  return {
    ...attempt,
    token: sessionToken(sessionId, attempt.token),
    bound: true,
  };
}

/** The backend request for `storeKey`, sent at `now` (ms since epoch). */
export function backendRequest(
  attempt: Attempt,
  storeKey: string,
  now: number,
): AcquireRequest {
  return {
    key: storeKey,
    token: attempt.token,
    leaseMs: attempt.policy.leaseMs,
    waitMs: Math.max(0, attempt.deadline - now),
    signal: attempt.signal,
    fence: attempt.fence,
  };
}

export function notAcquired(
  name: string,
  attempt: Attempt,
  busy: LockBusy,
): LockNotAcquiredError {
  const stoppedBy = attempt.signal;
  return new LockNotAcquiredError(
    name,
    Date.now() - attempt.startedAt,
    busy.retryAfterMs,
    stoppedBy?.aborted ? { cause: stoppedBy.reason } : undefined,
  );
}

export function sessionLapsedError(name: string): LockBackendError {
  return new LockBackendError(
    `Lock "${name}" was granted after this process's lock session lapsed (Redis unreachable, or the process paused); it was given back`,
  );
}

/** How long to wait before trying again to open a session that failed to open. */
const sessionRetryMs = 50;
/** How long failed session opens are tried again, at most. */
const sessionRetryForMs = 1_000;

/**
 * Opens the session for `attempt`. A failure that comes fast is tried again,
 * for up to `sessionRetryForMs` within the attempt's wait: right after
 * startup the store may not be reachable yet (a quorum node still
 * connecting). One that took the command timeout is not: Redis is away.
 */
export async function openSessionFor(
  session: ProcessSession,
  attempt: Attempt,
  closed: () => boolean,
): Promise<string> {
  const giveUpAt = Math.min(attempt.deadline, Date.now() + sessionRetryForMs);
  for (;;) {
    try {
      return await session.ready();
    } catch (error) {
      if (closed())
        throw new LockNotAcquiredError(
          attempt.names.join(', '),
          Date.now() - attempt.startedAt,
        );
      if (Date.now() + sessionRetryMs >= giveUpAt) throw error;
      await new Promise((resolve) => setTimeout(resolve, sessionRetryMs));
    }
  }
}

/** How a hold asked for with `leaseTime` keeps its lease. */
function leasePolicyOf(
  leaseTime: number | undefined,
  settings: LockServiceSettings,
  session: ProcessSession | undefined,
): LeasePolicy {
  const explicit = leaseTime ?? settings.leaseTime;
  if (explicit === undefined) {
    if (session)
      return { leaseMs: session.holdLeaseMs, watchdog: true, session };
    return { leaseMs: settings.watchdogLeaseTime, watchdog: true };
  }
  return {
    leaseMs: checkedMs('leaseTime', explicit, false),
    watchdog: false,
  };
}
