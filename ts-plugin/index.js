// The tsserver plugin's entry point (`"plugins": [{ "name": "ledgerflow/ts-plugin" }]`).
// tsserver resolves a plugin name with node10 resolution (no package `exports`), finds this
// directory's `main`, and loads it with require(); the module itself must be the factory. The
// plugin is written in TypeScript, so it is loaded through tsx's namespaced require hook, which
// compiles only what this require reaches and leaves tsserver's own require alone.
'use strict';
const { register } = require('tsx/cjs/api');

const tsx = register({ namespace: 'ledgerflow-ts-plugin' });
module.exports = tsx.require('../codegen/ts-plugin/language-service-plugin.ts', __filename).tsPluginFactory;
