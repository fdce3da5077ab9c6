import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * Runs a full garbage collection (twice, so that finalizers' garbage goes
 * too). `npm run bench` exposes `gc`; otherwise it is switched on here.
 * Returns false when neither works.
 */
export function collectGarbage(): boolean {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g) {
    g();
    g();
    return true;
  }
  try {
    setFlagsFromString('--expose-gc');
    const fresh = runInNewContext('gc') as () => void;
    fresh();
    fresh();
    return true;
  } catch {
    return false;
  }
}
