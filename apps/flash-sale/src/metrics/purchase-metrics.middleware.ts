import { Injectable, type NestMiddleware } from '@nestjs/common';
import { PurchaseTracker } from './purchase-tracker.js';

interface PurchaseRequest {
  readonly originalUrl?: string;
  readonly url?: string;
}

interface PurchaseResponse {
  statusCode: number;
  json(body: unknown): unknown;
  once(event: 'finish' | 'close', listener: () => void): unknown;
}

const COUPON_IN_PATH = /\/api\/coupon\/seckill\/([1-9][0-9]{0,15})(?:[/?]|$)/;

/**
 * Times every purchase request and counts it by outcome
 * (`flash_sale_purchases_total`, `flash_sale_purchase_seconds` on
 * `/metrics`). A middleware rather than an interceptor: it also sees the
 * answers given before the handler runs (the pre-check guard's sold out and
 * already bought, the pipes' 400s). The outcome is the status plus the error
 * `code` of the JSON body, read as the app sends it.
 */
@Injectable()
export class PurchaseMetricsMiddleware implements NestMiddleware {
  constructor(private readonly tracker: PurchaseTracker) {}

  use(request: PurchaseRequest, response: PurchaseResponse, next: () => void) {
    const path = request.originalUrl ?? request.url ?? '';
    const couponId = COUPON_IN_PATH.exec(path)?.[1] ?? 'invalid';
    const done = this.tracker.start(couponId);
    let code: string | undefined;
    const sendJson = response.json.bind(response);
    response.json = (body: unknown) => {
      const candidate = (body as { code?: unknown } | null)?.code;
      if (typeof candidate === 'string') code = candidate;
      return sendJson(body);
    };
    response.once('finish', () => done(response.statusCode, code));
    // A client that hangs up before the answer: counted as an error.
    response.once('close', () => done(0));
    next();
  }
}
