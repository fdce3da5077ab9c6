import http from 'node:http';

/**
 * The HTTP client of a served FencedResource (fenced-resource.ts), for child
 * processes: `POST /write`, `/enter`, `/leave` with a JSON body, answered
 * `{ result }` or, with a 4xx status, `{ error }`.
 */

/** What {@link fencedResourceClient} returns: the resource's operations over HTTP. */
export interface FencedResourceClient {
  write(token: number, writer?: string): Promise<boolean>;
  enter(writer: string, token?: number): Promise<boolean>;
  leave(writer: string): Promise<void>;
}

/**
 * Client for a served `FencedResource` (for child processes): the same
 * write/enter/leave, async, over HTTP. A call rejects when the resource
 * rejected it as invalid (a bad token, leaving without being inside) or could
 * not be reached.
 */
export function fencedResourceClient(url: string): FencedResourceClient {
  const call = (route: string, args: object) =>
    post(new URL(route, url), JSON.stringify(args));
  return {
    write: async (token, writer) =>
      (await call('/write', { token, writer })) as boolean,
    enter: async (writer, token) =>
      (await call('/enter', { writer, token })) as boolean,
    leave: async (writer) => {
      await call('/leave', { writer });
    },
  };
}

function post(url: URL, body: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('error', reject);
        response.on('end', () => {
          try {
            const answer = JSON.parse(text) as {
              result?: unknown;
              error?: string;
            };
            if (response.statusCode === 200) resolve(answer.result);
            else
              reject(
                new Error(`${url.pathname} failed: ${answer.error ?? text}`),
              );
          } catch (error) {
            reject(error as Error);
          }
        });
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}
