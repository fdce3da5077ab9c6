/**
 * `minHoldTime` and `onBusy: 'skip'` in quorum mode (`nodes`, three Redis
 * masters): the key is left on every node to expire minHoldTime after the
 * acquisition (a session hold's lease goes out with the next renewal batch,
 * so it may stay a little longer, never shorter), and a second instance
 * skips until then.
 */
import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import { DistributedLock, DistributedLockModule } from '@app/distributed-lock';
import { eventually, sleep } from '../../../../test/support/lock-fixtures.js';
import type { RedisServerHandle } from '../../../../test/support/redis-server.js';
import { startNodes } from '../quorum/quorum-fixtures.js';

const holdMs = 1_000;

@Injectable()
class Job {
  @DistributedLock('job:quorum', { onBusy: 'skip', minHoldTime: holdMs })
  async run(): Promise<string> {
    return 'ran';
  }
}

let servers: RedisServerHandle[];
let observers: Redis[];
const apps: TestingModule[] = [];

beforeAll(async () => {
  servers = await startNodes(3);
  observers = servers.map((server) => new Redis(server.url));
  for (let i = 0; i < 2; i++) {
    const app = await Test.createTestingModule({
      imports: [
        DistributedLockModule.forRoot({
          nodes: servers.map((server) => server.url),
        }),
      ],
      providers: [Job],
    }).compile();
    await app.init();
    apps.push(app);
  }
});

afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()));
  for (const observer of observers ?? []) observer.disconnect();
  await Promise.all((servers ?? []).map((server) => server.stop()));
});

const pttls = () =>
  Promise.all(observers.map((o) => o.pttl('lock:{job:quorum}')));

it('leaves the key on every node until minHoldTime after acquisition; the other instance skips meanwhile', async () => {
  const [first, second] = apps.map((app) => app.get(Job));
  const calledAt = Date.now();
  expect(await first.run()).toBe('ran');
  expect(await second.run()).toBeUndefined();
  // The renewal batch sends the short lease within a tenth of it.
  await sleep(holdMs / 5);
  for (const left of await pttls()) {
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(holdMs);
  }
  expect(await second.run()).toBeUndefined();
  await eventually(async () => (await second.run()) === 'ran', 3_000);
  expect(Date.now() - calledAt).toBeGreaterThanOrEqual(holdMs - 10);
  expect(Date.now() - calledAt).toBeLessThan(holdMs + 1_000);
});
