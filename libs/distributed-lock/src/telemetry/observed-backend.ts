import type {
  AcquireRequest,
  LockBackend,
  LockBusy,
  LockGrant,
  SessionStore,
} from '../backends/lock-backend.js';
import type { BackendOperation, LockObserver } from './lock-observer.js';

/**
 * `backend`, reporting to `observer` its failures, renewals and hand-offs.
 * Only a service with metrics or traces is given one, so the extra reaction
 * per call is paid by those who asked for it.
 */
export function observedBackend(
  backend: LockBackend,
  observer: LockObserver,
): LockBackend {
  const failed = failureCounter(observer);
  const observed: LockBackend = {
    acquire: (request: AcquireRequest) =>
      backend.acquire(request).then((result: LockGrant | LockBusy) => {
        if (result.acquired && result.handoff) observer.handoff(result.handoff);
        return result;
      }, failed('acquire')),
    extend: (key, token, leaseMs) =>
      backend.extend(key, token, leaseMs).then((kept) => {
        observer.renewal('lease', kept);
        return kept;
      }, failed('extend')),
    release: (key, token) =>
      backend.release(key, token).catch(failed('release')),
    fence: (key, token) => backend.fence(key, token).catch(failed('fence')),
    isLocked: (key) => backend.isLocked(key).catch(failed('is-locked')),
    close: () => backend.close(),
    probe: backend.probe?.bind(backend),
    sessions: backend.sessions && observedSessions(backend.sessions, observer),
  };
  return observed;
}

function observedSessions(
  store: SessionStore,
  observer: LockObserver,
): SessionStore {
  const failed = failureCounter(observer);
  return {
    open: (id, ttlMs) => store.open(id, ttlMs).catch(failed('session-open')),
    renew: (id, ttlMs) =>
      store.renew(id, ttlMs).then((alive) => {
        observer.renewal('session', alive);
        return alive;
      }, failed('session-renew')),
    end: (id) => store.end(id).catch(failed('session-end')),
    onReconnect: store.onReconnect?.bind(store),
    onDisconnect: store.onDisconnect?.bind(store),
    get holdLeaseMs() {
      return store.holdLeaseMs;
    },
  };
}

/** A rejection handler that counts a failed `operation`, then rethrows. */
function failureCounter(observer: LockObserver) {
  return (operation: BackendOperation) =>
    (error: unknown): never => {
      observer.backendError(operation);
      throw error;
    };
}
