import {
  type AliasedRawBuilder,
  type CompiledQuery,
  createQueryId,
  type Expression,
  PostgresQueryCompiler,
  type QueryExecutorProvider,
  type QueryResult,
  RawNode,
  sql,
  type KyselyPlugin,
  type RawBuilder,
} from 'kysely';

/**
 * Statements whose text is fixed per shape, compiled once. Kysely compiles a `sql` template by
 * walking its whole tree of nested fragments on every execution; for the worker's hot statements
 * (a group commit, the claim's CTEs) that walk and the building of the tree were a fifth of a
 * step's main-thread CPU. Here a statement is built and walked once per shape, then kept as its
 * text pieces and parameters: compiling it again appends the pieces and numbers the parameters,
 * and the text and parameters are exactly what the full builder gives (tests/runtime/sql-snapshots
 * compiles both ways). Executed on its own, a shaped statement skips even that: its text is kept
 * whole, numbered once ({@link ShapedStatement}).
 */

/** Stands for a parameter given per execution ({@link shapeOf}). */
class Slot {
  constructor(readonly index: number) {}
}

/** A placeholder no statement text contains: where each parameter goes. */
const MARK = '\u0000ledgerflow-parameter\u0000';

/** The PostgreSQL compiler, writing {@link MARK} where it would write `$n`. */
class MarkingCompiler extends PostgresQueryCompiler {
  protected override getCurrentParameterPlaceholder(): string {
    return MARK;
  }
}

/**
 * A statement's text pieces around its parameters, and what goes in each: a per-execution slot or
 * a constant. `text` is the statement alone, its parameters numbered `$1…$n` as Kysely's compiler
 * numbers them: the same string object every execution, so that the `pg` store's statement
 * naming compares it by identity (statement-names.ts) and the server parses it once per connection.
 */
interface Shape {
  readonly pieces: readonly string[];
  readonly take: ReadonlyArray<Slot | { readonly value: unknown }>;
  readonly text: string;
  readonly node: RawNode;
  readonly queryId: ReturnType<typeof createQueryId>;
}

function compileShape(statement: RawBuilder<unknown>): Shape {
  const compiled = new MarkingCompiler().compileQuery(statement.toOperationNode(), createQueryId());
  const pieces = compiled.sql.split(MARK);
  if (pieces.length !== compiled.parameters.length + 1) {
    throw new Error(
      `statement-shapes: ${compiled.parameters.length} parameters but ${pieces.length - 1} placeholders (a text that contains the marker?)`,
    );
  }
  const text = pieces.reduce((all, piece, i) => `${all}$${i}${piece}`);
  return {
    pieces,
    take: compiled.parameters.map((p) => (p instanceof Slot ? p : { value: p })),
    text,
    node: RawNode.createWithSql(text),
    queryId: createQueryId(),
  };
}

/**
 * A statement of a known shape with its parameters: a `RawBuilder` (it embeds in a `sql`
 * template like any), whose tree is only built when something asks for it. Executed or compiled
 * on an executor without plugins (the runtime's Kyselys have none), it is the shape's text and
 * these parameters as they are, without walking a tree; with plugins, exactly the built
 * statement's execution.
 */
class ShapedStatement<T> implements RawBuilder<T> {
  readonly #shape: Shape;
  readonly #parameters: readonly unknown[];
  #built: RawBuilder<T> | undefined;

  constructor(shape: Shape, parameters: readonly unknown[]) {
    this.#shape = shape;
    this.#parameters = parameters;
  }

