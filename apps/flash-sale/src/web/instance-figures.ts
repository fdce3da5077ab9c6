import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { PurchaseFigures } from '../metrics/purchase-tracker.js';

/** What each instance publishes about itself to Redis every {@link PUBLISH_INTERVAL_MS}. */
export interface InstanceFigures extends PurchaseFigures {
  /** Unique per app: host, pid and a random part (several apps may share a process in tests). */
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  /** The PORT it was started with, when set. */
  readonly port: number | null;
  /** When it published these figures (ms since the epoch, its clock). */
  readonly at: number;
}

/** One instance as the page shows it. */
export interface InstanceView extends InstanceFigures {
  /** Published within {@link INSTANCE_ALIVE_MS}. */
  readonly alive: boolean;
  /** The instance that serves this feed. */
  readonly self: boolean;
}

/** How often an instance publishes its figures, in ms. */
export const PUBLISH_INTERVAL_MS = 500;
/** An instance silent for longer is shown as gone. */
export const INSTANCE_ALIVE_MS = 2_000;
/** A gone instance is still listed this long, then dropped (and its entry removed). */
export const INSTANCE_FORGET_MS = 60_000;

/** The Redis hash of every instance's figures (field = instance id); one hash tag, so one Cluster slot. */
export const INSTANCES_KEY = '{flash-sale:dashboard}:instances';

/** This process's identity as published. */
export function thisInstance(): Pick<
  InstanceFigures,
  'id' | 'host' | 'pid' | 'port'
> {
  const host = hostname();
  const port = Number(process.env.PORT);
  return {
    id: `${host}:${process.pid}:${randomBytes(4).toString('hex')}`,
    host,
    pid: process.pid,
    port: Number.isInteger(port) && port > 0 ? port : null,
  };
}

/**
 * The instances to show, from the hash's raw values: unparseable or forgotten
 * entries dropped, each marked alive or gone, ordered by port then id.
 */
export function instanceViews(
  raw: Readonly<Record<string, string>>,
  selfId: string,
  now: number,
): InstanceView[] {
  const views: InstanceView[] = [];
  for (const text of Object.values(raw)) {
    let figures: InstanceFigures;
    try {
      figures = JSON.parse(text) as InstanceFigures;
    } catch {
      continue;
    }
    if (typeof figures?.id !== 'string' || typeof figures.at !== 'number') {
      continue;
    }
    const age = now - figures.at;
    if (age > INSTANCE_FORGET_MS) continue;
    views.push({
      ...figures,
      alive: age <= INSTANCE_ALIVE_MS,
      self: figures.id === selfId,
    });
  }
  return views.toSorted(
    (a, b) =>
      (a.port ?? Infinity) - (b.port ?? Infinity) || a.id.localeCompare(b.id),
  );
}

/** Ids of the entries to remove: unparseable or forgotten. */
export function forgottenInstances(
  raw: Readonly<Record<string, string>>,
  now: number,
): string[] {
  const kept = new Set(instanceViews(raw, '', now).map((view) => view.id));
  return Object.keys(raw).filter((field) => !kept.has(field));
}

/**
 * Sums by coupon: the purchases being answered now (live instances), and the
 * cumulative lock time (every listed instance, so that the total does not
 * drop when one dies).
 */
export function couponLoad(
  instances: readonly InstanceView[],
): Record<string, { queue: number; lockCount: number; lockTotalMs: number }> {
  const load: Record<
    string,
    { queue: number; lockCount: number; lockTotalMs: number }
  > = {};
  const entry = (coupon: string) =>
    (load[coupon] ??= { queue: 0, lockCount: 0, lockTotalMs: 0 });
  for (const instance of instances) {
    if (instance.alive) {
      for (const [coupon, n] of Object.entries(instance.inFlight ?? {})) {
        entry(coupon).queue += n;
      }
    }
    for (const [coupon, t] of Object.entries(instance.lockTime ?? {})) {
      entry(coupon).lockCount += t.count;
      entry(coupon).lockTotalMs += t.totalMs;
    }
  }
  return load;
}
