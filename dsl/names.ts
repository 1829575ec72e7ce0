// The name rules, in one place: `workflow()` enforces them when a workflow module loads, and
// codegen checks the same ones statically (LF008) before anything runs.

/** A workflow name: lower-case letters, digits and -, starting with a letter; at most 63 characters. */
export const WORKFLOW_NAME = /^[a-z][a-z0-9-]{0,62}$/;

/** A step name: letters, digits and _, starting with a letter or _; at most 63 characters. */
export const STEP_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
