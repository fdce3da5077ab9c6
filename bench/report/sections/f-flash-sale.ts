import {
  pendingMessage,
  flashSaleLoadTool,
  type FlashSaleResult,
} from '../../scenarios/f-flash-sale.js';
import { int, ms, table, withRatio } from '../format.js';

/** F: the flash-sale app under load, with and without the per-coupon lock. */
export function flashSaleSection(f: FlashSaleResult): string[] {
  const out: string[] = [];
  out.push('## F. Flash-sale app, 3 instances', '');
  if (f.status === 'pending') {
    out.push(
      `${pendingMessage}. F runs once \`${flashSaleLoadTool}\` exists and exports \`runLoadTest(options)\` (the contract F relies on is in \`bench/scenarios/f-flash-sale.ts\`).`,
      '',
    );
  } else if (f.status === 'skipped' || f.status === 'failed') {
    out.push(`${f.status === 'failed' ? 'Failed: ' : ''}${f.message}`, '');
    if (f.detail) out.push('```text', f.detail, '```', '');
  } else {
    const o = f.options!;
    out.push(
      `The app's load tool (\`${flashSaleLoadTool}\`) starts ${o.instances} app instances (separate processes) on one private Redis and one database, and sells a coupon of ${int(o.couponStock)} units to ${int(o.users)} users with ${int(o.requests)} requests, ${o.concurrency} in flight. Each mode ran ${f.runs!.length / 2} time(s), alternating; medians. "Script alone" is the same sale with \`SECKILL_LOCK=off\`: the atomic Redis script still guards the stock.`,
      '',
      table(
        ['mode', 'requests/s (x script alone)', 'p50 ms', 'p99 ms'],
        [
          [
            'per-coupon lock',
            withRatio(
              f.lockRequestsPerSec ?? NaN,
              f.scriptOnlyRequestsPerSec ?? NaN,
              int,
            ),
            withRatio(f.lockP50Ms ?? NaN, f.scriptOnlyP50Ms ?? NaN, ms),
            withRatio(f.lockP99Ms ?? NaN, f.scriptOnlyP99Ms ?? NaN, ms),
          ],
          [
            'script alone',
            int(f.scriptOnlyRequestsPerSec ?? NaN),
            ms(f.scriptOnlyP50Ms ?? NaN),
            ms(f.scriptOnlyP99Ms ?? NaN),
          ],
        ],
        ['l', 'r', 'r', 'r'],
      ),
      '',
      table(
        [
          'run',
          'mode',
          'requests/s',
          'p99 ms',
          'answers',
          'errors',
          'invariants',
        ],
        f.runs!.map((run, i) => [
          String(i + 1),
          run.lock ? 'per-coupon lock' : 'script alone',
          int(run.requestsPerSec),
          ms(run.p99Ms),
          Object.entries(run.statuses)
            .map(([status, n]) => `${status}: ${n}`)
            .join(', '),
          int(run.errors),
          run.invariantsHeld ? 'held' : '**BROKEN**',
        ]),
        ['r', 'l', 'r', 'r', 'l', 'r', 'l'],
      ),
      '',
    );
  }
  return out;
}
