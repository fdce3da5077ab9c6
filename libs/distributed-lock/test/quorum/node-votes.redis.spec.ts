import { askEveryNode } from '../../src/backends/quorum/node-votes.js';
import { blockUntilAnswersArrive } from '../../../../test/support/socket-queue.js';
import { useQuorumNodes } from './quorum-fixtures.js';

const nodes = useQuorumNodes({ three: true, look: 'three' });

describe('askEveryNode when the caller itself stalls', () => {
  it('counts answers that arrived while its own event loop was blocked past the timeout', async () => {
    const clients = nodes.look;
    const round = askEveryNode(3, (node) => clients[node].ping(), 50);
    // The PINGs are on the wire; the nodes answer within a millisecond, but
    // this process reads nothing until the block ends, and by then the
    // round's timer is overdue too. The nodes were not late: the caller was.
    blockUntilAnswersArrive(200, clients);
    const { replies, silent } = await round;
    expect(replies.map((reply) => reply.value)).toEqual([
      'PONG',
      'PONG',
      'PONG',
    ]);
    expect(silent).toBe(0);
  });

  it('still gives up on a node that did not answer in time', async () => {
    const clients = nodes.look;
    const startedAt = performance.now();
    const round = await askEveryNode(
      3,
      (node) =>
        node === 2
          ? new Promise<string>(() => undefined)
          : clients[node].ping(),
      50,
    );
    expect(round.replies.map((reply) => reply.node).toSorted()).toEqual([0, 1]);
    expect(round.silent).toBe(1);
    expect(String(round.firstError)).toContain('no answer within 50 ms');
    expect(performance.now() - startedAt).toBeLessThan(1_000);
  });
});
