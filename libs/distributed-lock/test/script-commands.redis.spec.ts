import { createHook } from 'node:async_hooks';
import { Redis } from 'ioredis';
import { defineScripts } from '../src/backends/lua-scripts.js';
import { eventually } from '../../../test/support/lock-fixtures.js';
import { openMonitor } from '../../../test/support/redis-monitor.js';
import {
  startRedisServer,
  type RedisServerHandle,
} from '../../../test/support/redis-server.js';

const table = {
  setAndEcho: {
    numberOfKeys: 1,
    lua: "redis.call('set', KEYS[1], ARGV[1]) return ARGV[1]",
  },
  keyCount: { lua: 'return #KEYS' },
  failing: { numberOfKeys: 1, lua: "return redis.call('incr', KEYS[1])" },
};

let server: RedisServerHandle;
let redis: Redis;
const clients: Redis[] = [];

function client(options: { keyPrefix?: string } = {}): Redis {
  const opened = new Redis(server.url, options);
  clients.push(opened);
  return opened;
}

/** What clients other than the monitor send, as "<verb> <args...>", lower case. */
async function watchCommands(): Promise<{
  sent: string[];
  stop: () => void;
}> {
  const monitor = await openMonitor(redis);
  const sent: string[] = [];
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (!source.includes('lua')) sent.push(args.join(' ').toLowerCase());
  });
  return { sent, stop: () => monitor.disconnect() };
}

beforeAll(async () => {
  server = await startRedisServer();
  redis = new Redis(server.url);
});

afterEach(async () => {
  for (const opened of clients.splice(0)) opened.disconnect();
  await redis.flushall();
  await redis.script('FLUSH');
});

afterAll(async () => {
  redis.disconnect();
  await server.stop();
});

describe('script commands', () => {
  it('send the text once, then only the SHA, and add nothing to the client', async () => {
    const c = client();
    const before = Object.getOwnPropertyNames(c).toSorted();
    const scripts = defineScripts(c, table);
    expect(Object.getOwnPropertyNames(c).toSorted()).toEqual(before);
    const watch = await watchCommands();

    expect(await scripts.setAndEcho('k', 'one')).toBe('one');
    expect(await scripts.setAndEcho('k', 'two')).toBe('two');
    expect(await scripts.setAndEcho('k', 'three')).toBe('three');

    await eventually(() => watch.sent.length === 3);
    watch.stop();
    expect(watch.sent.map((command) => command.split(' ')[0])).toEqual([
      'eval',
      'evalsha',
      'evalsha',
    ]);
    expect(await redis.get('k')).toBe('three');
  });

  it('answer through EVAL when Redis lost the script (NOSCRIPT), and by SHA again after', async () => {
    const scripts = defineScripts(client(), table);
    await scripts.setAndEcho('k', 'cached');
    await redis.script('FLUSH');
    const watch = await watchCommands();

    expect(await scripts.setAndEcho('k', 'after flush')).toBe('after flush');
    expect(await scripts.setAndEcho('k', 'again')).toBe('again');

    await eventually(() => watch.sent.length === 3);
    watch.stop();
    expect(watch.sent.map((command) => command.split(' ')[0])).toEqual([
      'evalsha', // refused with NOSCRIPT
      'eval',
      'evalsha',
    ]);
  });

  it("reject with the script's own error, without sending it again", async () => {
    const scripts = defineScripts(client(), table);
    await redis.set('text', 'not a number');
    await expect(scripts.failing('text')).rejects.toThrow(/not an integer/);
    const watch = await watchCommands();

    await expect(scripts.failing('text')).rejects.toThrow(/not an integer/);

    // A command sent after it, to know that MONITOR reported everything before.
    await redis.ping();
    await eventually(() => watch.sent.includes('ping'));
    watch.stop();
    expect(watch.sent).toEqual([expect.stringMatching(/^evalsha /), 'ping']);
  });

  it("prefix the keys with the client's keyPrefix, and take the key count from the caller when the script has none", async () => {
    const scripts = defineScripts(client({ keyPrefix: 'app:' }), table);
    await scripts.setAndEcho('k', 'prefixed');
    expect(await redis.get('app:k')).toBe('prefixed');
    expect(await redis.exists('k')).toBe(0);

    expect(await scripts.keyCount(3, 'a', 'b', 'c', 'argument')).toBe(3);
  });

  it('prefix the keys once when the text is sent again after NOSCRIPT', async () => {
    const scripts = defineScripts(client({ keyPrefix: 'app:' }), table);
    await scripts.setAndEcho('k', 'cached');
    await redis.script('FLUSH');

    expect(await scripts.setAndEcho('k', 'after flush')).toBe('after flush');
    expect(await scripts.keyCount(2, 'a', 'b', 'argument')).toBe(2);
    await redis.script('FLUSH');
    expect(await scripts.keyCount(2, 'a', 'b', 'argument')).toBe(2);

    expect(await redis.get('app:k')).toBe('after flush');
    expect(await redis.keys('*')).toEqual(['app:k']);
  });

  it('make one promise per call, the command’s own', async () => {
    const scripts = defineScripts(client(), table);
    await scripts.setAndEcho('k', 'warm');
    let promises = 0;
    const hook = createHook({
      init: (_id, type) => {
        if (type === 'PROMISE') promises += 1;
      },
    });

    hook.enable();
    const reply = scripts.setAndEcho('k', 'counted');
    hook.disable();

    expect(promises).toBe(1);
    expect(await reply).toBe('counted');
  });
});
