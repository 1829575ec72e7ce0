/**
 * The size of a value's JSON text, in UTF-8 bytes, without building the text: a 100 MB input is
 * measured (and refused) without a second 100 MB copy of it in memory, and a deeply nested one
 * without recursion (JSON.stringify of 100 000 nested arrays throws a RangeError: the stack).
 *
 * Counts exactly what `Buffer.byteLength(JSON.stringify(value))` would (tests/limits checks it
 * as a property), for what JSON.stringify accepts: `toJSON` is called, `undefined`, functions and
 * symbols are left out of objects and become `null` in arrays, non-finite numbers are `null`,
 * strings are escaped as JSON.stringify escapes them (lone surrogates as `\udxxx`). Objects
 * and arrays nested deeper than `maxDepth` throw {@link JsonDepthError}.
 */
export function jsonByteLength(value: unknown, maxDepth: number): number {
  let bytes = 0;
  // Work items: a value to measure at a depth, or a fixed number of bytes (punctuation).
  const stack: Array<{ readonly value: unknown; readonly depth: number; readonly key?: string } | number> = [
    { value, depth: 0 },
  ];
  while (stack.length > 0) {
    const item = stack.pop()!;
    if (typeof item === 'number') {
      bytes += item;
      continue;
    }
    let current = item.value;
    if (
      typeof current === 'object' &&
      current !== null &&
      typeof (current as { toJSON?: unknown }).toJSON === 'function'
    ) {
      current = (current as { toJSON: (key: string) => unknown }).toJSON(item.key ?? '');
    }
    switch (typeof current) {
      case 'string':
        bytes += stringBytes(current);
        continue;
      case 'number':
        bytes += Number.isFinite(current) ? String(current).length : 4;
        continue;
      case 'boolean':
        bytes += current ? 4 : 5;
        continue;
      case 'bigint':
        throw new TypeError('Do not know how to serialize a BigInt');
      case 'object':
        break;
      default:
        // undefined, function, symbol at the top level or in an array: `null` (left out of objects, below).
        bytes += 4;
        continue;
    }
    if (current === null) {
      bytes += 4;
      continue;
    }
    const depth = item.depth + 1;
    if (depth > maxDepth) throw new JsonDepthError(maxDepth);
    // A cycle nests without end, so the depth limit ends it too.
    if (Array.isArray(current)) {
      bytes += 1; // [
      stack.push(1); // ]
      for (let i = current.length - 1; i >= 0; i--) {
        stack.push({ value: current[i], depth, key: String(i) });
        if (i > 0) stack.push(1); // ,
      }
    } else {
      bytes += 1; // {
      stack.push(1); // }
      const entries = Object.entries(current).filter(
        ([, v]) => v !== undefined && typeof v !== 'function' && typeof v !== 'symbol',
      );
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, v] = entries[i]!;
        stack.push({ value: v, depth, key });
        stack.push(stringBytes(key) + 1); // "key":
        if (i > 0) stack.push(1); // ,
      }
    }
  }
  return bytes;
}

/** A value nested deeper than the limit: it would overflow a stack (here, or in PostgreSQL's jsonb parser). */
export class JsonDepthError extends RangeError {
  override readonly name = 'JsonDepthError';
  constructor(readonly maxDepth: number) {
    super(`it nests objects/arrays more than ${maxDepth} levels deep (or refers to itself)`);
  }
}

/** Bytes of a string as a JSON string literal in UTF-8, quotes included. */
function stringBytes(text: string): number {
  let bytes = 2;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) {
      bytes +=
        c === 0x22 || c === 0x5c || c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d
          ? 2
          : c < 0x20
            ? 6
            : 1;
    } else if (c < 0x800) {
      bytes += 2;
    } else if (c >= 0xd800 && c <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4;
        i++;
      } else {
        bytes += 6;
      }
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      bytes += 6;
    } else {
      bytes += 3;
    }
  }
  return bytes;
}
