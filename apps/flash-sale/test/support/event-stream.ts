import http from 'node:http';
import type { SaleUpdate } from '../../src/web/sale-feed.service.js';

/** An open `GET /api/events`: the parsed events so far, and a way to hang up. */
export interface EventStream {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly updates: SaleUpdate[];
  readonly raw: () => string;
  readonly ended: Promise<void>;
  close(): void;
}

/** Opens the sale's server-sent events at `baseUrl`. */
export function openEvents(baseUrl: string): Promise<EventStream> {
  return new Promise((resolve, reject) => {
    const request = http.get(`${baseUrl}/api/events`, (response) => {
      let text = '';
      const updates: SaleUpdate[] = [];
      const ended = new Promise<void>((done) => {
        response.on('end', done);
        response.on('close', done);
      });
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        text += chunk;
        const blocks = text.split('\n\n');
        text = blocks.pop() ?? '';
        for (const block of blocks) {
          const data = block
            .split('\n')
            .filter((line) => line.startsWith('data: '))
            .map((line) => line.slice('data: '.length))
            .join('\n');
          if (data) updates.push(JSON.parse(data) as SaleUpdate);
        }
      });
      response.on('error', () => undefined);
      resolve({
        status: response.statusCode ?? 0,
        headers: response.headers,
        updates,
        raw: () => text,
        ended,
        close: () => request.destroy(),
      });
    });
    request.on('error', reject);
  });
}
