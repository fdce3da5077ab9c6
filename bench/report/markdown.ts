import type { BenchResults } from '../results.js';
import { contentionSection } from './sections/c-contention.js';
import { quorumSection } from './sections/d-quorum.js';
import { serverSection } from './sections/e-server.js';
import { flashSaleSection } from './sections/f-flash-sale.js';
import { soakSection } from './sections/g-soak.js';
import { deploymentsSection } from './sections/h-deployments.js';
import { semaphoreSection } from './sections/i-semaphore.js';
import { readWriteSection } from './sections/j-rwlock.js';
import { introSection } from './sections/intro.js';
import { uncontendedSections } from './sections/uncontended.js';

export { deploymentsTable } from './sections/h-deployments.js';
export { jsonName } from './sections/intro.js';

/**
 * The Markdown report of a run: the opening (targets, method, machine), then a
 * section per scenario that ran, in the order A-J. Each section's text is in
 * `./sections/`, the number and table formatting in `./format.ts`.
 */
export function renderMarkdown(r: BenchResults, chartFile: string): string {
  const out = [
    ...introSection(r),
    ...uncontendedSections(r),
    ...(r.C ? contentionSection(r.C, chartFile) : []),
    ...(r.D ? quorumSection(r.D) : []),
    ...(r.E ? serverSection(r.E) : []),
    ...(r.F ? flashSaleSection(r.F) : []),
    ...(r.G ? soakSection(r.G) : []),
    ...(r.H ? [deploymentsSection(r.H)] : []),
    ...(r.I ? semaphoreSection(r.I) : []),
    ...(r.J ? readWriteSection(r.J) : []),
  ];
  return `${out.join('\n').trimEnd()}\n`;
}
