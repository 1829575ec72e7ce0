/** A node of `EXPLAIN (FORMAT JSON)` output: the fields the plan tests read. */
export interface PlanNode {
  readonly 'Node Type': string;
  readonly 'Relation Name'?: string;
  readonly 'Index Name'?: string;
  readonly 'Actual Rows'?: number;
  readonly 'Actual Loops'?: number;
  readonly 'Rows Removed by Filter'?: number;
  readonly 'Rows Removed by Index Recheck'?: number;
  /** `Insert`, `Update`, `Delete` (ModifyTable nodes). */
  readonly Operation?: string;
  /** With `BUFFERS`: shared blocks found in / read into the buffer cache (this node and those under it). */
  readonly 'Shared Hit Blocks'?: number;
  readonly 'Shared Read Blocks'?: number;
  readonly Plans?: readonly PlanNode[];
}

/** The plan's nodes, the root first, depth first. */
export function planNodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(planNodes)];
}