  /** The statement as Kysely builds it: the tag's fragments are the pieces, a placeholder per parameter. */
  #raw(): RawBuilder<T> {
    this.#built ??= sql<T>(this.#shape.pieces as unknown as TemplateStringsArray, ...this.#parameters);
    return this.#built;
  }

  get expressionType(): T | undefined {
    return undefined;
  }

  get isRawBuilder(): true {
    return true;
  }

  as<A extends string>(alias: A | Expression<unknown>): AliasedRawBuilder<T, A> {
    return this.#raw().as(alias as A);
  }

  $castTo<C>(): RawBuilder<C> {
    return this.#raw().$castTo<C>();
  }

  $notNull(): RawBuilder<Exclude<T, null>> {
    return this.#raw().$notNull();
  }

  withPlugin(plugin: KyselyPlugin): RawBuilder<T> {
    return this.#raw().withPlugin(plugin);
  }

  toOperationNode(): RawNode {
    return this.#raw().toOperationNode();
  }

  compile(executorProvider: QueryExecutorProvider): CompiledQuery<T> {
    if (executorProvider.getExecutor().plugins.length > 0) return this.#raw().compile(executorProvider);
    const { text, node, queryId } = this.#shape;
    return { sql: text, parameters: this.#parameters, query: node, queryId };
  }

  /** As Kysely's own `execute`: the executor runs what {@link compile} gives for it. */
  execute(executorProvider: QueryExecutorProvider): Promise<QueryResult<T>> {
    return executorProvider.getExecutor().executeQuery<T>(this.compile(executorProvider));
  }
}

function fromShape<T>(shape: Shape, values: readonly unknown[]): RawBuilder<T> {
  const take = shape.take;
  const parameters = new Array<unknown>(take.length);
  for (let i = 0; i < take.length; i += 1) {
    const t = take[i]!;
    parameters[i] = t instanceof Slot ? values[t.index] : t.value;
  }
  return new ShapedStatement<T>(shape, parameters);
}

/**
 * The same statement as `statement`, flattened: its parameters are constants (a builder cached
 * per worker, such as the claim's CTEs). Embedded in a larger `sql` template it compiles to the
 * same text, its parameters numbered in their place.
 */
export function flattened<T>(statement: RawBuilder<T>): RawBuilder<T> {
  return fromShape(compileShape(statement), []);
}

/**
 * A statement built once per shape: `build` gets one slot per value and must interpolate each
 * slot as a parameter as it is (`${slot}`), never compute with it; everything else it reads must
 * be fixed for `cache` (the caller's per-shape cache). Later calls only fill the slots.
 */
export function shapeOf<T, V extends readonly unknown[]>(
  cache: ShapeSlot,
  values: V,
  build: (...slots: { [K in keyof V]: V[K] }) => RawBuilder<T>,
): RawBuilder<T> {
  if (cache.shape === undefined) {
    const slots = values.map((_, i) => new Slot(i)) as unknown as { [K in keyof V]: V[K] };
    cache.shape = compileShape(build(...slots));
  }
  return fromShape(cache.shape, values);
}

/**
 * {@link shapeOf} for values by name: `build` gets a record of slots with `values`' names. Every
 * call for one `cache` must give the same names in the same order (a record built by one function).
 */
export function shapeOfRecord<T, V extends object>(
  cache: ShapeSlot,
  values: V,
  build: (slots: V) => RawBuilder<T>,
): RawBuilder<T> {
  return shapeOf(cache, Object.values(values) as unknown[], (...slots) => build(recordOfSlots(values, slots)));
}

/**
 * The record `values` with each value replaced by its slot, in `values`' key order (as
 * `Object.values` lists them): what a shape's build sees of a record of values it sends.
 */
export function recordOfSlots<V extends object>(values: V, slots: readonly unknown[]): V {
  return Object.fromEntries(Object.keys(values).map((name, i) => [name, slots[i]])) as V;
}

/** Where {@link shapeOf} keeps one shape of a statement. */
export interface ShapeSlot {
  shape?: Shape;
}

/**
 * One statement's shapes, by a key naming the shape and, for a shape that embeds something built
 * per object (a fused claim's workflow registry), by that object too (held weakly).
 */
export class Shapes {
  readonly #plain = new Map<string, ShapeSlot>();
  readonly #byOwner = new WeakMap<object, Map<string, ShapeSlot>>();

  for(key: string, owner?: object): ShapeSlot {
    let slots = this.#plain;
    if (owner !== undefined) {
      const owned = this.#byOwner.get(owner);
      if (owned === undefined) this.#byOwner.set(owner, (slots = new Map()));
      else slots = owned;
    }
    let slot = slots.get(key);
    if (slot === undefined) slots.set(key, (slot = {}));
    return slot;
  }
}

export type { Shape };
