import { existsSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  EXAMPLES,
  SOURCES,
  documentationFiles,
  documentedExamples,
  examplesIn,
  readmeExamples,
} from './support/readme.js';

const root = join(import.meta.dirname, '..');

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** A Markdown file's text outside fenced code blocks. */
function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, '');
}

describe('README', () => {
  it('has exactly two quick-start commands: one runs the demo, one runs the tests', async () => {
    const readme = await readFile(join(root, 'README.md'), 'utf8');
    const quickStart = readme.split('## Quick start')[1]!.split('```sh')[1]!.split('```')[0]!;
    const commands = quickStart
      .split('\n')
      .map((l) => l.replace(/#.*/, '').trim())
      .filter(Boolean);
    expect(commands).toEqual(['npm install && npm start', 'npm test']);
  });

  it('marks one runnable example per entry, each run by a test', async () => {
    // They live in README.md and docs/*.md, and run in readme.process.test.ts, the Redis ones in readme.redis.test.ts.
    expect([...(await readmeExamples()).keys()].sort()).toEqual([...EXAMPLES].sort());
    const imported = new Set<string>();
    for (const code of (await readmeExamples()).values()) {
      for (const match of code.matchAll(/from '(statechart-agent(?:\/[\w-]+)?)'/g)) imported.add(match[1]!);
    }
    expect([...imported].sort()).toEqual(Object.keys(SOURCES).sort());
  });

  it('is a landing page: one embedding example, the diagram linked rather than inlined', async () => {
    const readme = await readFile(join(root, 'README.md'), 'utf8');
    const inReadme = [...(await documentedExamples())]
      .filter(([, { file }]) => file === 'README.md')
      .map(([name]) => name);
    expect(inReadme).toEqual(['embed']);
    expect(readme).not.toContain('```mermaid');
    expect(readme.split('\n').length).toBeLessThan(400);
  });

  it('names the file of a duplicated or broken example', () => {
    const block = (name: string) => `<!-- example:${name} -->\n\`\`\`ts\nconsole.log(1);\n\`\`\`\n<!-- /example -->\n`;
    const found = examplesIn(block('embed'), 'README.md');
    expect(() => examplesIn(block('embed'), 'docs/other.md', found)).toThrow(
      'docs/other.md: an example named embed is already in README.md',
    );
    expect(() => examplesIn('<!-- example:lost -->\n```js\nx\n```\n<!-- /example -->\n', 'docs/x.md')).toThrow(
      /docs\/x\.md: example marker\(s\) lost/,
    );
  });

  it('links only to files and headings that exist, from README.md and docs/*.md', async () => {
    const broken: string[] = [];
    for (const file of await documentationFiles()) {
      const text = prose(await readFile(join(root, file), 'utf8'));
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^(https?:|mailto:)/.test(target!)) continue;
        const [path, anchor] = target!.split('#') as [string, string | undefined];
        const resolved = path === '' ? join(root, file) : join(root, dirname(file), path);
        if (!existsSync(resolved)) {
          broken.push(`${file}: ${target} (no such file)`);
          continue;
        }
        if (anchor === undefined || !resolved.endsWith('.md') || statSync(resolved).isDirectory()) continue;
        const headings = prose(await readFile(resolved, 'utf8')).match(/^#{1,6} .*$/gm) ?? [];
        if (!headings.some((h) => slug(h.replace(/^#+ /, '')) === anchor))
          broken.push(`${file}: ${target} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });
});
