import { Cluster } from 'ioredis';
import type { DistributedLockModuleOptions } from '@app/distributed-lock';
import { connectIoredis } from './clients.js';
import { rawLockOn, rawQuorumOn } from './raw.js';
import type { ContenderInstance } from './types.js';

/** A server address, as ioredis takes it for Sentinels and Cluster nodes. */
export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/**
 * Where H runs a pair of locks; plain data, sent to the worker process that
 * runs them.
 */
export type Deployment =
  | { readonly kind: 'single'; readonly url: string }
  | {
      readonly kind: 'sentinel';
      readonly sentinels: readonly HostPort[];
      readonly name: string;
      /** The master the Sentinels name now: the raw lock's server. */
      readonly masterUrl: string;
    }
  | { readonly kind: 'cluster'; readonly startupNodes: readonly HostPort[] }
  | { readonly kind: 'quorum'; readonly urls: readonly string[] };

/** The two locks of each deployment in H. */
export type DeploymentSide = 'raw' | 'ours';

/** Our module options for `deployment`, all else at the module defaults. */
export function oursOptions(
  deployment: Deployment,
): DistributedLockModuleOptions {
  switch (deployment.kind) {
    case 'single':
      return { redis: deployment.url };
    case 'sentinel':
      return {
        redis: {
          sentinels: deployment.sentinels.map(({ host, port }) => ({
            host,
            port,
          })),
          name: deployment.name,
        },
      };
    case 'cluster':
      return { cluster: deployment.startupNodes.map((node) => ({ ...node })) };
    case 'quorum':
      return { nodes: [...deployment.urls] };
  }
}

/**
 * Opens one side of H's pair on `deployment`: ours is `LockService` at the
 * module defaults with {@link oursOptions}; raw is the raw baseline on a
 * plain ioredis client to the same master (Sentinel: the master the group
 * names, connected directly), on an ioredis `Cluster` for the Cluster, and
 * the raw quorum baseline over the same servers for quorum. Our module is
 * imported for our side only: the raw side's process never loads it.
 */
export async function openOnDeployment(
  side: DeploymentSide,
  deployment: Deployment,
): Promise<ContenderInstance> {
  if (side === 'ours') {
    const { lockServiceOn } = await import('./ours.js');
    return lockServiceOn(oursOptions(deployment));
  }
  switch (deployment.kind) {
    case 'single':
      return rawLockOn(await connectIoredis(deployment.url));
    case 'sentinel':
      return rawLockOn(await connectIoredis(deployment.masterUrl));
    case 'cluster':
      return rawLockOn(await connectCluster(deployment.startupNodes));
    case 'quorum':
      return rawQuorumOn(deployment.urls);
  }
}

/** An ioredis Cluster client at its defaults, errors swallowed, ready once the slots are known. */
async function connectCluster(nodes: readonly HostPort[]): Promise<Cluster> {
  const client = new Cluster(
    nodes.map(({ host, port }) => ({ host, port })),
    { lazyConnect: true },
  );
  client.on('error', () => undefined);
  await client.connect();
  return client;
}
