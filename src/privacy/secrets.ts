/**
 * The default redactors: credentials, sealed in every task with no configuration. Two kinds:
 *
 * - by key name (`credential-field`): in JSON, the value under a key such as `api_key`, `clientSecret`,
 *   `X-Auth-Token` or `password` is sealed whole; in text, the value of an assignment such as `api_key=…`,
 *   `"password": "…"`, `Authorization: Bearer …` or `token: …`;
 * - by value shape, anywhere in text: bearer tokens, JWTs, provider API keys (`sk-…`, `sk_live_…`), AWS access key
 *   ids, PEM private keys, GitHub, Slack and Google keys, and the password in a URL.
 *
 * Labels name the kind (`password`, `jwt`, `aws-access-key`), never a part of the value. A host adds its own
 * redactors beside these and omits one only with a reason (`privacy.omitDefaultRedactors`).
 */
import type { Redactor, RedactorGroups } from './redactors.js';

/**
 * A key that names a credential, as the last word of the key (any case; words joined by `_`, `-`, `.`, a space or
 * camelCase): `password`, `passwd`, `pwd`, `passphrase`, `secret(s)`, `token`, `authorization`, `cookie(s)`,
 * `credential(s)`, and `key` after `api`, `private`, `secret`, `access`, `signing`, `encryption`, `master`,
 * `client`, `auth`, `subscription`, `session` or `app`. Not a credential: a key where such a word is followed by
 * another (`token_count`, `password_policy`, `secret_name`), plurals that count (`max_tokens`, `input_tokens`), other
 * words (`secretary`, `keyboard`), a pagination token (`next_page_token`, `NextToken`, `continuation_token`,
 * `sync_token`, `resume_token`), and a bare `key`, `session_id` or `auth`.
 */
const TERM =
  '(?:pass(?:word|wd|phrase)|pwd|secrets?|(?<!(?:page|next|continuation|sync|pagination|cursor|resume)[ _.-]?)token|' +
  '(?:api|private|secret|access|signing|encryption|master|client|auth|subscription|session|app)[ _.-]?key|authori[sz]ation|cookies?|credentials?)';

const KEY_NAME = new RegExp(`${TERM}$`, 'i');

/** The shell's working directory variables, not passwords. */
const SHELL_DIRECTORIES = new Set(['PWD', 'OLDPWD']);

/** True when `key` names a credential (see `TERM`). */
export function isCredentialKey(key: string): boolean {
  return KEY_NAME.test(key) && !SHELL_DIRECTORIES.has(key);
}

/** The label of a value under a credential key: the kind of credential, never a word taken from the data. */
export function credentialLabel(key: string): string {
  const word = key.toLowerCase();
  if (/(?:pass(?:word|wd|phrase)|pwd)$/.test(word)) return 'password';
  if (/token$/.test(word)) return 'token';
  if (/secrets?$/.test(word)) return 'secret';
  if (/private[ _.-]?key$/.test(word)) return 'private-key';
  if (/key$/.test(word)) return 'api-key';
  if (/authori[sz]ation$/.test(word)) return 'authorization';
  if (/cookies?$/.test(word)) return 'cookie';
  return 'credentials';
}

/** Authorization schemes kept in view before the credential (`Authorization: Bearer ‹authorization›`). */
const SCHEMES = '(?:bearer|basic|token|digest|bot|negotiate|ntlm|apikey|key)';
/** Where a bare value ends: space, a quote, punctuation that separates fields, or brackets. */
const BARE = `(?!${SCHEMES}[ \\t])(?!(?:null|true|false|none|undefined)(?![\\w-]))[^\\s"'\`,;&<>()[\\]{}]+`;

/** Keys longer than this before their last word are not credential keys in text (and the lookbehind stays bounded). */
const LONGEST_PREFIX = 64;

/** A cookie header's value runs to the end of the line (`Cookie: sid=…; theme=…`: every cookie in it). */
const COOKIE_LINE = `(?<=cookies?[ \\t]*[:=][ \\t]*)[^\\r\\n"'\`<>]+`;

