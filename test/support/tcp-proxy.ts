import net from 'node:net';

import {
  Connection,
  type PendingCut,
  type Switches,
} from './tcp-proxy-connection.js';

/**
 * A loopback TCP proxy to put between a client and a server (typically an
 * ioredis client and a test `redis-server`) to inject network faults: lost
 * replies, delays, a frozen link, cut or refused connections.
 *
 * Each client connection gets its own connection to the target. Chunks are
 * forwarded as they arrive (no parsing), through a queue per direction that
 * {@link TcpProxy.delay} and {@link TcpProxy.freeze} hold back, in order.
 */

/** Where {@link startTcpProxy} forwards to. */
export interface TcpProxyOptions {
  /** The server's port. */
  targetPort: number;
  /** The server's host. Default `127.0.0.1`. */
  targetHost?: string;
}

/**
 * Picks a client→server chunk: a string is looked for in the chunk as latin1
 * text, ignoring ASCII case (ioredis sends command names in lower case, so
 * `'INCR'` finds `incr`); a RegExp is tested on that text as it is; a function
 * gets the raw bytes.
 */
export type ChunkMatcher = string | RegExp | ((chunk: Buffer) => boolean);

/** A running proxy started by {@link startTcpProxy}. */
export interface TcpProxy {
  /** The proxy's own loopback port (a free one, chosen by the kernel). */
  readonly port: number;
  /** `redis://127.0.0.1:${port}`. */
  readonly url: string;
  /** Number of client connections currently open through the proxy. */
  readonly connections: number;
  /**
   * The next client→server chunk whose bytes match `match` is forwarded to the
   * server, and from then on nothing more from the server reaches that client
   * connection; after `afterMs` (default 50 ms, time for the server to run it)
   * both sides of that connection are destroyed. Resolves once the cut was
   * made. This is "the command reached Redis but its reply was lost": ioredis
   * then reconnects and re-sends it.
   *
   * Calls queue up: each one takes the next matching chunk after the previous
   * one's. Rejects if the proxy closes before a chunk matched, or the
   * connection closes before the matched chunk was forwarded.
   */
  cutAfterRequest(
    match: ChunkMatcher,
    options?: { afterMs?: number },
  ): Promise<void>;
  /**
   * The next client→server chunk matching `match` is held back, with all
   * that follows it on that connection in that direction (the client's
   * close included), until `release()` is called; replies still flow and
   * other connections are untouched. This is "the request is on its way,
   * late": the client may give up and close meanwhile, and the server gets
   * the request (then the close) only on release, if its side is still
   * open by then. Resolves once a chunk matched.
   */
  holdRequest(match: ChunkMatcher): Promise<{ release(): void }>;
  /**
   * Server→client data is swallowed (not forwarded) while on; client→server
   * still flows. A swallowed reply leaves the client waiting for it forever
   * (its later replies are matched to the wrong commands): follow it with
   * {@link cutAll} once the client gave up, to model a lost reply fully.
   */
  dropReplies(on: boolean): void;
  /**
   * Every chunk in both directions is held `ms` after it arrived before it is
   * forwarded (order kept). 0 turns it off; chunks already held keep their time.
   */
  delay(ms: number): void;
  /**
   * Stops forwarding in both directions (chunks are buffered, connections stay
   * open, and a side closing is held back too): a frozen network or server as
   * seen by the client. New connections are still accepted, and held too.
   */
  freeze(): void;
  /** Forwards what freeze() held, in order, and resumes. */
  thaw(): void;
  /** Destroys every open connection (both sides) at once. New connections are still accepted. */
  cutAll(): void;
  /** While on, new client connections are accepted and immediately destroyed. */
  refuse(on: boolean): void;
  /** Closes the listener and every connection, and resolves once all sockets are closed. Idempotent. */
  close(): Promise<void>;
}

/** Starts a proxy on a free port of 127.0.0.1 forwarding to the target. */
export async function startTcpProxy(
  options: TcpProxyOptions,
): Promise<TcpProxy> {
  const proxy = new LoopbackProxy(options.targetPort, options.targetHost);
  await proxy.listen();
  return proxy;
}

class LoopbackProxy implements TcpProxy {
  port = 0;
  private readonly server = net.createServer({ noDelay: true });
  private readonly live = new Set<Connection>();
  /** Every socket not closed yet, with its 'close' event. */
  private readonly sockets = new Map<net.Socket, Promise<void>>();
  private readonly cuts: PendingCut[] = [];
  private readonly holds: {
    matches: (chunk: Buffer) => boolean;
    resolve: (hold: { release(): void }) => void;
    reject: (error: Error) => void;
  }[] = [];
  private readonly switches: Switches = { frozen: false, delayMs: 0 };
  private dropping = false;
  private refusing = false;
  private closing?: Promise<void>;

