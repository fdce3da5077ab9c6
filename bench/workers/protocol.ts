import type {
  ContentionEvents,
  ContentionSpec,
} from '../scenarios/contention-core.js';
import type { DeploymentSliceSpec } from '../scenarios/h-deployments.js';
import type {
  SideBySideOutcome,
  SideBySideSpec,
} from '../scenarios/side-by-side.js';

/** Parent -> worker. */
export type WorkerRequest =
  | {
      readonly id: number;
      readonly type: 'open';
      readonly contenderId: string;
      readonly urls: string[];
    }
  | { readonly id: number; readonly type: 'run'; readonly spec: ContentionSpec }
  | { readonly id: number; readonly type: 'close' }
  | {
      readonly id: number;
      readonly type: 'side-by-side';
      readonly spec: SideBySideSpec;
    }
  | {
      readonly id: number;
      readonly type: 'deployment';
      readonly spec: DeploymentSliceSpec;
    };

/** Worker -> parent: the answer to request `id`. */
export type WorkerReply =
  | {
      readonly id: number;
      readonly ok: true;
      readonly events?: ContentionEvents;
      readonly sideBySide?: SideBySideOutcome;
    }
  | { readonly id: number; readonly ok: false; readonly error: string };
