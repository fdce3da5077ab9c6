import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import path from 'node:path';

/**
 * Finding command line tools (`redis-server`, `openssl`) the test helpers run.
 */

const FALLBACK_BIN_DIRS = ['/usr/local/bin', '/usr/bin', '/usr/sbin', '/bin'];

export function findExecutable(command: string): string | undefined {
  if (command.includes('/')) {
    return isExecutableFile(command) ? path.resolve(command) : undefined;
  }
  const dirs = (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter(Boolean)
    .concat(FALLBACK_BIN_DIRS);
  for (const dir of dirs) {
    const candidate = path.join(dir, command);
    if (isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

function isExecutableFile(file: string): boolean {
  try {
    accessSync(file, fsConstants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}
