/**
 * `npm run test:durations`: the whole suite once with vitest's JSON report, then test/support/fileSeconds.json (each
 * file's seconds, the order `npm test` runs them in: test/support/longestFirst.ts) and a summary on stdout: the wall
 * time, the sum of the files' seconds and the longest files. `--from PATH` reads a report written before instead
 * of running the suite (`npx vitest run --reporter=json --outputFile=PATH`).
 *
 * A run on a loaded machine inflates every figure; the order only needs their ratios.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const TABLE = join(ROOT, 'test', 'support', 'fileSeconds.json');

interface Report {
  startTime: number;
  testResults: { name: string; startTime: number; endTime: number; status: string }[];
}

const args = process.argv.slice(2);
const fromAt = args.indexOf('--from');
let reportFile = fromAt >= 0 ? args[fromAt + 1] : undefined;
let wallSeconds: number | undefined;
if (!reportFile) {
  reportFile = join(mkdtempSync(join(tmpdir(), 'test-durations-')), 'report.json');
  const began = Date.now();
  const run = spawnSync('npx', ['vitest', 'run', '--reporter=json', `--outputFile=${reportFile}`], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  wallSeconds = (Date.now() - began) / 1000;
  if (run.status !== 0) console.error(`vitest exited with ${run.status}: the table is written all the same`);
}

const report = JSON.parse(readFileSync(reportFile, 'utf8')) as Report;
const seconds = report.testResults
  .map((file) => ({ file: relative(ROOT, file.name), seconds: (file.endTime - file.startTime) / 1000 }))
  .sort((a, b) => b.seconds - a.seconds);
writeFileSync(
  TABLE,
  `${JSON.stringify(Object.fromEntries(seconds.map(({ file, seconds: s }) => [file, Math.round(s * 10) / 10])), null, 2)}\n`,
);
const sum = seconds.reduce((total, { seconds: s }) => total + s, 0);
const end = Math.max(...report.testResults.map((file) => file.endTime));
console.log(
  `${seconds.length} files; wall ${(wallSeconds ?? (end - report.startTime) / 1000).toFixed(0)} s; ` +
    `sum of the files ${sum.toFixed(0)} s (${(sum / 2).toFixed(0)} s on two workers)`,
);
for (const { file, seconds: s } of seconds.slice(0, 15)) console.log(`${s.toFixed(1).padStart(7)} s  ${file}`);
console.log(`wrote ${relative(ROOT, TABLE)}`);
