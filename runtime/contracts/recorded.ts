/**
 * The value a `transactional` handler returns: its output, wrapped by `ctx.record(...)` of the
 * very transaction the runtime fences. A class with a private field is nominal, so a handler
 * that returns a plain object (and so may have written elsewhere) does not type-check.
 */
export class Recorded<TOutput> {
  readonly #output: TOutput;

  /** @internal only the runtime creates these, through `ctx.record`. */
  constructor(output: TOutput) {
    this.#output = output;
  }

  /** @internal */
  static unwrap<T>(recorded: Recorded<T>): T {
    return recorded.#output;
  }
}
