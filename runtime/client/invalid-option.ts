import type { OptionProblem } from '../../dsl/option-checks.js';
import { ValidationError } from '../errors.js';

/**
 * The ValidationError a client call throws for its options (`checkOptions(schema, options,
 * invalidOption)`): the first problem as the message, `timeoutMs must be … (got 0).`, and as the
 * issue the option with what was given, `timeoutMs: 0`.
 */
export function invalidOption(problems: readonly string[], [first]: readonly OptionProblem[]): ValidationError {
  return new ValidationError(`${problems[0]}.`, [`${first!.name}: ${String(first!.given)}`]);
}