/**
 * An assignment in text: a key that names a credential (not inside a token), an optional closing quote, `:` or `=`,
 * then the value: quoted (up to the closing quote or the end of the line), a cookie header's (to the end of the
 * line) or bare (up to a space or a separator), after an authorization scheme if there is one. Only the value
 * (`value`) is sealed. The key is found from its last word (`term`), then the words before it (`prefix`, in a
 * lookbehind): a pattern that starts with a lookbehind or a character class is tried at every position of the text,
 * several times slower. The prefix is bounded, and the term must end the key before it is looked for: a text of
 * 100 KB that repeats `token` costs a few milliseconds, not seconds.
 */
const ASSIGNMENT = new RegExp(
  `(?<term>${TERM})(?![A-Za-z0-9_-])(?<=(?<![A-Za-z0-9_.-]|\\[\\[sealed:)(?<prefix>[A-Za-z0-9_.-]{0,${LONGEST_PREFIX}})\\k<term>)(?:\\\\?["'])?[ \\t]*[:=][ \\t]*(?:\\\\?["'])?(?:${SCHEMES}[ \\t]+)?` +
    `(?<value>(?<=\\\\")[^"\\\\\\r\\n]+|(?<=")(?:[^"\\\\\\r\\n]|\\\\.)+|(?<=')[^'\\r\\n]+|${COOKIE_LINE}|(?<!["'])${BARE})`,
  'gi',
);

/**
 * True when `text` holds a run of at least `min` letters and digits mixing two of lowercase, uppercase and digits:
 * what a random key has and a word, a slug (`sk-top-10-hotels`) or a placeholder (`YOUR_API_KEY`) has not.
 */
export function looksRandom(text: string, min: number): boolean {
  for (const run of text.split(/[^A-Za-z0-9]+/)) {
    if (run.length < min) continue;
    const kinds = Number(/[a-z]/.test(run)) + Number(/[A-Z]/.test(run)) + Number(/\d/.test(run));
    if (kinds >= 2) return true;
  }
  return false;
}

/**
 * Cheap checks that must match before a default redactor runs at all: most texts (a room's name, an id) match none,
 * and pay one scan instead of ten. Over-matching only costs time; each redactor's own pattern decides.
 */
export const HINTS = new WeakMap<Redactor, RegExp>();

function hinted(redactor: Redactor, hint: RegExp): Redactor {
  HINTS.set(redactor, hint);
  return redactor;
}

/** The key of a match: `{ key }` for a value under a JSON key, the `prefix` and `term` groups in text. */
function keyOf(groups: RedactorGroups): string {
  return groups.key ?? `${groups.prefix ?? ''}${groups.term ?? ''}`;
}

/** Values under credential keys (JSON) and in credential assignments (text). Label: the kind (`password`, `token`...). */
export function credentialFields(): Redactor {
  return hinted(
    {
      name: 'credential-field',
      pattern: new RegExp(ASSIGNMENT.source, ASSIGNMENT.flags),
      keys: isCredentialKey,
      accept: (_value, groups) => !SHELL_DIRECTORIES.has(keyOf(groups)),
      label: (_value, groups) => credentialLabel(keyOf(groups)),
    },
    /pass|pwd|secret|token|key|auth|cookie|credential/i,
  );
}

/** `Bearer <token>` (the word kept, the token sealed), for tokens of 16+ characters that look random. */
export function bearerTokens(): Redactor {
  return hinted(
    {
      name: 'bearer-token',
      pattern: /(?<![A-Za-z0-9_-])bearer[ \t]+(?<value>[A-Za-z0-9._~+/-]{16,}=*)(?![A-Za-z0-9._~+/=-])/gi,
      accept: (value) => looksRandom(value, 12),
    },
    /bearer/i,
  );
}

/** JSON Web Tokens (and JWE): base64url segments joined by dots, the first (the header) starting `eyJ`. */
export function jsonWebTokens(): Redactor {
  return hinted(
    {
      name: 'jwt',
      pattern: /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]*){0,2}/g,
    },
    /eyJ/,
  );
}