  constructor(
    private readonly targetPort: number,
    private readonly targetHost = '127.0.0.1',
  ) {
    this.server.on('connection', (client) => this.accept(client));
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get connections(): number {
    let count = 0;
    for (const connection of this.live) if (connection.clientOpen) count++;
    return count;
  }

  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ port: 0, host: '127.0.0.1' }, () => {
        this.server.off('error', reject);
        this.port = (this.server.address() as net.AddressInfo).port;
        // A forgotten proxy does not keep a script alive (open connections do).
        this.server.unref();
        resolve();
      });
    });
  }

  cutAfterRequest(
    match: ChunkMatcher,
    options: { afterMs?: number } = {},
  ): Promise<void> {
    if (this.closing) return Promise.reject(new Error('The proxy is closed'));
    return new Promise((resolve, reject) => {
      this.cuts.push({
        matches: matcher(match),
        afterMs: options.afterMs ?? 50,
        resolve,
        reject,
      });
    });
  }

  holdRequest(match: ChunkMatcher): Promise<{ release(): void }> {
    if (this.closing) return Promise.reject(new Error('The proxy is closed'));
    return new Promise((resolve, reject) => {
      this.holds.push({ matches: matcher(match), resolve, reject });
    });
  }

  dropReplies(on: boolean): void {
    this.dropping = on;
  }

  delay(ms: number): void {
    if (!(ms >= 0) || !Number.isFinite(ms)) {
      throw new RangeError(
        `delay() needs a non-negative number of ms, got ${ms}`,
      );
    }
    this.switches.delayMs = ms;
  }

  freeze(): void {
    this.switches.frozen = true;
  }

  thaw(): void {
    this.switches.frozen = false;
    for (const connection of this.live) {
      connection.up.pump();
      connection.down.pump();
    }
  }

  cutAll(): void {
    // Deleting the element being visited is fine while iterating a Set.
    for (const connection of this.live) connection.destroy();
  }

  refuse(on: boolean): void {
    this.refusing = on;
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      const listenerClosed = new Promise<void>((resolve) =>
        this.server.close(() => resolve()),
      );
      this.cutAll();
      for (const cut of this.cuts.splice(0)) {
        cut.reject(new Error('The proxy closed before a request matched'));
      }
      for (const hold of this.holds.splice(0)) {
        hold.reject(new Error('The proxy closed before a request matched'));
      }
      await Promise.all([listenerClosed, ...this.sockets.values()]);
    })();
    return this.closing;
  }

  private track(socket: net.Socket): void {
    socket.on('error', () => undefined);
    this.sockets.set(
      socket,
      new Promise((resolve) =>
        socket.once('close', () => {
          this.sockets.delete(socket);
          resolve();
        }),
      ),
    );
  }

  private accept(client: net.Socket): void {
    this.track(client);
    if (this.refusing || this.closing) {
      client.destroy();
      return;
    }
    const server = net.connect({
      port: this.targetPort,
      host: this.targetHost,
      noDelay: true,
    });
    this.track(server);
    const connection = new Connection(client, server, this.switches, (c) =>
      this.live.delete(c),
    );
    this.live.add(connection);

    client.on('data', (chunk: Buffer) => {
      const hold = this.holds[0];
      if (hold && !connection.up.held && hold.matches(chunk)) {
        this.holds.shift();
        connection.up.pause();
        connection.up.push(chunk);
        hold.resolve({ release: () => connection.up.resume() });
        return;
      }
      const cut = this.cuts[0];
      if (cut && !connection.cutting && cut.matches(chunk)) {
        this.cuts.shift();
        connection.startCut(chunk, cut);
      } else {
        connection.up.push(chunk);
      }
    });
    server.on('data', (chunk: Buffer) => {
      if (!connection.cutting && !this.dropping) connection.down.push(chunk);
    });
    // A side that ends cleanly is ended on the other side in its turn (after
    // what it sent before); anything abrupt takes both sides down at once.
    client.on('end', () => connection.up.push(undefined));
    server.on('end', () => {
      if (!connection.cutting) connection.down.push(undefined);
    });
    client.on('close', (hadError) => {
      // Held: the server gets what the client sent, then its close, on release.
      if (connection.up.held) {
        connection.clientOpen = false;
        connection.up.push(undefined);
        return;
      }
      if (hadError || connection.cutting) connection.destroy();
      else connection.closed('client');
    });
    server.on('close', (hadError) => {
      if (hadError || connection.cutting) connection.destroy();
      else connection.closed('server');
    });
  }
}

function matcher(match: ChunkMatcher): (chunk: Buffer) => boolean {
  if (typeof match === 'function') return match;
  if (typeof match === 'string') {
    const needle = match.toLowerCase();
    return (chunk) => chunk.toString('latin1').toLowerCase().includes(needle);
  }
  return (chunk) => {
    match.lastIndex = 0;
    return match.test(chunk.toString('latin1'));
  };
}
