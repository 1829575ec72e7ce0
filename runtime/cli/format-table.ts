export interface Column<Row> {
  readonly header: string;
  readonly value: (row: Row) => string;
  /** Numbers read better right-aligned. Default left. */
  readonly align?: 'left' | 'right';
}

/**
 * Aligned plain-text columns separated by two spaces, header first; the last column is not
 * padded so lines carry no trailing blanks. Multi-line cell values are flattened.
 *
 * @example
 * formatTable([{ id: 'a', n: 1 }], [
 *   { header: 'ID', value: (r) => r.id },
 *   { header: 'N', value: (r) => String(r.n), align: 'right' },
 * ]);
 * // 'ID  N\na   1\n'
 */
export function formatTable<Row>(rows: readonly Row[], columns: ReadonlyArray<Column<Row>>): string {
  const cells = [columns.map((c) => c.header), ...rows.map((row) => columns.map((c) => flatten(c.value(row))))];
  const widths = columns.map((_, i) => Math.max(...cells.map((line) => line[i]!.length)));
  return `${cells
    .map((line) =>
      line
        .map((cell, i) => {
          const last = i === line.length - 1;
          if (columns[i]!.align === 'right') return cell.padStart(widths[i]!);
          return last ? cell : cell.padEnd(widths[i]!);
        })
        .join('  ')
        .trimEnd(),
    )
    .join('\n')}\n`;
}

/** A titled table (`Title:` and its rows), or `Title: none` when there are no rows. */
export function formatSection<Row>(
  title: string,
  rows: readonly Row[],
  columns: ReadonlyArray<Column<Row>>,
  none = 'none',
): string {
  return rows.length === 0 ? `${title}: ${none}\n` : `${title}:\n${formatTable(rows, columns)}`;
}

/** `label  value` lines with the labels aligned, for one record. */
export function formatFields(fields: ReadonlyArray<readonly [string, string]>): string {
  const width = Math.max(...fields.map(([label]) => label.length));
  return `${fields.map(([label, value]) => `${label.padEnd(width)}  ${value}`.trimEnd()).join('\n')}\n`;
}

function flatten(value: string): string {
  return value.replace(/\s*\n\s*/g, ' ');
}
