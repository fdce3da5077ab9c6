import http from 'node:http';

/** What one request ended with. */
export type Outcome =
  | {
      readonly kind: 'response';
      readonly status: number;
      /** The error `code` of the body (`SOLD_OUT`, `BUSY`, ...), if any. */
      readonly code?: string;
      /** `orderId` of a success body. */
      readonly orderId?: number;
      readonly latencyMs: number;
    }
  | {
      readonly kind: 'error';
      /** `ECONNREFUSED`, `ECONNRESET`, `timeout`, ... */
      readonly error: string;
      readonly latencyMs: number;
    };

const MAX_BODY = 64 * 1024;
const IDLE_SOCKET_TIMEOUT_MS = 2_000;

/**
 * An HTTP/1.1 client for one instance: keep-alive connections (up to
 * `maxSockets`), every request bounded by `timeoutMs` (then destroyed and
 * counted as an error, never left hanging).
 */
export class InstanceClient {
  private readonly agent: http.Agent;

  constructor(
    readonly port: number,
    maxSockets: number,
    private readonly timeoutMs: number,
  ) {
    this.agent = new http.Agent({
      keepAlive: true,
      maxSockets,
      maxFreeSockets: maxSockets,
      // Close idle connections well before the server does (Node's default
      // keepAliveTimeout is 5 s): reusing one the server is closing at that
      // moment fails with ECONNRESET, more likely on a loaded machine.
      timeout: IDLE_SOCKET_TIMEOUT_MS,
    });
  }

  /** POST /api/coupon/seckill/:couponId as `userId`. */
  buy(couponId: number, userId: string): Promise<Outcome> {
    return this.send('POST', `/api/coupon/seckill/${couponId}`, { userId });
  }

  /** A JSON request; resolves the status and parsed body, rejects on a transport error. */
  async json(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; body: unknown }> {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const result = await this.raw(method, path, headers, text);
    if ('error' in result)
      throw new Error(`${method} ${path}: ${result.error}`);
    return { status: result.status, body: parse(result.text) };
  }

  close(): void {
    this.agent.destroy();
  }

  private async send(
    method: string,
    path: string,
    headers: Record<string, string>,
  ): Promise<Outcome> {
    const started = performance.now();
    const result = await this.raw(method, path, headers);
    const latencyMs = performance.now() - started;
    if ('error' in result)
      return { kind: 'error', error: result.error, latencyMs };
    const body = parse(result.text) as
      { code?: unknown; orderId?: unknown } | undefined;
    return {
      kind: 'response',
      status: result.status,
      code: typeof body?.code === 'string' ? body.code : undefined,
      orderId: typeof body?.orderId === 'number' ? body.orderId : undefined,
      latencyMs,
    };
  }

  private raw(
    method: string,
    path: string,
    headers: Record<string, string>,
    body?: string,
  ): Promise<{ status: number; text: string } | { error: string }> {
    return new Promise((resolve) => {
      let settled = false;
      const finish = (
        value: { status: number; text: string } | { error: string },
      ) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(value);
      };
      const request = http.request(
        {
          host: '127.0.0.1',
          port: this.port,
          method,
          path,
          agent: this.agent,
          headers: {
            ...headers,
            ...(body === undefined
              ? { 'content-length': '0' }
              : {
                  'content-type': 'application/json',
                  'content-length': String(Buffer.byteLength(body)),
                }),
          },
        },
        (response) => {
          let text = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => {
            if (text.length < MAX_BODY) text += chunk;
          });
          response.once('end', () =>
            finish({ status: response.statusCode ?? 0, text }),
          );
          response.once('error', (error) =>
            finish({ error: errorName(error) }),
          );
        },
      );
      const timer = setTimeout(() => {
        finish({ error: 'timeout' });
        request.destroy(new Error('timeout'));
      }, this.timeoutMs);
      request.once('error', (error) => finish({ error: errorName(error) }));
      request.end(body);
    });
  }
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function errorName(error: Error): string {
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') return code;
  if (/hang up/i.test(error.message)) return 'ECONNRESET';
  return error.message || error.name;
}
