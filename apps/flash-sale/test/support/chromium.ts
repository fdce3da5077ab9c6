import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { sleep } from './harness.js';

/** Debian's `chromium` package, driven by playwright-core (CHROMIUM_PATH overrides). */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const hasChromium = existsSync(CHROMIUM);

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** A headless Chromium with a fresh temporary profile (removed on close). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: CHROMIUM_ARGS,
    timeout: 30_000,
  });
}

/** Polls `read` until it returns true, failing with `what` after `timeoutMs`. */
export async function until(
  what: string,
  read: () => boolean | Promise<boolean>,
  timeoutMs = 5_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await read()) return;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(25);
  }
}
