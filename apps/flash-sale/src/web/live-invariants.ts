/** The figures of one coupon the invariants compare. */
export interface CouponCounts {
  readonly id: number;
  /** Initial stock. */
  readonly stock: number;
  /** Units left in Redis. */
  readonly remaining: number;
  /** Sold, as the coupon service reports it. */
  readonly sold: number;
  /** Order rows in the database. */
  readonly orders: number;
  /** Distinct buyers among those rows. */
  readonly buyers: number;
}

/**
 * `ok`: sold = orders = stock − remaining and no buyer twice. `settling`: a
 * difference younger than {@link INVARIANT_GRACE_MS} (a purchase takes the
 * unit in Redis a moment before its order is written). `broken`: a
 * difference that lasted longer.
 */
export type InvariantState = 'ok' | 'settling' | 'broken';

export interface InvariantCheck {
  readonly state: InvariantState;
  /** What differs, in words; empty when ok. */
  readonly problems: string[];
}

/** How long a difference may last before it counts as broken, in ms. */
export const INVARIANT_GRACE_MS = 2_000;

/** What differs for one coupon, in words (empty when everything agrees). */
export function invariantProblems(counts: CouponCounts): string[] {
  const problems: string[] = [];
  const taken = counts.stock - counts.remaining;
  if (counts.orders !== taken) {
    problems.push(
      `orders (${counts.orders}) ≠ stock − remaining (${counts.stock} − ${counts.remaining} = ${taken})`,
    );
  }
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

/**
 * Checks the invariants at every snapshot, remembering since when each
 * coupon has differed, so that the moment between taking a unit and writing
 * its order is not reported as a break.
 */
export class InvariantWatch {
  private readonly differingSince = new Map<number, number>();

  check(counts: CouponCounts, now = Date.now()): InvariantCheck {
    const problems = invariantProblems(counts);
    if (problems.length === 0) {
      this.differingSince.delete(counts.id);
      return { state: 'ok', problems };
    }
    const since = this.differingSince.get(counts.id) ?? now;
    this.differingSince.set(counts.id, since);
    return {
      state: now - since >= INVARIANT_GRACE_MS ? 'broken' : 'settling',
      problems,
    };
  }

  /** Forgets the coupons not in `ids` (no longer shown). */
  keepOnly(ids: ReadonlySet<number>): void {
    for (const id of this.differingSince.keys()) {
      if (!ids.has(id)) this.differingSince.delete(id);
    }
  }
}
