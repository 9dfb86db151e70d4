/**
 * Credentials are sealed by default: with no privacy configuration, a key, a password or a token in a tool's result
 * or in the model's output never reaches the model's conversation, the store (snapshot and journals), the streams
 * (inspection, hooks, logs) or the task's event stream over HTTP. A host adds redactors beside the defaults and
 * turns one off only with a reason. The redactors themselves are checked on what they must find and what they must
 * leave alone (words, counts, slugs, placeholders).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentError } from '../src/errors.js';
import { Privacy, displayText } from '../src/privacy/privacy.js';
import { cardNumbers } from '../src/privacy/redactors.js';
import { DEFAULT_REDACTOR_NAMES, isCredentialKey, secretRedactors } from '../src/privacy/secrets.js';
import { FileStore } from '../src/store/file/fileStore.js';
import { MemoryStore } from '../src/store/memoryStore.js';
import type { TaskStore } from '../src/store/taskStore.js';
import { DB_PASSWORD, TOOL_KEY, credentialsIn, runSecretTask } from './support/secretWorld.js';
import { storedText } from './support/walletWorld.js';

const T = { taskId: 't', tenantId: 'acme', startedAt: 1 };
const TOKEN = /\[\[sealed:([a-z0-9_-]+):[A-Za-z0-9_-]+\]\]/;
const WHOLE = (label: string) => new RegExp(`^\\[\\[sealed:${label}:[A-Za-z0-9_-]+\\]\\]$`);

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

const STORES: [string, () => Promise<{ store: TaskStore; where?: string }>][] = [
  ['memory', async () => ({ store: new MemoryStore() })],
  [
    'file',
    async () => {
      const where = await mkdtemp(join(tmpdir(), 'secrets-'));
      dirs.push(where);
      return { store: new FileStore(where), where };
    },
  ],
];

describe.each(STORES)('a task meeting credentials with no privacy configuration, on the %s store', (_name, open) => {
  it('seals them before the model, the store, the streams and the event stream see them', async () => {
    const { store, where } = await open();
    const run = await runSecretTask({ store, taskId: 'secrets-1' });
    expect(run.status.state).toBe('answered');

    // The model was shown tokens where the values were, labelled by kind, and the result's shape otherwise intact.
    const shown = run.seen.join('\n');
    expect(run.seen).toHaveLength(3);
    const config = JSON.parse(run.seen[1]!).observations.find((o: { tool: string }) => o.tool === 'read_config').data;
    expect(config.summary).toMatch(
      /^billing connected with api_key=\[\[sealed:api-key:[A-Za-z0-9_-]+\]\] \(rotated yearly\)$/,
    );
    expect(config.db).toMatchObject({ host: 'db.internal', password: expect.stringMatching(WHOLE('password')) });
    expect(config.headers).toMatchObject({
      Authorization: expect.stringMatching(WHOLE('authorization')),
      Accept: 'application/json',
    });
    expect(config.max_tokens).toBe(4096);
    expect(JSON.parse(run.seen[0]!).goal).toMatch(/key id \[\[sealed:aws-access-key:/);
    // The model's own output is sealed before anything keeps it: its text, its call's arguments, its answer.
    expect(shown).toContain('Trying the deploy token [[sealed:github-token:');
    expect(run.status.outcome?.answer).toMatch(/token: \[\[sealed:token:[A-Za-z0-9_-]+\]\]$/);
    // A tool that declares no sensitive argument is given the token, not the value.
    expect(run.calls.received).toEqual([{ account: 'ada', password: expect.stringMatching(WHOLE('password')) }]);

    const streamed = run.streams.chunks.join('\n');
    expect(streamed).toContain('[[sealed:password:');
    expect(run.sse).toContain('event: stop');
    expect(run.sse).toContain('[[sealed:password:'); // the call's arguments, as the event stream shows them

    expect(credentialsIn(shown)).toEqual([]);
    expect(credentialsIn(await storedText(store, where))).toEqual([]);
    expect(credentialsIn(streamed)).toEqual([]);
    expect(credentialsIn(run.sse)).toEqual([]);
  });
});

describe('omitting a default redactor', () => {
  it('lets what only it finds through, and nothing else', async () => {
    const run = await runSecretTask({
      store: new MemoryStore(),
      taskId: 'secrets-2',
      privacy: {
        omitDefaultRedactors: { names: ['credential-field'], reason: 'the test database password is public' },
      },
    });
    const shown = run.seen.join('\n');
    expect(shown).toContain(DB_PASSWORD); // found by its key only
    expect(shown).not.toContain(TOOL_KEY); // its shape is still found (api-key)
    expect(shown).toContain('[[sealed:bearer-token:'); // the header's token, by its shape now
  });

  it('is listed as a loosening with its reason', () => {
    const privacy = new Privacy({
      omitDefaultRedactors: { names: ['jwt', 'url-password'], reason: ' tokens are test fixtures ' },
    });
    expect(privacy.loosened).toEqual([
      { option: 'privacy.omitDefaultRedactors:jwt', reason: 'tokens are test fixtures' },
      { option: 'privacy.omitDefaultRedactors:url-password', reason: 'tokens are test fixtures' },
    ]);
    expect(new Privacy().loosened).toEqual([]);
    const all = new Privacy({ omitDefaultRedactors: { names: 'all', reason: 'a sandbox without credentials' } });
    expect(all.loosened.map((l) => l.option)).toEqual(
      DEFAULT_REDACTOR_NAMES.map((name) => `privacy.omitDefaultRedactors:${name}`),
    );
    expect(all.redacts).toBe(false);
    expect(all.text(T, `api_key=${TOOL_KEY}`)).toBe(`api_key=${TOOL_KEY}`);
  });

  it.each([
    [
      'an unknown name',
      { names: ['jwts'], reason: 'typo' },
      /no default redactor is named "jwts"; the defaults are private-key, jwt/,
    ],
    ['a blank reason', { names: ['jwt'], reason: '  ' }, /needs a reason/],
    ['no reason', { names: ['jwt'] }, /needs a reason/],
    ['names that are not a list', { names: 'jwt', reason: 'x' }, /must be a list of default redactor names or 'all'/],
  ])('is refused with %s', (_case, omit, message) => {
    const make = () => new Privacy({ omitDefaultRedactors: omit as never });
    expect(make).toThrow(AgentError);
    expect(make).toThrow(message);
  });
});

describe('host redactors', () => {
  it('run beside the defaults, not instead of them', () => {
    const privacy = new Privacy({ redactors: [cardNumbers()] });
    expect(privacy.hasHostRedactors).toBe(true);
    expect(new Privacy().hasHostRedactors).toBe(false);
    expect(displayText(privacy.text(T, `card 4111 1111 1111 1111, api_key=${TOOL_KEY}`))).toBe(
      'card ‹card-1111›, api_key=‹api-key›',
    );
  });

  it('may seal only a named `value` group, and may name keys', () => {
    const privacy = new Privacy({
      redactors: [
        {
          name: 'pin',
          pattern: /\bpin (?<value>\d{4})\b/g,
          keys: (key) => key === 'pin_code',
          label: (_match, groups) => (groups.key ? 'pin-field' : 'pin'),
        },
      ],
    });
    expect(displayText(privacy.text(T, 'my pin 1234, order 5678'))).toBe('my pin ‹pin›, order 5678');
    expect(displayText(JSON.stringify(privacy.json(T, { pin_code: 4321, other: 4321 })))).toBe(
      '{"pin_code":"‹pin-field›","other":4321}',
    );
  });
});

/** `text` redacted by the defaults, as people see it. */
const shown = (text: string) => displayText(new Privacy().text(T, text));

