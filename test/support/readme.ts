/** The README's embedding example, and what it must print (run by readme.test.ts and consumer.package.test.ts). */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import { PROJECT_ROOT } from './workers.js';

/** The TypeScript between the README's example markers. */
export async function readmeExample(): Promise<string> {
  const readme = await readFile(join(PROJECT_ROOT, 'README.md'), 'utf8');
  const block = readme.split('<!-- example:start -->')[1]!.split('<!-- example:end -->')[0]!;
  return block.replace(/^\s*```ts\n/, '').replace(/```\s*$/, '');
}

export function expectExampleOutput(stdout: string): void {
  expect(stdout).toContain('waiting_for_confirmation - Refund 199.00 on O-1001');
  expect(stdout).toContain('confirmed: true');
  expect(stdout).toContain('done - goal met: refund_order returned status=succeeded, refund_id=TX-1');
  expect(stdout).toMatch(/confirm +granted by E17/);
}
