/** What the dashboard's middleware and route modules share: the request environment, the shared parts, how a page is answered. */
import type { Context } from 'hono';
import type { AnyWorkflow } from '../../dsl/workflow.js';
import {
  LedgerflowError,
  QueueNotFoundError,
  RunNotFoundError,
  ScheduleNotFoundError,
  ValidationError,
} from '../errors.js';
import type { Store } from '../store/store.js';
import type { Html } from './html.js';
import { BadRequestError } from './list-params.js';
import type { DashboardOperations } from './operations.js';
import type { PageContext } from './views/layout.js';

export interface DashboardEnv {
  Variables: { page: PageContext };
}

/** The parts the route modules share. */
export interface DashboardContext {
  readonly store: Store;
  readonly operations: DashboardOperations;
  /** A workflow definition by `name@version`. */
  readonly definitions: ReadonlyMap<string, AnyWorkflow>;
}

export function render(c: Context, page: Html, status: 200 | 400 | 403 | 404 | 409 | 500 = 200): Response {
  return c.html(page.text, status);
}

/** The HTTP status of an error a route let through: the user's mistakes are 4xx with their message. */
export function statusOf(error: unknown): 400 | 404 | 409 | 500 {
  if (error instanceof BadRequestError || error instanceof ValidationError) return 400;
  if (
    error instanceof RunNotFoundError ||
    error instanceof QueueNotFoundError ||
    error instanceof ScheduleNotFoundError
  )
    return 404;
  if (error instanceof LedgerflowError) return 409;
  return 500;
}