describe('the default redactors', () => {
  it('are named, in the order they run', () => {
    expect(secretRedactors().map((r) => r.name)).toEqual([...DEFAULT_REDACTOR_NAMES]);
    for (const redactor of secretRedactors()) expect(redactor.pattern.global).toBe(true);
  });

  it.each([
    // credential-field: the value of an assignment, the key kept
    ['api_key=sk-xyz&page=2', 'api_key=‹api-key›&page=2'],
    ['{"password": "hunter 2", "user": "ada"}', '{"password": "‹password›", "user": "ada"}'],
    ['{"password":"hunter2","token_count":5}', '{"password":"‹password›","token_count":5}'],
    ["config: {'client_secret': 'abc'}", "config: {'client_secret': '‹secret›'}"],
    ['token: abc123', 'token: ‹token›'],
    ['X-Api-Key: k-12345', 'X-Api-Key: ‹api-key›'],
    ['clientSecret=zz; next', 'clientSecret=‹secret›; next'],
    ['DB_PASSWORD=pa55 ./run', 'DB_PASSWORD=‹password› ./run'],
    ['Authorization: Basic YWRhOnB3', 'Authorization: Basic ‹authorization›'],
    ['curl -H "Authorization: Bearer E17" x', 'curl -H "Authorization: Bearer ‹authorization›" x'],
    ['Cookie: sid=abc; theme=dark', 'Cookie: ‹cookie›'],
    ['set-cookie: id=a3f; Secure\nnext line', 'set-cookie: ‹cookie›\nnext line'],
    ['{\\"password\\":\\"x1\\"}', '{\\"password\\":\\"‹password›\\"}'],
    ['private_key = "MIIEvQIBADANBg"', 'private_key = "‹private-key›"'],
    // shapes, anywhere
    [
      'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c is the session',
      '‹jwt› is the session',
    ],
    ['Authorization: Bearer abcDEF1234567890xyz', 'Authorization: Bearer ‹bearer-token›'],
    ['sent Bearer 2YotnFZFEjr1zCsicMWpAA to it', 'sent Bearer ‹bearer-token› to it'],
    ['use sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12 now', 'use ‹api-key› now'],
    ['old sk-live-4eC39HqLyjWDarjtT1zdp7dc', 'old ‹api-key›'],
    [
      'stripe sk_live_51H8xYzAbC and rk_test_9f8e7d6c5b, pk_live_abcdefghij',
      'stripe ‹api-key› and ‹api-key›, ‹api-key›',
    ],
    ['webhook whsec_abcdefghij0123456789', 'webhook ‹api-key›'],
    ['AKIAIOSFODNN7EXAMPLE and ASIA1234567890ABCDEF', '‹aws-access-key› and ‹aws-access-key›'],
    ['-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY----- after', '‹private-key› after'],
    ['-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA (cut', '‹private-key›'],
    ['ghp_abcdefghijklmnopqrstuvwxyz0123456789 here', '‹github-token› here'],
    ['github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP', '‹github-token›'],
    ['xoxb-1234-5678-abcdefGHIJ', '‹slack-token›'],
    ['AIzaSyA-1234567890abcdefghijklmnopqrstu', '‹google-api-key›'],
    ['postgres://app:s3cret@db:5432/app', 'postgres://app:‹url-password›@db:5432/app'],
    ['redis://:s3cret@cache:6379', 'redis://:‹url-password›@cache:6379'],
  ])('seal %j', (text, expected) => {
    expect(shown(text)).toBe(expected);
  });

  it.each([
    'the max_tokens: 500 and token_count=12 and input_tokens: 30',
    'password_policy: min 8 characters; secret_name: billing',
    'secretary: Ada, keyboard: US',
    'next_page_token: abc, NextToken=def, continuation_token: x, resume_token: y',
    'PWD=/home/ada OLDPWD=/tmp',
    'password: null, token=true',
    'Use sk-1, sk-top-10-hotels-in-town-2024 and task-1234567890abcdef',
    'Bearer authentication is used; Bearer YOUR_ACCESS_TOKEN_HERE',
    'a.b.c and eyJ.short.x',
    'AKIA123 and akiaiosfodnn7example',
    'xoxb-abcdefghijkl',
    'https://example.com:8080/path@v2 and mailto:ada@example.com',
    'the session_id: s-42 and idempotency_key: k-1',
  ])('leave %j alone', (text) => {
    expect(shown(text)).toBe(text);
  });

  it.each([
    ['a credential word repeated', 'token'.repeat(40_000)],
    ['long keys ending in one', `${'x'.repeat(60)}password`.repeat(3_000)],
    ['unfinished PEM blocks', '-----BEGIN RSA PRIVATE KEY-----'.repeat(6_000)],
    ['URLs without a password', '://a:'.repeat(40_000)],
    ['a long run of key characters', `${'a_'.repeat(100_000)}token: x`],
  ])('stay linear on %s (200 KB in well under a second; a quadratic scan took seconds)', (_case, text) => {
    const started = performance.now();
    new Privacy().text(T, text);
    expect(performance.now() - started).toBeLessThan(500);
  });

  it('never put the value in the label, and keep a task’s own tokens as they are', () => {
    const privacy = new Privacy();
    const sealed = privacy.text(T, 'api_key=sk-live-4eC39HqLyjWDarjtT1zdp7dc password: "pw-4eC39Hq"');
    for (const match of sealed.matchAll(new RegExp(TOKEN, 'g'))) expect(['api-key', 'password']).toContain(match[1]);
    expect(privacy.text(T, sealed)).toBe(sealed);
    // Another task's token is text: nothing in its label or blob is taken for a key and a value.
    const foreign =
      '[[sealed:api-key:ABCDEFGHIJKL]] [[sealed:password:ABCDEFGHIJKL]] [[sealed:bearer-token:ABCDEFGHIJKL]]';
    expect(privacy.text(T, foreign)).toBe(foreign);
  });
});

