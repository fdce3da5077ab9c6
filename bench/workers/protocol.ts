import type { Deployment, DeploymentSide } from '../contenders/deployments.js';
import type {
  ContentionEvents,
  ContentionSpec,
} from '../scenarios/contention-core.js';
import type { TurnLatencies, TurnSpec, TurnTally } from './turn-runner.js';

/** Opens the worker's one instance: a contender, or one side of H's pair on a deployment. */
export type OpenRequest =
  | {
      readonly type: 'open';
      readonly contenderId: string;
      readonly urls: string[];
    }
  | {
      readonly type: 'open-deployment';
      readonly side: DeploymentSide;
      readonly deployment: Deployment;
    };

/** Parent -> worker. */
export type WorkerRequest = { readonly id: number } & (
  | OpenRequest
  /** C: one contention window on the open instance. */
  | { readonly type: 'run'; readonly spec: ContentionSpec }
  /** A, B, D, H: one turn on the open instance. */
  | { readonly type: 'turn'; readonly spec: TurnSpec }
  /** The latencies of the measured turns since the instance opened. */
  | { readonly type: 'turn-latencies' }
  | { readonly type: 'close' }
);

/** Worker -> parent: the answer to request `id`. */
export type WorkerReply =
  | {
      readonly id: number;
      readonly ok: true;
      readonly events?: ContentionEvents;
      readonly turn?: TurnTally;
      readonly latencies?: TurnLatencies;
    }
  | { readonly id: number; readonly ok: false; readonly error: string };
