/** An order as the API shows it. */
export interface OrderView {
  readonly id: number;
  readonly couponId: number;
  readonly userId: string;
  readonly amountPaid: number;
  readonly createdAt: string;
}