describe('credential keys', () => {
  it.each([
    'password',
    'Password',
    'PASSWORD',
    'passwd',
    'pwd',
    'db_pwd',
    'passphrase',
    'secret',
    'secrets',
    'client_secret',
    'clientSecret',
    'token',
    'access_token',
    'accessToken',
    'refresh_token',
    'id_token',
    'X-Auth-Token',
    'csrf_token',
    'api_key',
    'apiKey',
    'API-KEY',
    'x-api-key',
    'apikey',
    'API Key',
    'private_key',
    'privateKey',
    'secret_access_key',
    'AWS_SECRET_ACCESS_KEY',
    'signing_key',
    'authorization',
    'Authorization',
    'proxy-authorization',
    'cookie',
    'Set-Cookie',
    'cookies',
    'credentials',
    'credential',
  ])('%s names a credential', (key) => {
    expect(isCredentialKey(key)).toBe(true);
  });

  it.each([
    'token_count',
    'max_tokens',
    'tokens',
    'input_tokens',
    'output_tokens',
    'token_type',
    'tokenizer',
    'password_policy',
    'password_hash',
    'secretary',
    'secret_name',
    'secret_id',
    'next_page_token',
    'nextPageToken',
    'NextToken',
    'page_token',
    'continuation_token',
    'sync_token',
    'resume_token',
    'key',
    'keys',
    'idempotency_key',
    'public_key',
    'primary_key',
    'sort_key',
    'private_key_id',
    'keyboard',
    'monkey',
    'session_id',
    'sessionId',
    'auth',
    'author',
    'PWD',
    'OLDPWD',
    'cookie_policy',
    'access',
  ])('%s does not', (key) => {
    expect(isCredentialKey(key)).toBe(false);
  });

  it('seal the whole value under them in JSON, every leaf below, and nothing else', () => {
    const privacy = new Privacy();
    const value = {
      api_key: 'k',
      credentials: { user: 'ada', pin: 1234, ok: true, none: null, list: ['a', 'b'] },
      password: '',
      max_tokens: 500,
      nested: [{ refresh_token: 'r1' }],
      note: 'plain',
    };
    const sealed = privacy.json(T, value);
    expect(displayText(JSON.stringify(sealed))).toBe(
      JSON.stringify({
        api_key: '‹api-key›',
        credentials: {
          user: '‹credentials›',
          pin: '‹credentials›',
          ok: true,
          none: null,
          list: ['‹credentials›', '‹credentials›'],
        },
        password: '',
        max_tokens: 500,
        nested: [{ refresh_token: '‹token›' }],
        note: 'plain',
      }),
    );
    expect(value.api_key).toBe('k'); // the input is left as it was
    expect(privacy.json(T, sealed)).toEqual(sealed); // this task's tokens stay what they are
    const plain = { rooms: [{ room_id: 'R7', name: 'Room 7', max_tokens: 3 }] };
    expect(privacy.json(T, plain)).toBe(plain); // nothing to seal: the same object back
  });
});
