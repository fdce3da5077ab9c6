/** DistributedLockModule rejects bad options at startup. */
import { Test } from '@nestjs/testing';
import { DistributedLockModule } from '@app/distributed-lock';
import { useModuleServer } from './module-server-fixture.js';

const fixture = useModuleServer();

describe('option validation', () => {
  it.each([
    ['negative waitTime', { waitTime: -1 }, /waitTime/],
    ['keyPrefix with braces', { keyPrefix: 'app:{tenant}:' }, /keyPrefix/],
    ['commandTimeout 0', { commandTimeout: 0 }, /commandTimeout/],
    ['negative localHandoffs', { localHandoffs: -1 }, /localHandoffs/],
    ['fractional localHandoffs', { localHandoffs: 1.5 }, /localHandoffs/],
    [
      'negative localHandoffWindow',
      { localHandoffWindow: -1 },
      /localHandoffWindow/,
    ],
    [
      'cluster together with redis',
      { cluster: [{ host: '127.0.0.1', port: 1 }] },
      /either cluster or redis/,
    ],
    ['sessionTtl below 300 ms', { sessionTtl: 100 }, /sessionTtl/],
    [
      'freeOnDisconnect with sessions off',
      { freeOnDisconnect: true, sessionTtl: false },
      /freeOnDisconnect needs .* not sessionTtl: false/,
    ],
    [
      'freeOnDisconnect on a quorum',
      {
        freeOnDisconnect: true,
        nodes: [
          'redis://127.0.0.1:1',
          'redis://127.0.0.1:2',
          'redis://127.0.0.1:3',
        ],
      },
      /freeOnDisconnect needs .* not nodes|either nodes/,
    ],
    [
      'replicaAcks on a quorum',
      {
        replicaAcks: { replicas: 1 },
        nodes: [
          'redis://127.0.0.1:1',
          'redis://127.0.0.1:2',
          'redis://127.0.0.1:3',
        ],
      },
      /replicaAcks|nodes/,
    ],
  ] as const)(
    'rejects %s at startup with a RangeError',
    async (_name, options, message) => {
      const compiling = Test.createTestingModule({
        imports: [
          DistributedLockModule.forRoot({
            redis: fixture.server.url,
            ...options,
          }),
        ],
      }).compile();
      const error = await compiling.then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(RangeError);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).toMatch(/DistributedLockModule/);
    },
  );

  it('rejects bad options from forRootAsync at startup too', async () => {
    const compiling = Test.createTestingModule({
      imports: [
        DistributedLockModule.forRootAsync({
          useFactory: async () => ({ redis: fixture.server.url, waitTime: -5 }),
        }),
      ],
    }).compile();
    await expect(compiling).rejects.toThrow(RangeError);
  });
});
