/** A position in a source file: `file` relative to the codegen root, forward slashes; 1-based. */
export interface SourceLocation {
  readonly file: string;
  readonly line: number;
  readonly col: number;
}

export function compareLocations(a: SourceLocation, b: SourceLocation): number {
  return a.file < b.file ? -1 : a.file > b.file ? 1 : a.line - b.line || a.col - b.col;
}

/** `line 12` in the same file, `other.ts:12` elsewhere: how messages point at a second place. */
export function describeLocation(at: SourceLocation, from: SourceLocation): string {
  return at.file === from.file ? `line ${at.line}` : `${at.file}:${at.line}`;
}
