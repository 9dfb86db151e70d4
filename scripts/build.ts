/**
 * `npm run build`: the package as it ships. ESM JavaScript and `.d.ts` of src/ and machines/ into dist/ (by
 * tsconfig.build.json), the Redis store's Lua scripts and the service's pages copied beside the code that reads them, the CLIs made
 * executable. Nothing of tests, tools/ or examples/ is built.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const dist = join(root, 'dist');

rmSync(dist, { recursive: true, force: true });
const tsc = spawnSync(join(root, 'node_modules', '.bin', 'tsc'), ['-p', join(root, 'tsconfig.build.json')], {
  stdio: 'inherit',
});
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
cpSync(join(root, 'src', 'store', 'redis', 'lua'), join(dist, 'src', 'store', 'redis', 'lua'), { recursive: true });
// The service's pages (HTML, CSS and browser JavaScript, served as they are by statechart-agent/fastify).
cpSync(join(root, 'src', 'http', 'pages'), join(dist, 'src', 'http', 'pages'), { recursive: true });

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { bin: Record<string, string> };
for (const bin of Object.values(pkg.bin)) {
  const file = join(root, bin);
  if (!existsSync(file)) throw new Error(`bin ${bin} was not built`);
  if (!readFileSync(file, 'utf8').startsWith('#!/usr/bin/env node'))
    throw new Error(`bin ${bin} has no #!/usr/bin/env node line`);
  chmodSync(file, 0o755);
}
console.log(`built ${dist}`);
