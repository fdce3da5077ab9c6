import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

import { findExecutable } from './find-executable.js';

/** A throwaway CA and the server certificate it signed, as PEM. */
export interface TlsMaterial {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

const execFileAsync = promisify(execFile);

/**
 * Creates a throwaway CA and a server certificate for 127.0.0.1/localhost
 * (EC P-256, valid for 3 days) with the `openssl` command line tool.
 */
export async function generateTlsMaterial(): Promise<TlsMaterial> {
  const openssl = findExecutable('openssl');
  if (openssl === undefined) {
    throw new Error(
      'Starting a TLS redis-server needs `openssl` on PATH to create a test ' +
        'certificate: install it with `apt-get update && apt-get install -y openssl`.',
    );
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'redis-test-certs-'));
  const run = (args: string[]) => execFileAsync(openssl, args, { cwd: dir });
  const ecKey = [
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
  ];
  try {
    await run([
      'req',
      '-x509',
      ...ecKey,
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      '3',
      '-subj',
      '/CN=redis-server test CA',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ]);
    await run([
      'req',
      ...ecKey,
      '-keyout',
      'server.key',
      '-out',
      'server.csr',
      '-subj',
      '/CN=127.0.0.1',
    ]);
    await writeFile(
      path.join(dir, 'server.ext'),
      [
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
        'basicConstraints=CA:FALSE',
        'keyUsage=critical,digitalSignature',
        'extendedKeyUsage=serverAuth',
        '',
      ].join('\n'),
    );
    await run([
      'x509',
      '-req',
      '-in',
      'server.csr',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-set_serial',
      `0x${randomBytes(8).toString('hex')}`,
      '-days',
      '3',
      '-extfile',
      'server.ext',
      '-out',
      'server.crt',
    ]);
    const [ca, cert, key] = await Promise.all(
      ['ca.crt', 'server.crt', 'server.key'].map((file) =>
        readFile(path.join(dir, file)),
      ),
    );
    return { ca, cert, key };
  } catch (error) {
    const stderr = (error as { stderr?: unknown }).stderr;
    throw new Error(
      `Creating a test TLS certificate with ${openssl} failed` +
        (stderr ? `:\n${String(stderr).trim()}` : ''),
      { cause: error },
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
