/** An order as the public API shows it. */
export interface OrderView {
  readonly id: number;
  readonly couponId: number;
  /** A short hash of the buyer's id (see web/buyer-tag.ts); the id itself is never sent. */
  readonly buyer: string;
  readonly amountPaid: number;
  readonly createdAt: string;
}
