// What the purity analysis knows about the code it does not analyse: the standard library, and
// the few modules it can name. A function the runtime evaluates (a key, a request, a condition…)
// must give the same value on every retry, worker and restart, so codegen lists what is IMPURE in
// the standard library — the clock, randomness, the environment, I/O, the locale and time zone,
// garbage collection — and treats every other global of TypeScript's ES lib (plus Node's
// `Buffer`, `URL`, `TextEncoder`…) as pure on the values it is given. A global that is not part
// of the standard library, a package's function or a class codegen cannot follow stays a
// finding (LF002 when called, LF004 when read): "probably pure" is not good enough.

import { ts } from 'ts-morph';
import type { NondeterministicSource } from '../model/purity.js';

/** Global functions and constructors of the standard library, pure unless IMPURE_GLOBAL_FUNCTIONS (or a rule below) says otherwise. */
export const PURE_GLOBAL_FUNCTIONS: ReadonlySet<string> = new Set([
  'String',
  'Number',
  'Boolean',
  'BigInt',
  'Symbol',
  'Object',
  'Array',
  'RegExp',
  'Date',
  'parseInt',
  'parseFloat',
  'isNaN',
  'isFinite',
  'encodeURIComponent',
  'encodeURI',
  'decodeURIComponent',
  'decodeURI',
  'escape',
  'unescape',
  'structuredClone',
  'atob',
  'btoa',
  'Map',
  'Set',
  'Promise',
  'Proxy',
  'Error',
  'TypeError',
  'RangeError',
  'SyntaxError',
  'ReferenceError',
  'EvalError',
  'URIError',
  'AggregateError',
  'ArrayBuffer',
  'DataView',
  'Int8Array',
  'Uint8Array',
  'Uint8ClampedArray',
  'Int16Array',
  'Uint16Array',
  'Int32Array',
  'Uint32Array',
  'Float32Array',
  'Float64Array',
  'BigInt64Array',
  'BigUint64Array',
  'TextEncoder',
  'TextDecoder',
  'URL',
  'URLSearchParams',
]);

/** Global values of the standard library a function may read. */
export const PURE_GLOBAL_VALUES: ReadonlySet<string> = new Set(['undefined', 'NaN', 'Infinity', 'arguments']);

/**
 * Global namespaces of the standard library whose members are pure, but for those
 * NONDETERMINISTIC_MEMBERS lists (`Math.random`) and Intl's rule (INTL_NEEDS_TIME_ZONE).
 */
export const PURE_NAMESPACES: ReadonlySet<string> = new Set([
  'Math',
  'JSON',
  'Reflect',
  'Intl',
  'Buffer',
  // The constructors' static members (Object.entries, Array.from, Number.isInteger, Date.UTC…).
  ...PURE_GLOBAL_FUNCTIONS,
]);

/** Kept for callers that list the pure namespaces by name (name-uses.ts). */
export const PURE_NAMESPACE_MEMBERS: ReadonlySet<string> = PURE_NAMESPACES;

/** Members of global objects that read the clock, randomness, the environment or do I/O. */
export const NONDETERMINISTIC_MEMBERS: ReadonlyMap<string, ReadonlyMap<string, NondeterministicSource>> = new Map<
  string,
  ReadonlyMap<string, NondeterministicSource>
>([
  ['Date', new Map([['now', 'clock']])],
  [
    'performance',
    new Map([
      ['now', 'clock'],
      ['timeOrigin', 'clock'],
    ]),
  ],
  [
    'process',
    new Map<string, NondeterministicSource>([
      ['hrtime', 'clock'],
      ['uptime', 'clock'],
      ['cpuUsage', 'clock'],
    ]),
  ],
  ['Math', new Map([['random', 'random']])],
  [
    'crypto',
    new Map<string, NondeterministicSource>([
      ['randomUUID', 'uuid'],
      ['getRandomValues', 'random'],
      ['subtle', 'random'],
    ]),
  ],
  // Uninitialised memory: whatever the allocator hands back.
  [
    'Buffer',
    new Map<string, NondeterministicSource>([
      ['allocUnsafe', 'random'],
      ['allocUnsafeSlow', 'random'],
    ]),
  ],
  ['Temporal', new Map([['Now', 'clock']])],
]);

/** Global objects whose every other member is the clock, the environment, randomness or I/O. */
export const NONDETERMINISTIC_GLOBALS: ReadonlyMap<string, NondeterministicSource> = new Map([
  ['process', 'env'],
  ['performance', 'clock'],
  ['crypto', 'random'],
  ['console', 'io'],
  ['Atomics', 'io'],
  ['navigator', 'env'],
  ['location', 'env'],
  ['document', 'env'],
  ['window', 'env'],
  ['localStorage', 'env'],
  ['sessionStorage', 'env'],
  // What they hold lives until the garbage collector decides otherwise.
  ['WeakRef', 'gc'],
  ['FinalizationRegistry', 'gc'],
  ['WeakMap', 'gc'],
  ['WeakSet', 'gc'],
]);

