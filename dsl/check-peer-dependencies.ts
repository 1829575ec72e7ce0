/**
 * Imported first by each entry point (`ledgerflow/dsl`, `ledgerflow/runtime`, `ledgerflow/testing`,
 * the CLI): loading ledgerflow with an unsupported zod fails here, with the fix in the message.
 */
import { assertPeerDependencies } from './peer-dependencies.js';

assertPeerDependencies();
