/**
 * The load test's child processes (`spawnGuarded`): what a process wrote
 * just before it died is in its tail once `exited` resolves, which is what
 * an instance that fails during startup reports.
 */
import { spawnGuarded } from '../loadtest/child-process.js';

describe('spawnGuarded', () => {
  it('has every line a process wrote before it died, the unfinished last one too, once it has exited', async () => {
    const proc = spawnGuarded(
      [
        '-e',
        "process.stdout.write('started\\n'); process.stderr.write('x'.repeat(200000) + '\\nfailed: no database'); process.exit(1)",
      ],
      { ...process.env },
    );
    const { code } = await proc.exited;
    expect(code).toBe(1);
    expect(proc.hasExited()).toBe(true);
    expect(proc.tail()).toContain('started');
    expect(proc.tail().endsWith('failed: no database')).toBe(true);
  });
});
