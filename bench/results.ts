import type { BenchConfig } from './config.js';
import type { ContentionResult } from './scenarios/c-contention.js';
import type { QuorumResult } from './scenarios/d-quorum.js';
import type { ServerCeilingResult } from './scenarios/e-server.js';
import type { FlashSaleResult } from './scenarios/f-flash-sale.js';
import type { SoakResult } from './scenarios/g-soak.js';
import type { DeploymentsResult } from './scenarios/h-deployments.js';
import type { SemaphoreResult } from './scenarios/i-semaphore.js';
import type { ReadWriteResult } from './scenarios/j-rwlock.js';
import type { UncontendedResult } from './scenarios/uncontended.js';

export interface MachineInfo {
  readonly cpu: string;
  readonly cores: number;
  readonly memoryGiB: number;
  readonly os: string;
  readonly node: string;
  readonly redis: string;
  readonly loadAtStart: readonly number[];
  readonly loadAtEnd: readonly number[];
}

/** Everything one run measured; written as JSON beside the report. */
export interface BenchResults {
  readonly mode: BenchConfig['mode'];
  readonly startedAt: string;
  readonly durationSec: number;
  readonly command: string;
  readonly scenarios: readonly string[];
  readonly machine: MachineInfo;
  readonly versions: Record<string, string>;
  readonly contenders: readonly { id: string; label: string; detail: string }[];
  readonly config: BenchConfig;
  readonly A?: UncontendedResult;
  readonly B?: UncontendedResult;
  readonly C?: ContentionResult;
  readonly D?: QuorumResult;
  readonly E?: ServerCeilingResult;
  readonly F?: FlashSaleResult;
  readonly G?: SoakResult;
  readonly H?: DeploymentsResult;
  readonly I?: SemaphoreResult;
  readonly J?: ReadWriteResult;
  /** Failures of the harness or of a contender, one line each. */
  readonly errors: readonly string[];
}
