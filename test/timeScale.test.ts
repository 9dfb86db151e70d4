import { describe, expect, it } from 'vitest';
import { parseTimeScale } from './support/timeScale.js';

describe('TEST_TIME_SCALE', () => {
  it('is 1 when unset or empty, else the number given', () => {
    expect(parseTimeScale(undefined)).toBe(1);
    expect(parseTimeScale(' ')).toBe(1);
    expect(parseTimeScale('3')).toBe(3);
    expect(parseTimeScale('1.5')).toBe(1.5);
  });

  it.each(['0.5', '0', '-2', 'fast', 'Infinity'])('refuses %j: a factor below 1 or not a number', (value) => {
    expect(() => parseTimeScale(value)).toThrow(
      `TEST_TIME_SCALE must be a number of at least 1 (it multiplies the tests' timeouts); got "${value}"`,
    );
  });
});
