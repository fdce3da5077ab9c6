import http from 'node:http';
import type net from 'node:net';

export {
  fencedResourceClient,
  type FencedResourceClient,
} from './fenced-resource-client.js';

/**
 * The referee of fencing tests: a stand-in for the resource a lock protects.
 *
 * It accepts a write only with a fencing token not lower than the highest it
 * has accepted (a stale holder's write is rejected), and it counts overlaps:
 * holders report entering and leaving their critical section, and one that
 * enters while another is inside is an overlap. Child processes reach it over
 * HTTP ({@link FencedResource.serve}, {@link fencedResourceClient}).
 */

/** One overlap seen by {@link FencedResource.enter}. */
export interface OverlapRecord {
  /** Who entered. */
  readonly writer: string;
  readonly token?: number;
  /** Who was inside already, with the tokens they entered with. */
  readonly inside: readonly { writer: string; token?: number }[];
  /** When (ms since epoch). */
  readonly at: number;
}

/** One call of {@link FencedResource.write}. */
export interface WriteRecord {
  readonly token: number;
  readonly writer?: string;
  readonly accepted: boolean;
  /** When (ms since epoch). */
  readonly at: number;
}

interface Inside {
  /** Nested enters not left yet. */
  depth: number;
  token?: number;
}

export class FencedResource {
  private top = 0;
  private acceptedCount = 0;
  private rejectedCount = 0;
  private readonly tokens: number[] = [];
  private readonly writeRecords: WriteRecord[] = [];
  private readonly overlapRecords: OverlapRecord[] = [];
  private readonly insideNow = new Map<string, Inside>();
  private mostInside = 0;
  private server?: http.Server;

  /**
   * The highest token accepted so far; 0 before any write, so the first
   * write needs a token of at least 0 (fencing tokens start at 1).
   */
  get highest(): number {
    return this.top;
  }

  /** Writes accepted. */
  get accepted(): number {
    return this.acceptedCount;
  }

  /** Writes rejected for a token lower than {@link highest}. */
  get rejected(): number {
    return this.rejectedCount;
  }

  /** Times a holder entered while somebody else was inside. */
  get overlaps(): number {
    return this.overlapRecords.length;
  }

  /** Every overlap, in order, with who was inside: for failure messages. */
  get overlapLog(): readonly OverlapRecord[] {
    return this.overlapRecords;
  }

  /** The most distinct holders that were inside at once. */
  get maxInside(): number {
    return this.mostInside;
  }

  /** The holders inside right now. */
  get inside(): readonly string[] {
    return [...this.insideNow.keys()];
  }

  /** Every token accepted, in order (for asserting strictly increasing tokens across holders). */
  get acceptedTokens(): readonly number[] {
    return this.tokens;
  }

  /** Every write, accepted or not, in order, with its writer: for failure messages. */
  get writes(): readonly WriteRecord[] {
    return this.writeRecords;
  }

  /**
   * Accepts when `token` >= {@link highest} (which then becomes `token`),
   * rejects otherwise. `writer` is only recorded, in {@link writes}.
   *
   * @returns whether the write was accepted
   * @throws TypeError when `token` is not a non-negative safe integer
   */
  write(token: number, writer?: string): boolean {
    if (!Number.isSafeInteger(token) || token < 0) {
      throw new TypeError(
        `A fencing token is a non-negative integer, got ${String(token)}`,
      );
    }
    const accepted = token >= this.top;
    this.writeRecords.push({ token, writer, accepted, at: Date.now() });
    if (!accepted) {
      this.rejectedCount++;
      return false;
    }
    this.top = token;
    this.acceptedCount++;
    this.tokens.push(token);
    return true;
  }

  /**
   * `writer` enters its critical section (nesting is allowed: it stays inside
   * until it left as often as it entered).
   *
   * @returns true when somebody else was inside already: an overlap, counted
   */
  enter(writer: string, token?: number): boolean {
    const others = [...this.insideNow].filter(([name]) => name !== writer);
    if (others.length > 0) {
      this.overlapRecords.push({
        writer,
        token,
        inside: others.map(([name, entry]) => ({
          writer: name,
          token: entry.token,
        })),
        at: Date.now(),
      });
    }
    const entry = this.insideNow.get(writer);
    if (entry) entry.depth++;
    else this.insideNow.set(writer, { depth: 1, token });
    this.mostInside = Math.max(this.mostInside, this.insideNow.size);
    return others.length > 0;
  }

  /**
   * `writer` leaves its critical section. Call it for a holder that was killed
   * inside, too, or the next holder to enter counts as an overlap.
   *
   * @throws Error when `writer` is not inside
   */
  leave(writer: string): void {
    const entry = this.insideNow.get(writer);
    if (!entry) throw new Error(`"${writer}" left without being inside`);
    if (--entry.depth === 0) this.insideNow.delete(writer);
  }

  /**
   * Serves this resource over HTTP on a free loopback port so child processes
   * can use it (see {@link fencedResourceClient}); resolves its base URL.
   * Serving again returns the same URL. {@link close} stops it.
   */
  serve(): Promise<string> {
    if (this.server) return Promise.resolve(baseUrl(this.server));
    const server = http.createServer((request, response) =>
      this.handle(request, response),
    );
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port: 0, host: '127.0.0.1' }, () => {
        server.off('error', reject);
        resolve(baseUrl(server));
      });
    });
  }

  /** Stops serving (closing open connections). Idempotent; the counts stay. */
  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    const closed = new Promise<void>((resolve) =>
      server.close(() => resolve()),
    );
    server.closeAllConnections();
    await closed;
  }

  /** `POST /write|/enter|/leave` with a JSON body; answers `{ result }` or `{ error }`. */
  private handle(
    request: http.IncomingMessage,
    response: http.ServerResponse,
  ): void {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      let status = 200;
      let answer: { result?: unknown; error?: string };
      try {
        const args = (body ? JSON.parse(body) : {}) as {
          token?: number;
          writer?: string;
        };
        answer = { result: this.dispatch(request, args) };
      } catch (error) {
        status = error instanceof NotFound ? 404 : 400;
        answer = { error: (error as Error).message };
      }
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(answer));
    });
  }

  private dispatch(
    request: http.IncomingMessage,
    args: { token?: number; writer?: string },
  ): unknown {
    const route = `${request.method} ${request.url}`;
    switch (route) {
      case 'POST /write':
        return this.write(args.token as number, args.writer);
      case 'POST /enter':
        return this.enter(String(args.writer), args.token);
      case 'POST /leave':
        this.leave(String(args.writer));
        return null;
      default:
        throw new NotFound(`No route ${route}`);
    }
  }
}

class NotFound extends Error {}

function baseUrl(server: http.Server): string {
  return `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}
