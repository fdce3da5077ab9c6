import type { Redis } from 'ioredis';

/** CPU seconds (user + system) the Redis server behind `admin` has used so far (`INFO cpu`). */
export async function serverCpuSeconds(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  const field = (name: string) =>
    Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return field('used_cpu_user') + field('used_cpu_sys');
}
