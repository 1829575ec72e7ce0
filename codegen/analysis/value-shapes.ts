// The shapes of the value analysis (codegen/model/key-values.ts `ValueShape`) and what can be
// asked of one: the shape at a path below it, and what it becomes when turned into text. The
// zod schemas (schema-shapes.ts) and the expressions of a step's functions (shape-reader.ts)
// are read into these.

import type { UnstableText, ValueShape } from '../model/key-values.js';

export const UNKNOWN: ValueShape = { kind: 'unknown' };
export const PRIMITIVE: ValueShape = { kind: 'primitive' };

/** One shape for a value that may be any of `members`. */
export function union(members: readonly ValueShape[]): ValueShape {
  return members.length === 1 ? members[0]! : { kind: 'union', members };
}

/** The shape at a dotted path (`customer.id`, `lines[0].sku`) below a value of `shape`. */
export function shapeAt(shape: ValueShape, path: string): ValueShape {
  let current = shape;
  for (const segment of path.match(/\[[^\]]*\]|[^.[\]]+/g) ?? []) {
    current = member(current, segment);
    if (current.kind === 'unknown') return current;
  }
  return current;
}

function member(shape: ValueShape, segment: string): ValueShape {
  switch (shape.kind) {
    case 'object':
      return shape.fields?.[segment.replace(/^\[["']?|["']?\]$/g, '')] ?? UNKNOWN;
    case 'array':
      if (segment.startsWith('[')) return shape.element;
      return segment === 'length' ? PRIMITIVE : UNKNOWN;
    case 'union':
      return union(shape.members.map((m) => member(m, segment)));
    case 'primitive':
      return segment === 'length' ? PRIMITIVE : UNKNOWN;
    default:
      return UNKNOWN;
  }
}

/** What `String(value)` of a value of this shape gives instead of its content; null when it is its content (or unknown). */
export function unstableText(shape: ValueShape): UnstableText | null {
  switch (shape.kind) {
    case 'object':
      return 'object';
    case 'date':
      return 'date';
    case 'promise':
      return 'promise';
    case 'array': {
      const element = unstableText(shape.element);
      return element === 'object' ? 'array-of-objects' : element;
    }
    case 'union':
      for (const m of shape.members) {
        const text = unstableText(m);
        if (text !== null) return text;
      }
      return null;
    case 'primitive':
    case 'unknown':
      return null;
  }
}
