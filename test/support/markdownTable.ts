/** Reading the markdown tables the bench scripts print (smoke tests check their rows, not their figures). */

/** The body rows of the first markdown table in `text` (header and separator left out), as trimmed cells. */
export function markdownRows(text: string): string[][] {
  return text
    .split('\n')
    .filter((line) => line.startsWith('|'))
    .slice(2)
    .map((line) =>
      line
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
}

/** The rows of the table under the `nth` (1, 2, ...) `### heading` of `out`. */
export function tableRows(out: string, heading: string, nth = 1): string[][] {
  return markdownRows((out.split(`### ${heading}\n\n`)[nth] ?? '').split('\n\n')[0]!);
}
