import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';

/** How long a terminated server session may take to go. */
const SESSION_END_WAIT_MS = 5_000;
const POLL_MS = 10;

/**
 * Terminates the server session `session` (a backend process id) and waits
 * until it is gone, from another connection. Once it is gone, nothing sent on
 * its connection can run any more: a statement it ran either committed
 * before, or never will, so what the database holds then is final.
 *
 * Resolves at once when `session` is this connection's own session too:
 * the server runs every connection in one session (the embedded PGlite),
 * which cannot be terminated. Rejects when the session cannot be terminated
 * (no permission) or outlives {@link SESSION_END_WAIT_MS}.
 */
export async function waitForSessionEnd(
  client: pg.PoolClient,
  session: number,
): Promise<void> {
  const { rows } = await client.query<{ ended: boolean | null }>(
    `select case when pg_backend_pid() = $1 then null
                 else pg_terminate_backend($1) end as ended`,
    [session],
  );
  if (rows[0]?.ended === null) return;
  const deadline = Date.now() + SESSION_END_WAIT_MS;
  for (;;) {
    const { rowCount } = await client.query(
      'select 1 from pg_stat_activity where pid = $1',
      [session],
    );
    if (rowCount === 0) return;
    if (Date.now() > deadline) {
      throw new Error(
        `Server session ${session} was still there ${SESSION_END_WAIT_MS} ms after it was terminated`,
      );
    }
    await sleep(POLL_MS);
  }
}
