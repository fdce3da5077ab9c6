/** `setTimeout` fires at once (with a warning) for delays above this. */
const MAX_TIMER_DELAY_MS = 2_147_483_647;

/** A timer that may span longer than one `setTimeout` allows. */
export interface Countdown {
  handle?: ReturnType<typeof setTimeout>;
}

/** Calls `onFire` after `ms` milliseconds; the timer never keeps the process alive. */
export function startCountdown(ms: number, onFire: () => void): Countdown {
  const countdown: Countdown = {};
  const arm = (remaining: number): void => {
    const step = Math.min(remaining, MAX_TIMER_DELAY_MS);
    countdown.handle = setTimeout(() => {
      countdown.handle = undefined;
      if (remaining > step) {
        arm(remaining - step);
      } else {
        onFire();
      }
    }, step);
    countdown.handle.unref();
  };
  arm(ms);
  return countdown;
}

/** Stops `countdown` if it is still running. */
export function stopCountdown(countdown: Countdown | undefined): void {
  if (countdown?.handle !== undefined) {
    clearTimeout(countdown.handle);
    countdown.handle = undefined;
  }
}
