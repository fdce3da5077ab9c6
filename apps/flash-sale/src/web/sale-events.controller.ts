import { Controller, Req, Sse, type MessageEvent } from '@nestjs/common';
import type { Observable } from 'rxjs';
import { SaleFeed, type StreamResponse } from './sale-feed.service.js';

@Controller('api')
export class SaleEventsController {
  constructor(private readonly feed: SaleFeed) {}

  /**
   * `GET /api/events`: server-sent events, each a JSON snapshot of the sale
   * (`{ ok: true, at, coupons, orders }`, or `{ ok: false, at, message }`
   * while a backend is down), sent at once and then whenever it changes.
   */
  @Sse('events')
  events(@Req() request: { res?: StreamResponse }): Observable<MessageEvent> {
    // Express links the response to the request; the feed waits for it at shutdown.
    return this.feed.events(request.res);
  }
}