/**
 * Provider API keys with a known prefix: OpenAI and Anthropic (`sk-…`, `sk-proj-…`, `sk-ant-…`), `rk-…`, Stripe
 * (`sk_live_…`, `rk_test_…`, `pk_live_…`, `whsec_…`). The `-` forms need a random-looking run of 16+ characters, so
 * `sk-1` or a slug is left alone.
 */
export function apiKeys(): Redactor {
  return hinted(
    {
      name: 'api-key',
      pattern:
        /(?<![A-Za-z0-9_-])(?:(?:sk|rk)-[A-Za-z0-9_-]{16,}|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9+/=]{20,})(?![A-Za-z0-9_-])/g,
      accept: (match) => !/^[sr]k-/.test(match) || looksRandom(match.slice(3), 16),
    },
    /[sr]k[-_]|pk_|whsec_/,
  );
}

/** AWS access key ids: `AKIA` (long-term) or `ASIA` (temporary) and 16 uppercase letters or digits. */
export function awsAccessKeys(): Redactor {
  return hinted(
    { name: 'aws-access-key', pattern: /(?<![A-Za-z0-9])A(?:KI|SI)A[A-Z0-9]{16}(?![A-Za-z0-9])/g },
    /A[KS]IA/,
  );
}

/**
 * PEM private key blocks (`-----BEGIN RSA PRIVATE KEY-----` … `-----END …-----`, PKCS#8, EC, OpenSSH, encrypted,
 * PGP), whole; a block cut before its end is sealed to the end of the text.
 */
export function privateKeys(): Redactor {
  return hinted(
    {
      name: 'private-key',
      pattern:
        /-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|$)/g,
    },
    /-----BEGIN /,
  );
}

/** GitHub tokens: `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` and fine-grained `github_pat_`. */
export function githubTokens(): Redactor {
  return hinted(
    {
      name: 'github-token',
      pattern: /(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{50,})(?![A-Za-z0-9_])/g,
    },
    /gh[pousr]_|github_pat_/,
  );
}

/** Slack tokens: `xoxb-`, `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-`, `xoxe-` and what follows (with a digit in it). */
export function slackTokens(): Redactor {
  return hinted(
    {
      name: 'slack-token',
      pattern: /(?<![A-Za-z0-9_-])xox[abprse]-[A-Za-z0-9-]{10,}(?![A-Za-z0-9_-])/g,
      accept: (match) => /\d/.test(match),
    },
    /xox[abprse]-/,
  );
}

/** Google API keys: `AIza` and 35 base64url characters. */
export function googleApiKeys(): Redactor {
  return hinted(
    { name: 'google-api-key', pattern: /(?<![A-Za-z0-9_-])AIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])/g },
    /AIza/,
  );
}

/** The password in a URL's user info (`postgres://app:‹url-password›@db:5432/app`); the rest of the URL stays. */
export function urlPasswords(): Redactor {
  return hinted({ name: 'url-password', pattern: /:\/\/[^\s:@/?#[\]"'<>]*:(?<value>[^\s@/?#"'<>[\]]+)@/g }, /:\/\//);
}

/**
 * The names of the default redactors, in the order they run: whole shapes first (a PEM block before its first
 * line is taken for a value), the assignments last (what a shape sealed stays one token).
 */
export const DEFAULT_REDACTOR_NAMES = [
  'private-key',
  'jwt',
  'bearer-token',
  'api-key',
  'aws-access-key',
  'github-token',
  'slack-token',
  'google-api-key',
  'url-password',
  'credential-field',
] as const;

export type DefaultRedactorName = (typeof DEFAULT_REDACTOR_NAMES)[number];

/**
 * The default redactors (fresh objects), in the order they run: every task has them unless the host omits some
 * (`privacy.omitDefaultRedactors`). Exported to read, test or reuse; passing them in `privacy.redactors` would run
 * them twice.
 */
export function secretRedactors(): Redactor[] {
  return [
    privateKeys(),
    jsonWebTokens(),
    bearerTokens(),
    apiKeys(),
    awsAccessKeys(),
    githubTokens(),
    slackTokens(),
    googleApiKeys(),
    urlPasswords(),
    credentialFields(),
  ];
}
