/** What a purchase answers when it succeeds. */
export interface PurchaseAnswer {
  readonly orderId: number;
}

/**
 * One purchase waiting for its answer: queued for its coupon's next turn of
 * the lock, then sold in that turn's batch. Answered once; later answers are
 * ignored, so a batch can fail whatever it has not answered yet.
 */
export class PendingPurchase {
  readonly answer: Promise<PurchaseAnswer>;
  private answered = false;
  private resolveAnswer!: (answer: PurchaseAnswer) => void;
  private rejectAnswer!: (error: unknown) => void;
  private deadline?: NodeJS.Timeout;

  constructor(readonly userId: string) {
    this.answer = new Promise<PurchaseAnswer>((resolve, reject) => {
      this.resolveAnswer = resolve;
      this.rejectAnswer = reject;
    });
  }

  /** Not answered yet. */
  get pending(): boolean {
    return !this.answered;
  }

  succeed(orderId: number): void {
    if (this.settle()) this.resolveAnswer({ orderId });
  }

  fail(error: unknown): void {
    if (this.settle()) this.rejectAnswer(error);
  }

  /**
   * Fails it with `error()` after `ms`, unless it was answered or taken into
   * a batch by then, and calls `expired`.
   */
  expireAfter(ms: number, error: () => unknown, expired: () => void): void {
    this.deadline = setTimeout(() => {
      this.deadline = undefined;
      if (!this.answered) {
        this.fail(error());
        expired();
      }
    }, ms);
  }

  /** Taken into a batch: from now on its sale answers it, not its deadline. */
  taken(): void {
    clearTimeout(this.deadline);
    this.deadline = undefined;
  }

  private settle(): boolean {
    if (this.answered) return false;
    this.answered = true;
    this.taken();
    return true;
  }
}