/** What `receiver.member` of a global object reads (`Date.now`, `process.env`); member null when computed. */
export function nondeterministicMember(receiver: string, member: string | null): NondeterministicSource | undefined {
  return (
    (member === null ? undefined : NONDETERMINISTIC_MEMBERS.get(receiver)?.get(member)) ??
    NONDETERMINISTIC_GLOBALS.get(receiver)
  );
}

/** Global functions that do I/O or schedule work. */
export const IO_GLOBAL_FUNCTIONS: ReadonlySet<string> = new Set([
  'fetch',
  'require',
  'setTimeout',
  'setInterval',
  'setImmediate',
  'queueMicrotask',
  'eval',
  'Function',
]);

/**
 * Methods that are impure whatever value they are called on: no standard-library value has a
 * pure method of these names, and the values a function is given (JSON input and outputs) have
 * none of their own — so `const d = Date; d.now()` is still the clock.
 */
const IMPURE_METHODS: ReadonlyMap<string, NondeterministicSource> = new Map<string, NondeterministicSource>([
  ['now', 'clock'],
  ['hrtime', 'clock'],
  ['uptime', 'clock'],
  ['random', 'random'],
  ['getRandomValues', 'random'],
  ['randomBytes', 'random'],
  ['randomInt', 'random'],
  ['randomFill', 'random'],
  ['randomFillSync', 'random'],
  ['randomUUID', 'uuid'],
  ['deref', 'gc'],
  // A Date's local-time getters and setters and its local-time strings (the getUTC… ones are pure).
  ...[
    'getFullYear',
    'getYear',
    'getMonth',
    'getDate',
    'getDay',
    'getHours',
    'getMinutes',
    'getSeconds',
    'getMilliseconds',
    'getTimezoneOffset',
    'setFullYear',
    'setYear',
    'setMonth',
    'setDate',
    'setHours',
    'setMinutes',
    'setSeconds',
    'setMilliseconds',
    'toDateString',
    'toTimeString',
  ].map((name): [string, NondeterministicSource] => [name, 'locale']),
]);

/**
 * Methods that read or move the state of the object they are called on (an iterator, a Map, a
 * Set, an array, a /g regular expression): on a module-level value a call made, that is state.
 */
export const STATEFUL_METHODS: ReadonlySet<string> = new Set([
  'next',
  'return',
  'throw',
  'get',
  'has',
  'set',
  'add',
  'delete',
  'clear',
  'push',
  'pop',
  'shift',
  'unshift',
  'splice',
  'sort',
  'reverse',
  'fill',
  'copyWithin',
  'exec',
  'test',
  'forEach',
  'entries',
  'keys',
  'values',
]);

/** Intl constructors whose result depends on the time zone unless one is given (besides the locale). */
const INTL_NEEDS_TIME_ZONE: ReadonlySet<string> = new Set(['DateTimeFormat']);
/** Intl members that take no locale. */
const INTL_WITHOUT_LOCALE: ReadonlySet<string> = new Set(['getCanonicalLocales', 'supportedValuesOf', 'Locale']);

/**
 * Whether calling `member` with `args` on a value is impure, and why: the IMPURE_METHODS, and the
 * locale-sensitive methods unless given an explicit locale (and, on a Date, a time zone).
 * `receiverIsDate` is true when the receiver is known to be a Date (`new Date(...)`).
 */
export function impureMethod(
  member: string,
  args: readonly ts.Expression[],
  receiverIsDate: boolean,
): NondeterministicSource | undefined {
  const listed = IMPURE_METHODS.get(member);
  if (listed !== undefined) return listed;
  switch (member) {
    case 'toLocaleString':
      return givesLocale(args[0]) && (!receiverIsDate || givesTimeZone(args[1])) ? undefined : 'locale';
    case 'toLocaleDateString':
    case 'toLocaleTimeString':
      return givesLocale(args[0]) && givesTimeZone(args[1]) ? undefined : 'locale';
    case 'toLocaleUpperCase':
    case 'toLocaleLowerCase':
      return givesLocale(args[0]) ? undefined : 'locale';
    case 'localeCompare':
      return givesLocale(args[1]) ? undefined : 'locale';
    case 'toString':
      // A Date's toString is local time; a number's or an array's is not.
      return receiverIsDate ? 'locale' : undefined;
    default:
      return undefined;
  }
}

/** Whether `Intl.<member>(args)` (with or without new) depends on the process's locale or time zone. */
export function intlDependsOnLocale(member: string | null, args: readonly ts.Expression[]): boolean {
  if (member === null) return true;
  if (INTL_WITHOUT_LOCALE.has(member)) return false;
  if (!givesLocale(args[0])) return true;
  return INTL_NEEDS_TIME_ZONE.has(member) && !givesTimeZone(args[1]);
}

