import { greet } from './workflows.js';

/** Definitions without handlers: enough for `start`, refused by `worker`. */
export const workflows = [greet];
