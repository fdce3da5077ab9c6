import type {
  ContentionEvents,
  ContentionSpec,
} from '../scenarios/contention-core.js';

/** Parent -> worker. */
export type WorkerRequest =
  | {
      readonly id: number;
      readonly type: 'open';
      readonly contenderId: string;
      readonly urls: string[];
    }
  | { readonly id: number; readonly type: 'run'; readonly spec: ContentionSpec }
  | { readonly id: number; readonly type: 'close' };

/** Worker -> parent: the answer to request `id`. */
export type WorkerReply =
  | {
      readonly id: number;
      readonly ok: true;
      readonly events?: ContentionEvents;
    }
  | { readonly id: number; readonly ok: false; readonly error: string };
