/**
 * The documentation's runnable examples, by name (`<!-- example:NAME -->` … `<!-- /example -->`), and what each must
 * print. They live in README.md and docs/*.md; readme.test.ts checks the set, readme.process.test.ts runs them against
 * the sources, consumerTypes.package.test.ts runs them as written, installed.
 */
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import { PROJECT_ROOT, runCommand } from './workers.js';

export const EXAMPLES = [
  'embed',
  'mandate',
  'redis',
  'inspect',
  'visualize',
  'openai',
  'aisdk',
  'fastify',
  'acceptance',
  'otel',
  'privacy',
  'mcp',
  'erasure',
  'hooks',
  'workers',
] as const;
export type ExampleName = (typeof EXAMPLES)[number];

/** The examples that need nothing running beside them (no Redis, no model server): run one after another. */
export const SELF_CONTAINED_EXAMPLES = EXAMPLES.filter(
  (name): name is Exclude<ExampleName, 'redis' | 'workers' | 'openai'> =>
    name !== 'redis' && name !== 'workers' && name !== 'openai',
);

/** The files examples are collected from, relative to the project: README.md, then docs/*.md by name. */
export async function documentationFiles(): Promise<string[]> {
  const docs = (await readdir(join(PROJECT_ROOT, 'docs'))).filter((name) => name.endsWith('.md')).sort();
  return ['README.md', ...docs.map((name) => `docs/${name}`)];
}

/** Every marked example in `text`, by name; `file` names it in errors. A name used twice is an error. */
export function examplesIn(
  text: string,
  file: string,
  into = new Map<string, { code: string; file: string }>(),
): Map<string, { code: string; file: string }> {
  for (const match of text.matchAll(/<!-- example:(\w+) -->\n```ts\n([\s\S]*?)```\n<!-- \/example -->/g)) {
    const earlier = into.get(match[1]!);
    if (earlier) throw new Error(`${file}: an example named ${match[1]} is already in ${earlier.file}`);
    into.set(match[1]!, { code: match[2]!, file });
  }
  // A marker whose block did not match (a fence other than ts, a missing end marker) would silently drop an example.
  const markers = [...text.matchAll(/<!-- example:(\w+) -->/g)].map((m) => m[1]!);
  const unmatched = markers.filter((name) => into.get(name)?.file !== file);
  if (unmatched.length > 0)
    throw new Error(
      `${file}: example marker(s) ${unmatched.join(', ')} not followed by a \`\`\`ts block and <!-- /example -->`,
    );
  return into;
}

/** Every marked example in README.md and docs/*.md, with the file it is in (so a new one cannot be added without a check below). */
export async function documentedExamples(): Promise<Map<string, { code: string; file: string }>> {
  const examples = new Map<string, { code: string; file: string }>();
  for (const file of await documentationFiles())
    examplesIn(await readFile(join(PROJECT_ROOT, file), 'utf8'), file, examples);
  return examples;
}

/** Every marked example's code, by name. */
export async function readmeExamples(): Promise<Map<string, string>> {
  return new Map([...(await documentedExamples())].map(([name, { code }]) => [name, code]));
}

export async function readmeExample(name: ExampleName): Promise<{ code: string; file: string }> {
  const example = (await documentedExamples()).get(name);
  if (!example) throw new Error(`no example named ${name} in ${(await documentationFiles()).join(', ')}`);
  return example;
}

