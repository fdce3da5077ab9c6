import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const requireFromRoot = createRequire(path.join(repoRoot, 'package.json'));

/** The installed version of a package (or npm alias), read from its package.json. */
export function installedVersion(name: string): string {
  try {
    const file = path.join(repoRoot, 'node_modules', name, 'package.json');
    return (JSON.parse(readFileSync(file, 'utf8')) as { version: string })
      .version;
  } catch {
    try {
      const file = requireFromRoot.resolve(`${name}/package.json`);
      return (JSON.parse(readFileSync(file, 'utf8')) as { version: string })
        .version;
    } catch {
      return 'unknown';
    }
  }
}
