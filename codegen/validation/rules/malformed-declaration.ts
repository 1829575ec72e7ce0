import type { Rule } from '../rule.js';

/** LF008: a declaration codegen cannot read without running the code. */
export const malformedDeclaration: Rule = ({ analysis }) =>
  analysis.malformed.map((m) => ({ code: 'LF008', severity: 'error', ...m.location, message: m.message }));
