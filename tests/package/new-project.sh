# The commands docs/install.md gives for installing ledgerflow today and starting a new project
# (it includes the two regions). tests/package/new-project.test.ts runs each region as it stands:
# `pack` in the repository, `new-project` in an empty directory beside a directory `ledgerflow`
# that holds the tarball, as the docs lay them out; then the next steps `init` prints.

# #region pack
npm pack
# #endregion pack

# #region new-project
npm init -y
npm install ../ledgerflow/ledgerflow-0.1.0.tgz zod tsx
npx ledgerflow init
# #endregion new-project