/** `new Date(...)` with these arguments reads the clock (none) or the local time zone (year, month, …). */
export function dateConstructorSource(argumentCount: number): NondeterministicSource | undefined {
  if (argumentCount === 0) return 'clock';
  return argumentCount >= 2 ? 'locale' : undefined;
}

function givesLocale(argument: ts.Expression | undefined): boolean {
  return (
    argument !== undefined &&
    argument.kind !== ts.SyntaxKind.UndefinedKeyword &&
    !(ts.isIdentifier(argument) && argument.text === 'undefined')
  );
}

function givesTimeZone(argument: ts.Expression | undefined): boolean {
  if (argument === undefined || !ts.isObjectLiteralExpression(argument)) return false;
  return argument.properties.some(
    (p) =>
      p.name !== undefined && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name)) && p.name.text === 'timeZone',
  );
}

/** Functions imported from these modules are pure. */
const PATH_FUNCTIONS = ['join', 'basename', 'dirname', 'extname', 'normalize', 'parse', 'format', 'isAbsolute'];
const QUERYSTRING_FUNCTIONS = ['stringify', 'parse', 'escape', 'unescape', 'encode', 'decode'];
export const PURE_MODULE_FUNCTIONS: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  ['node:crypto', new Set(['createHash', 'createHmac'])],
  ['crypto', new Set(['createHash', 'createHmac'])],
  // Not resolve, relative or toNamespacedPath: they read the working directory.
  ['node:path', new Set(PATH_FUNCTIONS)],
  ['path', new Set(PATH_FUNCTIONS)],
  ['node:querystring', new Set(QUERYSTRING_FUNCTIONS)],
  ['querystring', new Set(QUERYSTRING_FUNCTIONS)],
]);

/** Imports from these modules are non-deterministic whatever they are; value = the source reported. */
export const NONDETERMINISTIC_MODULES: ReadonlyMap<string, NondeterministicSource> = new Map([
  ['node:fs', 'io'],
  ['fs', 'io'],
  ['node:fs/promises', 'io'],
  ['fs/promises', 'io'],
  ['node:os', 'env'],
  ['os', 'env'],
  ['node:process', 'env'],
  ['process', 'env'],
  ['node:child_process', 'io'],
  ['child_process', 'io'],
  ['node:net', 'io'],
  ['net', 'io'],
  ['node:http', 'io'],
  ['http', 'io'],
  ['node:https', 'io'],
  ['https', 'io'],
  ['node:perf_hooks', 'clock'],
  ['perf_hooks', 'clock'],
  ['node:timers', 'io'],
  ['timers', 'io'],
]);

/** Members of node:crypto that are random. */
export const NONDETERMINISTIC_CRYPTO_EXPORTS: ReadonlyMap<string, NondeterministicSource> = new Map([
  ['randomUUID', 'uuid'],
  ['randomBytes', 'random'],
  ['randomInt', 'random'],
  ['randomFill', 'random'],
  ['randomFillSync', 'random'],
  ['getRandomValues', 'random'],
  ['webcrypto', 'random'],
]);

export function isCryptoModule(specifier: string): boolean {
  return specifier === 'node:crypto' || specifier === 'crypto';
}

/**
 * A module-level const whose value is state that changes as code uses it: an object or array
 * literal not `as const` (reason 'mutable-object'), an instance (`new Map()`, `new Counter()`)
 * or a regular expression with the g or y flag, whose `lastIndex` moves with every match
 * ('mutable-instance'); null for a value that cannot change.
 */
export function mutableInitializer(
  initializer: ts.Expression,
  isMutableLiteral: (e: ts.Expression) => boolean,
): 'mutable-object' | 'mutable-instance' | null {
  if (isMutableLiteral(initializer)) return 'mutable-object';
  let node = initializer;
  while (
    ts.isParenthesizedExpression(node) ||
    ts.isAsExpression(node) ||
    ts.isSatisfiesExpression(node) ||
    ts.isNonNullExpression(node)
  ) {
    node = node.expression;
  }
  if (ts.isNewExpression(node)) {
    // Immutable once built: a formatter given its locale (Intl's rule applies to the call), a URL-free codec.
    const callee = node.expression;
    const immutable =
      (ts.isPropertyAccessExpression(callee) &&
        ts.isIdentifier(callee.expression) &&
        callee.expression.text === 'Intl') ||
      (ts.isIdentifier(callee) && (callee.text === 'TextEncoder' || callee.text === 'TextDecoder'));
    return immutable ? null : 'mutable-instance';
  }
  if (ts.isRegularExpressionLiteral(node)) {
    const flags = node.text.slice(node.text.lastIndexOf('/') + 1);
    return flags.includes('g') || flags.includes('y') ? 'mutable-instance' : null;
  }
  return null;
}
