import { allScriptsLoaded, type LockBackendHealth } from '../backend-health.js';
import { ProbedScripts, probeRedisNode } from '../redis/node-probe.js';
import type { ResolvedQuorumOptions } from './quorum-options.js';
import { quorumScriptSources } from './quorum-scripts.js';
import type { RestartGuard } from './restart-guard.js';

const quorumScripts = new ProbedScripts(quorumScriptSources);

/**
 * The probe of `QuorumLockBackend`: every node at once, each bounded by
 * `timeoutMs`. Up while a majority of the nodes answer and their votes
 * count (a node seen to restart answers, yet sits out the longest lease:
 * with a majority of such nodes no lock can be taken). Never rejects.
 */
export async function probeQuorum(
  target: Pick<ResolvedQuorumOptions, 'nodes' | 'quorum'>,
  guard: RestartGuard,
  closed: boolean,
  timeoutMs: number,
): Promise<LockBackendHealth> {
  const { quorum } = target;
  if (closed)
    return {
      up: false,
      store: 'quorum',
      quorum,
      nodes: [],
      message: 'the backend is closed',
    };
  const nodes = await Promise.all(
    target.nodes.map(async (client, index) => ({
      ...(await probeRedisNode(client, quorumScripts, timeoutMs)),
      votes: guard.counts(index),
    })),
  );
  const voting = nodes.filter((node) => node.up && node.votes);
  const up = voting.length >= quorum;
  const latencies = voting
    .map((node) => node.latencyMs ?? 0)
    .toSorted((a, b) => a - b);
  return {
    up,
    store: 'quorum',
    latencyMs: up ? latencies[quorum - 1] : undefined,
    scriptsLoaded: allScriptsLoaded(nodes),
    quorum,
    nodes,
    ...(up
      ? {}
      : {
          message: `${voting.length} of ${nodes.length} nodes answer and vote, ${quorum} needed`,
        }),
  };
}
