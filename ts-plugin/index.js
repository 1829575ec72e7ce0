// The tsserver plugin's entry point (`"plugins": [{ "name": "ledgerflow/ts-plugin" }]`).
// tsserver resolves a plugin name with node10 resolution (no package `exports`), finds this
// directory's `main`, and loads it with require(); the module itself must be the factory.
// - Installed from npm: the compiled plugin in dist/ is an ES module, loaded with require(esm)
//   (Node >=20.19 or >=22.12; editors that run tsserver on an
//   older Node get the message below instead of a bare ERR_REQUIRE_ESM).
// - In the repository: the TypeScript sources, through tsx's namespaced require hook, which
//   compiles only what this require reaches and leaves tsserver's own require alone.
'use strict';
const { existsSync } = require('node:fs');
const path = require('node:path');

const source = path.join(__dirname, '../codegen/ts-plugin/language-service-plugin.ts');
if (existsSync(source)) {
  const { register } = require('tsx/cjs/api');
  const tsx = register({ namespace: 'ledgerflow-ts-plugin' });
  module.exports = tsx.require(source, __filename).tsPluginFactory;
} else {
  try {
    module.exports = require('../dist/codegen/ts-plugin/language-service-plugin.js').tsPluginFactory;
  } catch (error) {
    if (error.code !== 'ERR_REQUIRE_ESM') throw error;
    throw new Error(
      `ledgerflow/ts-plugin needs a Node.js that can require() ES modules (>=20.19 or >=22.12); tsserver runs on ${process.version}. ` +
        'Point your editor at a newer Node (VS Code: "typescript.tsserver.nodePath").',
      { cause: error },
    );
  }
}
