/**
 * A failed scenario is reported by its error's first line; the lines after
 * it (an app instance's last output, say) are its cause and must reach the
 * report too.
 */
import { errorDetail, errorText } from '../../bench/scenarios/context.js';

describe('a failure in the report', () => {
  const failure = new Error(
    'Instance 2 (port 1) exited during startup (code 1). Its last lines:\nstarting\n\nCannot start: the database refused the connection',
  );

  it('is named by its first line', () => {
    expect(errorText(failure)).toBe(
      'Instance 2 (port 1) exited during startup (code 1). Its last lines:',
    );
  });

  it('keeps the lines after it, empty ones left out', () => {
    expect(errorDetail(failure)).toBe(
      'starting\nCannot start: the database refused the connection',
    );
  });

  it('keeps only the last lines of a long tail', () => {
    const tail = Array.from({ length: 50 }, (_, i) => `line ${i + 1}`);
    const detail = errorDetail(new Error(['failed', ...tail].join('\n')), 30);
    expect(detail?.split('\n')).toEqual(tail.slice(-30));
  });

  it('has no detail when the message is one line', () => {
    expect(errorDetail(new Error('failed'))).toBeUndefined();
  });
});
