/**
 * A call's arguments as they go back to the provider in the conversation: a JSON object, whatever the model sent.
 * Arguments that did not parse are replaced by `{}`: sent back word for word, some providers (DashScope) refuse the
 * whole next request with a 400, and one bad call would end the task. The tool result paired with the call already
 * tells the model what was wrong with them.
 */

/** `text` parsed, when it is a JSON object; otherwise `{}`. */
export function callInput(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

/** `text` as it came when it is a JSON object (what the model said, unchanged), else `'{}'`. */
export function sentArguments(text: string): string {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? text : '{}';
  } catch {
    return '{}';
  }
}
