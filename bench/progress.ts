/**
 * One progress line on stderr: rewritten in place on a terminal, a new line
 * every few seconds otherwise (CI logs).
 */
export class Progress {
  private readonly startedAt = Date.now();
  private done = 0;
  private total = 0;
  /** Expected seconds of one unit of the scenario now running. */
  private weight = 1;
  private lastPrinted = 0;
  private lastLength = 0;
  private readonly tty = Boolean(process.stderr.isTTY);

  /** Adds planned work units (slices) expected to take `secondsEach`. */
  plan(units: number, secondsEach = 1): void {
    this.total += units * secondsEach;
  }

  /** Sets the expected seconds per unit of the scenario that starts now. */
  phase(secondsEach: number): void {
    this.weight = secondsEach;
  }

  /** Shows the unit that starts now (the previous one, if any, is done). */
  step(label: string): void {
    this.show(label);
    this.done += this.weight;
  }

  show(label: string, force = false): void {
    const now = Date.now();
    if (!this.tty && !force && now - this.lastPrinted < 5_000) return;
    this.lastPrinted = now;
    const elapsed = (now - this.startedAt) / 1000;
    const pct = this.total > 0 ? (100 * this.done) / this.total : 0;
    const eta =
      this.done > 0 && this.total > this.done
        ? ` eta ~${formatSeconds((elapsed / this.done) * (this.total - this.done))}`
        : '';
    const line = `[bench ${formatSeconds(elapsed)} ${pct.toFixed(0).padStart(3)}%${eta}] ${label}`;
    if (this.tty) {
      const pad = Math.max(0, this.lastLength - line.length);
      process.stderr.write(`\r${line}${' '.repeat(pad)}`);
      this.lastLength = line.length;
    } else {
      process.stderr.write(`${line}\n`);
    }
  }

  /** Prints a message on its own line (keeping the progress line intact). */
  log(message: string): void {
    if (this.tty && this.lastLength > 0) {
      process.stderr.write(`\r${' '.repeat(this.lastLength)}\r`);
      this.lastLength = 0;
    }
    process.stderr.write(`${message}\n`);
  }

  finish(): void {
    if (this.tty && this.lastLength > 0) process.stderr.write('\n');
    this.lastLength = 0;
  }
}

export function formatSeconds(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  const s = Math.round(seconds);
  return s >= 60
    ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`
    : `${s}s`;
}
