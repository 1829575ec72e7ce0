import { describeLocation, type SourceLocation } from '../model/source-location.js';
import type { ViaHop } from '../model/workflow-model.js';

/**
 * `Date.now()` for a direct finding; `Date.now() at line 6, via stamp() declared at line 5` for
 * one that reaches the key through helpers or constants. Locations are relative to `at`.
 */
export function describeOrigin(
  text: string,
  at: SourceLocation,
  origin: SourceLocation,
  via: readonly ViaHop[],
): string {
  if (via.length === 0) return text;
  const hops = via
    .map(
      (hop) => `${hop.kind === 'const' ? 'const ' : ''}${hop.name} declared at ${describeLocation(hop.declaredAt, at)}`,
    )
    .join(' → ');
  return `${text} at ${describeLocation(origin, at)}, via ${hops}`;
}

export function describeHops(at: SourceLocation, via: readonly ViaHop[]): string {
  if (via.length === 0) return '';
  return ` (via ${via.map((hop) => `${hop.name} declared at ${describeLocation(hop.declaredAt, at)}`).join(' → ')})`;
}
