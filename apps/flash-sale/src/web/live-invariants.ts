/** The figures of one coupon the invariants compare: three independent readings of what was sold. */
export interface CouponCounts {
  readonly id: number;
  /** Initial stock. */
  readonly stock: number;
  /** Units left in Redis. */
  readonly remaining: number;
  /** The `coupons.sold` column, the count that guards the sale in the database. */
  readonly sold: number;
  /** Order rows in the database. */
  readonly orders: number;
  /** Distinct buyers among those rows. */
  readonly buyers: number;
}

/**
 * `ok`: sold = orders = stock − remaining and no buyer twice. `settling`: a
 * difference between Redis and the database younger than
 * {@link INVARIANT_GRACE_MS} (a purchase takes the unit in Redis a moment
 * before its order is written). `broken`: such a difference that lasted
 * longer, or any difference within the database.
 */
export type InvariantState = 'ok' | 'settling' | 'broken';

export interface InvariantCheck {
  readonly state: InvariantState;
  /** What differs, in words; empty when ok. */
  readonly problems: string[];
}

/** How long a difference between Redis and the database may last before it counts as broken, in ms. */
export const INVARIANT_GRACE_MS = 2_000;

/** What differs between Redis and the database for one coupon, in words. */
function redisProblems(counts: CouponCounts): string[] {
  const taken = counts.stock - counts.remaining;
  return counts.orders === taken
    ? []
    : [
        `orders (${counts.orders}) ≠ stock − remaining (${counts.stock} − ${counts.remaining} = ${taken})`,
      ];
}

/**
 * What differs within the database for one coupon, in words. A sale writes
 * `sold` and its order in one transaction and the snapshot reads them in one
 * statement, so no purchase in progress can make these differ.
 */
function databaseProblems(counts: CouponCounts): string[] {
  const problems: string[] = [];
  if (counts.sold !== counts.orders) {
    problems.push(`sold (${counts.sold}) ≠ orders (${counts.orders})`);
  }
  if (counts.buyers !== counts.orders) {
    problems.push(
      `${counts.orders - counts.buyers} buyer(s) with more than one order`,
    );
  }
  return problems;
}

/** What differs for one coupon, in words (empty when everything agrees). */
export function invariantProblems(counts: CouponCounts): string[] {
  return [...redisProblems(counts), ...databaseProblems(counts)];
}

/**
 * Checks the invariants at every snapshot, remembering since when Redis and
 * the database have differed for each coupon, so that the moment between
 * taking a unit and writing its order is not reported as a break.
 */
export class InvariantWatch {
  private readonly differingSince = new Map<number, number>();

  check(counts: CouponCounts, now = Date.now()): InvariantCheck {
    const fromRedis = redisProblems(counts);
    const fromDatabase = databaseProblems(counts);
    const problems = [...fromRedis, ...fromDatabase];
    let redisLasted = 0;
    if (fromRedis.length === 0) {
      this.differingSince.delete(counts.id);
    } else {
      const since = this.differingSince.get(counts.id) ?? now;
      this.differingSince.set(counts.id, since);
      redisLasted = now - since;
    }
    if (problems.length === 0) return { state: 'ok', problems };
    const broken = fromDatabase.length > 0 || redisLasted >= INVARIANT_GRACE_MS;
    return { state: broken ? 'broken' : 'settling', problems };
  }

  /** Forgets the coupons not in `ids` (no longer shown). */
  keepOnly(ids: ReadonlySet<number>): void {
    for (const id of this.differingSince.keys()) {
      if (!ids.has(id)) this.differingSince.delete(id);
    }
  }
}
