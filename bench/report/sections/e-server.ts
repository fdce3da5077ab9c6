import type { ServerCeilingResult } from '../../scenarios/e-server.js';
import { int, ms, num, table } from '../format.js';

/** E: the server's own ceiling, and its time per verb. */
export function serverSection(e: ServerCeilingResult): string[] {
  const out: string[] = [];
  out.push(
    '## E. The server’s own ceiling',
    '',
    `\`redis-benchmark\` against the same private server, ${int(e.requests)} requests per row, random keys.`,
    '',
  );
  if (e.error) out.push(`Failed: ${e.error}`, '');
  out.push(
    table(
      ['command', 'connections', 'requests/s', 'p50 ms'],
      e.rows.map((row) => [
        row.command,
        String(row.clients),
        int(row.requestsPerSec),
        ms(row.p50Ms),
      ]),
      ['l', 'r', 'r', 'r'],
    ),
    '',
    `A lock cycle of one SET and one EVALSHA on one connection can reach at most about **${int(e.twoTripCycleCeiling)} cycles/s** here (1 / (1/SET + 1/EVALSHA) at one connection).`,
    '',
  );
  const st = e.serverTime;
  if (st) {
    out.push(
      '### Server time per verb',
      '',
      `What each top-level command costs Redis itself, from \`SLOWLOG\` at threshold 0 over ${int(st.cycles)} uncontended cycles of each lock on warm keys (commands run inside a script are part of its figure). Ours takes a free key with the same bare \`SET NX PX\`; its release also checks the wait queue (a queue is served by a second script, not run here). Every second cycle here asks for its fencing token with the grant (\`fence: true\`), which takes the key with the acquire script instead, issuing the token in the same step. The raw baseline has neither.`,
      '',
      table(
        ['command', 'calls', 'mean µs', 'p50 µs'],
        st.rows.map((row) => [
          row.verb,
          int(row.calls),
          num(row.meanUs, 1),
          num(row.p50Us, 0),
        ]),
        ['l', 'r', 'r', 'r'],
      ),
      '',
      `Server time per cycle: raw ${num(st.rawCycleUs, 1)} µs, ours ${num(st.oursCycleUs, 1)} µs (+${num(st.oursCycleUs - st.rawCycleUs, 1)} µs).`,
      '',
    );
  }
  return out;
}
