/**
 * Redactors find sensitive values in free text (goals, answers, model output, tool results, error summaries) by
 * pattern, and in JSON by key. What they find is sealed in place: the text keeps a token such as
 * `[[sealed:card-1111:…]]` and the value itself is never persisted, streamed, traced or logged. The default set
 * (credentials) is in `secrets.ts`; these are the ones a host adds.
 */

/** The named groups of a match (`key`, `value`...), or for a value found under a key, `{ key }`. */
export type RedactorGroups = Readonly<Record<string, string | undefined>>;

export interface Redactor {
  /** What it finds ("card"); the default label of its tokens. */
  name: string;
  /**
   * What to find; must be a global (`g`) regular expression. With a named group `value`, only that part of a match is
   * sealed (`password=(?<value>\S+)` keeps `password=` in view); otherwise the whole match.
   */
  pattern: RegExp;
  /** A further check of what would be sealed (e.g. the Luhn check of a card number); false leaves the text as it is. */
  accept?: (match: string, groups: RedactorGroups) => boolean;
  /**
   * The token's label, shown to the model and in records ("card-1111"): lowercase letters, digits, `-` and `_`,
   * at most 40 characters. It must not reveal the value; default `name`.
   */
  label?: (match: string, groups: RedactorGroups) => string;
  /**
   * Object keys whose values are sealed whole wherever a value is walked as JSON (tools' results, lookups,
   * reviewers' results, arguments of tools with sensitive fields): a string or number, or each string and number
   * below an object or array. `label` gets the value's text and `{ key }`.
   */
  keys?: (key: string) => boolean;
}

/**
 * Payment card numbers: 13 to 19 digits, optionally grouped by spaces or dashes, passing the Luhn check. The label
 * keeps the last four digits (what a receipt shows), e.g. `card-1111`.
 */
export function cardNumbers(): Redactor {
  return {
    name: 'card',
    pattern: /(?<!\d)\d(?:[ -]?\d){12,18}(?!\d)/g,
    accept: (match) => luhn(match.replace(/[ -]/g, '')),
    label: (match) => `card-${match.replace(/[ -]/g, '').slice(-4)}`,
  };
}

/** E-mail addresses (a pragmatic pattern, not RFC 5322). */
export function emailAddresses(): Redactor {
  return { name: 'email', pattern: /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g };
}

/** International bank account numbers (two letters, two check digits, 11-30 letters or digits, optionally grouped). */
export function ibans(): Redactor {
  return {
    name: 'iban',
    pattern: /\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b/g,
    accept: (match) => ibanChecksum(match.replace(/ /g, '')),
    label: (match) => `iban-${match.replace(/ /g, '').slice(-4).toLowerCase()}`,
  };
}

function luhn(digits: string): boolean {
  if (!/^\d{13,19}$/.test(digits)) return false;
  let sum = 0;
  for (let i = 0; i < digits.length; i += 1) {
    let digit = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
  }
  return sum % 10 === 0;
}

function ibanChecksum(iban: string): boolean {
  const rearranged = iban.slice(4) + iban.slice(0, 4);
  let remainder = 0;
  for (const char of rearranged) {
    const value = /\d/.test(char) ? char : String(char.charCodeAt(0) - 55);
    for (const digit of value) remainder = (remainder * 10 + Number(digit)) % 97;
  }
  return remainder === 1;
}
