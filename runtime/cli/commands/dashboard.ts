import { existsSync } from 'node:fs';
import {
  assertServable,
  DEFAULT_DASHBOARD_HOST,
  DEFAULT_DASHBOARD_PORT,
  serveDashboard,
} from '../../dashboard/serve-dashboard.js';
import { defineCommand, integerOption, UsageError } from '../command.js';
import { toJsonDocument } from '../../presentation/format-values.js';
import { DEFAULT_WORKFLOWS_MODULE, loadWorkflowsModule } from '../load-workflows.js';

export const TOKEN_ENV = 'LEDGERFLOW_DASHBOARD_TOKEN';

export const dashboardCommand = defineCommand({
  name: 'dashboard',
  summary: 'serve the web dashboard: runs, timelines, the effect ledger, open intents, operator actions',
  usage: '[--port <n>] [--host <address>] [--token <token>] [--workflows <module>] [options]',
  description:
    'Serves the web dashboard until SIGTERM/SIGINT: runs (filtered, paged), each run with a timeline of its\n' +
    'attempts, its ledger rows, step results, waits and children; open intents oldest first; queues and\n' +
    'schedules; the audit trail of operator actions. Actions (cancel, retry a failed run, resolve an open\n' +
    'intent, pause or resume a queue or schedule) each ask for a reason, which is audited with the actor.\n\n' +
    `Bound to ${DEFAULT_DASHBOARD_HOST} by default. Any other address needs an access token (--token or\n` +
    `$${TOKEN_ENV}, at least 16 characters): open the printed address once with ?token=<token>\n` +
    '(it sets an HttpOnly cookie), or send Authorization: Bearer <token>. Every form is a POST with a CSRF\n' +
    'token. Actions are audited as dashboard@<hostname> locally, as token:<sha-256 prefix> with a token.\n' +
    `The workflows (--workflows, default ${DEFAULT_WORKFLOWS_MODULE} when it exists) check the output an\n` +
    "operator enters for a found intent against the step's schema; without them, found is refused.",
  options: {
    port: { type: 'string' },
    host: { type: 'string' },
    token: { type: 'string' },
    workflows: { type: 'string' },
  },
  optionsHelp: `  --port <n>             port to listen on (default ${DEFAULT_DASHBOARD_PORT}; 0 picks a free one)
  --host <address>       address to bind (default ${DEFAULT_DASHBOARD_HOST}; others need a token)
  --token <token>        access token (default: $${TOKEN_ENV})
  --workflows <module>   module exporting \`workflows\` (default: ${DEFAULT_WORKFLOWS_MODULE} if it exists)`,
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, json, io, openStore }) {
    const port = integerOption('port', values.port, 0) ?? DEFAULT_DASHBOARD_PORT;
    if (port > 65_535) throw new UsageError(`--port must be at most 65535 (got ${port}).`);
    const token = values.token ?? (process.env[TOKEN_ENV] || undefined);
    const host = values.host ?? DEFAULT_DASHBOARD_HOST;
    try {
      assertServable(host, token, undefined);
    } catch (error) {
      // A refused configuration (no token off loopback, a short token) is the user's to fix.
      throw new UsageError((error as Error).message);
    }
    const module = values.workflows ?? (existsSync(DEFAULT_WORKFLOWS_MODULE) ? DEFAULT_WORKFLOWS_MODULE : undefined);
    const workflows = module === undefined ? [] : await loadWorkflowsModule(module);
    const served = await serveDashboard({
      store: await openStore(),
      workflows,
      port,
      host,
      ...(token !== undefined ? { token } : {}),
    });
    if (json)
      io.out(toJsonDocument({ url: served.url, host: served.host, port: served.port, workflows: workflows.length }));
    else {
      const login = token === undefined ? '' : ' (open it once with ?token=<token>)';
      const found =
        module === undefined
          ? ` No workflows loaded: resolving an intent as found is refused (--workflows <module>).`
          : '';
      io.err(`Dashboard at ${served.url}${login}. Stop with Ctrl-C or SIGTERM.${found}\n`);
    }
    let stop: (signal: NodeJS.Signals) => void = () => {};
    const signal = await new Promise<NodeJS.Signals>((resolve) => {
      stop = resolve;
      process.on('SIGTERM', stop);
      process.on('SIGINT', stop);
    });
    process.off('SIGTERM', stop);
    process.off('SIGINT', stop);
    await served.close();
    if (!json) io.err(`${signal}: dashboard stopped.\n`);
    return 0;
  },
});
