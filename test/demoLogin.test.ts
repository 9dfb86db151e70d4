/** The demo's sign-in page follows `next` only to a path of its own: no open redirect. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DemoService, createDemoService, localPath } from '../examples/booking/service.js';
import { MemoryStore } from '../src/index.js';

let service: DemoService;
beforeAll(async () => {
  service = await createDemoService({ store: new MemoryStore(), expirySweepMs: 0 });
});
afterAll(() => service.close());

const signIn = async (next: string) => {
  const response = await service.app.inject({ method: 'GET', url: `/login?user=E17&next=${encodeURIComponent(next)}` });
  return { status: response.statusCode, location: response.headers.location };
};

describe('the demo sign-in', () => {
  it('goes on to a path of the site', async () => {
    expect(await signIn('/tasks/refund-1')).toEqual({ status: 302, location: '/tasks/refund-1' });
  });

  it.each(['//evil.example', '//evil.example/inbox', '/\\evil.example', 'https://evil.example', '/a//evil', 'inbox'])(
    'never sends the browser to another site: %s goes to the inbox',
    async (next) => {
      expect(await signIn(next)).toEqual({ status: 302, location: '/inbox' });
      expect(localPath(next)).toBeNull();
    },
  );
});
