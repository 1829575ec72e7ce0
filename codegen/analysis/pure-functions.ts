// What a pure function (a key, and whatever else the purity analysis checks) may call and read,
// and what is known to be nondeterministic. Everything not listed here (and not a helper that
// codegen can follow and prove pure) is a finding (LF002 for a key): a key must give the same
// string on every retry, worker and restart, so "probably pure" is not good enough.

import type { NondeterministicSource } from '../model/purity.js';

/** Global functions a key may call. */
export const PURE_GLOBAL_FUNCTIONS: ReadonlySet<string> = new Set([
  'String',
  'Number',
  'Boolean',
  'BigInt',
  'parseInt',
  'parseFloat',
  'isNaN',
  'isFinite',
  'encodeURIComponent',
  'encodeURI',
  'decodeURIComponent',
  'decodeURI',
]);

/** Global values a key may read. */
export const PURE_GLOBAL_VALUES: ReadonlySet<string> = new Set(['undefined', 'NaN', 'Infinity']);

/** Static members of global namespaces a key may call (`Math.random` is deliberately absent). */
export const PURE_NAMESPACE_MEMBERS: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  [
    'Math',
    new Set([
      'abs', 'ceil', 'floor', 'round', 'trunc', 'sign', 'min', 'max', 'pow', 'sqrt', 'cbrt', 'hypot',
      'log', 'log2', 'log10', 'exp',
    ]),
  ],
  ['JSON', new Set(['stringify', 'parse'])],
  ['Number', new Set(['isInteger', 'isSafeInteger', 'isFinite', 'isNaN', 'parseInt', 'parseFloat'])],
  ['String', new Set(['fromCharCode', 'fromCodePoint', 'raw'])],
  ['Object', new Set(['keys', 'values', 'entries', 'fromEntries', 'freeze'])],
  ['Array', new Set(['isArray', 'from', 'of'])],
  ['Date', new Set(['UTC', 'parse'])],
]);

/**
 * Methods a key may call on a value it computed or read. Values in a key come from JSON (input,
 * step outputs) or from the functions above, so these names can only mean the string, number,
 * array and hash methods listed. Locale- and time-zone-dependent methods are left out on purpose.
 */
export const PURE_METHODS: ReadonlySet<string> = new Set([
  // number
  'toFixed', 'toPrecision', 'toString', 'valueOf',
  // string
  'padStart', 'padEnd', 'toLowerCase', 'toUpperCase', 'trim', 'trimStart', 'trimEnd', 'slice',
  'substring', 'split', 'concat', 'replace', 'replaceAll', 'repeat', 'at', 'charAt', 'charCodeAt',
  'codePointAt', 'startsWith', 'endsWith', 'includes', 'indexOf', 'lastIndexOf', 'normalize',
  // array (non-mutating)
  'join', 'map', 'filter', 'reduce', 'some', 'every', 'find', 'findIndex', 'flat', 'flatMap',
  'toSorted', 'toReversed', 'keys', 'values', 'entries',
  // Date built from a value (new Date(input.at)), in UTC only
  'toISOString', 'toJSON', 'getTime',
  // node:crypto hashes (createHash(...).update(...).digest(...))
  'update', 'digest',
]);

/** Members of global objects that read the clock, randomness or the environment. */
export const NONDETERMINISTIC_MEMBERS: ReadonlyMap<string, ReadonlyMap<string, NondeterministicSource>> = new Map<
  string,
  ReadonlyMap<string, NondeterministicSource>
>([
  ['Date', new Map([['now', 'clock']])],
  ['performance', new Map([['now', 'clock'], ['timeOrigin', 'clock']])],
  ['Math', new Map([['random', 'random']])],
  ['crypto', new Map<string, NondeterministicSource>([['randomUUID', 'uuid'], ['getRandomValues', 'random'], ['subtle', 'random']])],
]);

/** Global objects whose every member is environment or process state. */
export const NONDETERMINISTIC_GLOBALS: ReadonlyMap<string, NondeterministicSource> = new Map([
  ['process', 'env'],
  ['performance', 'clock'],
  ['crypto', 'random'],
  ['navigator', 'env'],
  ['location', 'env'],
  ['document', 'env'],
  ['window', 'env'],
  ['localStorage', 'env'],
  ['sessionStorage', 'env'],
]);

/** What `receiver.member` of a global object reads (`Date.now`, `process.env`); member null when computed. */
export function nondeterministicMember(receiver: string, member: string | null): NondeterministicSource | undefined {
  return (member === null ? undefined : NONDETERMINISTIC_MEMBERS.get(receiver)?.get(member)) ?? NONDETERMINISTIC_GLOBALS.get(receiver);
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

/** Functions imported from these modules are allowed in a key. */
export const PURE_MODULE_FUNCTIONS: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  ['node:crypto', new Set(['createHash', 'createHmac'])],
  ['crypto', new Set(['createHash', 'createHmac'])],
]);

/** Imports from these modules are non-deterministic whatever they are; value = the source reported. */
export const NONDETERMINISTIC_MODULES: ReadonlyMap<string, NondeterministicSource> = new Map([
  ['node:fs', 'io'], ['fs', 'io'], ['node:fs/promises', 'io'], ['fs/promises', 'io'],
  ['node:os', 'env'], ['os', 'env'], ['node:process', 'env'], ['process', 'env'],
  ['node:child_process', 'io'], ['child_process', 'io'], ['node:net', 'io'], ['net', 'io'],
  ['node:http', 'io'], ['http', 'io'], ['node:https', 'io'], ['https', 'io'],
  ['node:perf_hooks', 'clock'], ['perf_hooks', 'clock'], ['node:timers', 'io'], ['timers', 'io'],
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
