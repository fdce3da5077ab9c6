import type net from 'node:net';

/**
 * The moving parts of a tcp-proxy.ts connection: a queue per direction that
 * delays and freezes hold back in order, and the pair of sockets with the
 * state of a pending cut.
 */

/** One chunk (or the end of the stream) waiting in a {@link Pipe}. */
interface Held {
  /** When it may be forwarded (ms since epoch). */
  due: number;
  /** Undefined: the source ended, so end the target. */
  chunk?: Buffer;
  /** Called right after it was written to the target. */
  onForwarded?: () => void;
}

/** Shared switches every pipe reads. */
export interface Switches {
  frozen: boolean;
  delayMs: number;
}

/** A `cutAfterRequest()` call waiting for its chunk. */
export interface PendingCut {
  matches: (chunk: Buffer) => boolean;
  afterMs: number;
  resolve: () => void;
  reject: (error: Error) => void;
}

/** One direction of one connection: an ordered queue in front of the target socket. */
export class Pipe {
  private readonly queue: Held[] = [];
  private timer?: NodeJS.Timeout;
  /** Held back on its own (a `holdRequest()`), whatever the shared switches say. */
  private paused = false;

  constructor(
    private readonly target: net.Socket,
    private readonly switches: Switches,
  ) {}

  push(chunk: Buffer | undefined, onForwarded?: () => void): void {
    const due = Date.now() + this.switches.delayMs;
    this.queue.push({ due, chunk, onForwarded });
    if (this.queue.length === 1) this.pump();
  }

  get held(): boolean {
    return this.paused;
  }

  /** Holds back this pipe alone, in order, until {@link resume}. */
  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    this.pump();
  }

  /** Forwards whatever is due, and schedules itself for the next item. */
  pump(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    while (!this.switches.frozen && !this.paused && this.queue.length > 0) {
      const wait = this.queue[0].due - Date.now();
      if (wait > 0) {
        this.timer = setTimeout(() => this.pump(), wait);
        return;
      }
      const { chunk, onForwarded } = this.queue.shift()!;
      if (this.target.destroyed) continue;
      if (chunk === undefined) this.target.end();
      else this.target.write(chunk);
      onForwarded?.();
    }
  }

  discard(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
  }
}

/** A client connection and its connection to the target. */
export class Connection {
  /** Client → server. */
  readonly up: Pipe;
  /** Server → client. */
  readonly down: Pipe;
  /** A request matched a cut: nothing from the server is forwarded any more. */
  cutting = false;
  /** The client side has not closed yet. */
  clientOpen = true;
  private serverOpen = true;
  /** The cut this connection is going through, settled when it is destroyed. */
  private cut?: PendingCut;
  /** Its request reached the server: the cut resolves (else it rejects). */
  private cutForwarded = false;
  private cutTimer?: NodeJS.Timeout;
  private destroyed = false;

  constructor(
    readonly client: net.Socket,
    readonly server: net.Socket,
    switches: Switches,
    private readonly onDestroyed: (connection: Connection) => void,
  ) {
    this.up = new Pipe(server, switches);
    this.down = new Pipe(client, switches);
  }

  /** Forwards `chunk`, stops all replies, and destroys both sides `cut.afterMs` after. */
  startCut(chunk: Buffer, cut: PendingCut): void {
    this.cutting = true;
    this.cut = cut;
    this.down.discard();
    this.up.push(chunk, () => {
      this.cutForwarded = true;
      this.cutTimer = setTimeout(() => this.destroy(), cut.afterMs);
    });
  }

  /** A side closed cleanly: the connection is done once both have. */
  closed(side: 'client' | 'server'): void {
    if (side === 'client') this.clientOpen = false;
    else this.serverOpen = false;
    if (!this.clientOpen && !this.serverOpen) this.destroy();
  }

  /** Destroys both sockets (if not already) and settles a cut under way. */
  destroy(): void {
    this.clientOpen = false;
    if (this.destroyed) return;
    this.destroyed = true;
    this.up.discard();
    this.down.discard();
    this.client.destroy();
    this.server.destroy();
    clearTimeout(this.cutTimer);
    const cut = this.cut;
    this.cut = undefined;
    // Destroyed early after the request reached the server: the cut is made,
    // just sooner.
    if (cut && this.cutForwarded) cut.resolve();
    else
      cut?.reject(
        new Error(
          'The connection closed before the matched request was forwarded',
        ),
      );
    this.onDestroyed(this);
  }
}