/** What each example prints. */
export const expectExampleOutput: Record<ExampleName, (stdout: string) => void> = {
  embed(stdout) {
    expect(stdout).toContain('waiting_for_confirmation - Refund 199.00 on O-1001');
    expect(stdout).toContain('confirmed: true');
    expect(stdout).toContain('done - goal met: refund_order returned status=succeeded, refund_id=TX-1');
    expect(stdout).toMatch(/confirm +granted by E17/);
  },
  mandate(stdout) {
    expect(stdout.split('\n')).toEqual([
      'mandate gate: outside_mandate - waiting_for_confirmation',
      'requester: self_approval',
      'manager: true',
      'done 19900 TX-1',
    ]);
  },
  workers(stdout) {
    expect(stdout.split('\n')).toEqual([
      'queued 0',
      'waiting_for_user Which room?',
      'answer accepted: true',
      'answered Booked R7.',
      'handed back 0 {"live":0,"leases":0}',
    ]);
  },
  redis(stdout) {
    expect(stdout.split('\n')[0]).toBe('answered answered_without_criterion');
    expect(stdout).toMatch(/t1 +model +answered/);
    expect(stdout).toMatch(/t1 +stop +answered answered_without_criterion/);
  },
  inspect(stdout) {
    expect(stdout.split('\n')).toEqual([
      'agent.deciding → agent.thinking',
      'agent.thinking → (stays)',
      'agent.thinking → agent.answered [not hasSuccessCriterion]',
    ]);
  },
  visualize(stdout) {
    expect(stdout).toMatch(/^\d{2,} states, \d{2,} transitions$/);
  },
  fastify(stdout) {
    expect(stdout).toBe('201 answered 404 task_not_found 403 caller_cannot_set_rules');
  },
  acceptance(stdout) {
    expect(stdout).toMatch(/^acceptance: payments on the memory store, seed 1: \d+ tasks, \d+ tool calls proposed/);
    expect(stdout).toMatch(
      /\| lost_write_response +\| +\d+ \| +\d+ \| +0 \| +0 \| +\d+ \| +\d+ \| +0 \| +0 \| +\d+ \| +- \|/,
    );
    expect(stdout).toMatch(/\| out_of_scope +\|.*\| +permission \d+ \|/);
    expect(stdout).toMatch(/unconfirmed side effects +\| +0 \|/);
    expect(stdout.split('\n').at(-1)).toBe('every invariant held');
  },
  otel(stdout) {
    expect(stdout).toBe('answered chat scripted (0 events), task run (2 events)');
  },
  privacy(stdout) {
    expect(stdout.split('\n')).toEqual([
      'done; the tool got 4111111111111111',
      'stored goal: Charge 5.00 to card ‹card-1111›',
      'card in the snapshot, audit or transcript: false',
      'stamp: scripted, policy 1, session web-7',
    ]);
  },
  hooks(stdout) {
    expect(stdout.split('\n')).toEqual([
      'warn: the transition hook threw; the task goes on',
      'started look_up {"word":"hello"}',
      'finished look_up ok',
      'settled answered',
    ]);
  },
  erasure(stdout) {
    const lines = stdout.split('\n');
    expect(lines[0]).toMatch(
      /^t1 gdpr_erasure by dsar-118: \{"snapshot":true,"audit":\d+,"transcript":\d+,"quarantine":false\} 0$/,
    );
    expect(lines.slice(1)).toEqual(['task_erased 2026-01-05T09:00:00.000Z', 't2 retention']);
  },
  mcp(stdout) {
    expect(stdout.split('\n')).toEqual([
      'waiting_for_confirmation send_payment; not imported: drop_database',
      'done goal_met P-1',
    ]);
  },
  openai(stdout) {
    // The fake server's one answer: 120 prompt + 30 completion tokens, at 0.15 and 0.60 per thousand, rounded up.
    // A greeting declares no success criterion: it ends answered, never done.
    expect(stdout).toBe('answered answered_without_criterion 150 tokens, 36 costMicros');
  },
  aisdk(stdout) {
    // The AI SDK mock model's one answer: 120 input + 30 output tokens, priced as in the openai example.
    expect(stdout).toBe('answered answered_without_criterion 150 tokens, 36 costMicros, 1 provider call');
  },
};

/** Package specifiers → the sources they are built from (the package tier runs the examples as written). */
export const SOURCES: Record<string, string> = {
  'statechart-agent': 'src/index.ts',
  'statechart-agent/redis': 'src/redis.ts',
  'statechart-agent/openai': 'src/openai.ts',
  'statechart-agent/ai-sdk': 'src/aisdk.ts',
  'statechart-agent/inspect': 'src/inspect/index.ts',
  'statechart-agent/testing': 'src/testing/index.ts',
  'statechart-agent/visualize': 'src/visualize/index.ts',
  'statechart-agent/fastify': 'src/http/index.ts',
  'statechart-agent/acceptance': 'src/acceptance/index.ts',
  'statechart-agent/mcp': 'src/mcp.ts',
  'statechart-agent/otel': 'src/otel.ts',
  'statechart-agent/bullmq': 'src/bullmq.ts',
};

/** Runs an example with tsx, its package imports pointed at the sources, in a scratch folder as its cwd; throws with its output if it fails. */
export async function runExample(name: ExampleName, env: NodeJS.ProcessEnv = {}): Promise<string> {
  const example = await readmeExample(name);
  const code = example.code.replace(/from '(statechart-agent(?:\/[\w-]+)?)'/g, (_m, specifier: string) => {
    const source = SOURCES[specifier];
    if (!source) throw new Error(`example ${name} (${example.file}) imports ${specifier}, which is not an entry`);
    return `from '${join(PROJECT_ROOT, source)}'`;
  });
  // Inside the project (its node_modules resolve the example's other imports); a folder of its own per run, so two
  // suites running at once do not share one.
  await mkdir(join(PROJECT_ROOT, '.data'), { recursive: true });
  const dir = await mkdtemp(join(PROJECT_ROOT, '.data', `readme-${name}-`));
  await writeFile(join(dir, 'example.ts'), code);
  try {
    const run = await runCommand(join(PROJECT_ROOT, 'node_modules', '.bin', 'tsx'), ['example.ts'], {
      name: `example ${name} (${example.file})`,
      cwd: dir,
      env,
      timeoutMs: 30_000,
    });
    if (run.code !== 0) throw new Error(`example ${name} (${example.file}) failed\n${run.transcript}`);
    return run.out.trim();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
