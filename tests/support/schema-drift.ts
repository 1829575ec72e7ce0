import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { Node, Project, SyntaxKind, type InterfaceDeclaration } from 'ts-morph';
import type { Store } from '../../runtime/store/store.js';

const TABLES_FILE = fileURLToPath(new URL('../../runtime/store/tables.ts', import.meta.url));
const TABLES_DISPLAY = 'runtime/store/tables.ts';
const SCHEMA = 'ledgerflow';

/** One column as a side declares it: nullable or not. */
type Columns = Map<string, boolean>;

/**
 * The hand-written Kysely types of the core schema, read from runtime/store/tables.ts: per
 * `LedgerflowDatabase` key (`ledgerflow.table`), the interface it maps to and its properties,
 * nullable when the property's type is a union with `null`.
 */
export function declaredTables(): Map<string, { readonly interfaceName: string; readonly columns: Columns }> {
  const project = new Project({ skipAddingFilesFromTsConfig: true, skipFileDependencyResolution: true });
  const file = project.addSourceFileAtPath(TABLES_FILE);
  const database = file.getInterfaceOrThrow('LedgerflowDatabase');
  const tables = new Map<string, { interfaceName: string; columns: Columns }>();
  for (const property of database.getProperties()) {
    const table = property.getName().replace(/^['"]|['"]$/g, '');
    const interfaceName = property.getTypeNodeOrThrow().getText();
    const declaration: InterfaceDeclaration | undefined = file.getInterface(interfaceName);
    if (declaration === undefined) {
      throw new Error(
        `${TABLES_DISPLAY}: LedgerflowDatabase['${table}'] is ${interfaceName}, not an interface declared in that file`,
      );
    }
    const columns: Columns = new Map();
    for (const column of declaration.getProperties()) {
      const type = column.getTypeNodeOrThrow();
      const nullable = Node.isUnionTypeNode(type) && type.getTypeNodes().some((member) => isNullType(member));
      columns.set(column.getName(), nullable);
    }
    tables.set(table, { interfaceName, columns });
  }
  return tables;
}

function isNullType(node: Node): boolean {
  return Node.isLiteralTypeNode(node) && node.getLiteral().getKind() === SyntaxKind.NullKeyword;
}

/** The migrated database's tables in schema `ledgerflow` (`ledgerflow.table` → column → is_nullable). */
export async function liveTables(store: Store): Promise<Map<string, Columns>> {
  const { rows } = await sql<{ table_name: string; column_name: string; is_nullable: string }>`
    SELECT table_name, column_name, is_nullable
      FROM information_schema.columns
     WHERE table_schema = ${SCHEMA}
     ORDER BY table_name, ordinal_position`.execute(store.db);
  const tables = new Map<string, Columns>();
  for (const row of rows) {
    const key = `${SCHEMA}.${row.table_name}`;
    let columns = tables.get(key);
    if (columns === undefined) tables.set(key, (columns = new Map()));
    columns.set(row.column_name, row.is_nullable === 'YES');
  }
  return tables;
}

/**
 * Every difference between the migrated core schema and runtime/store/tables.ts, one readable
 * line each naming the table and column: missing on either side, or nullability that differs.
 * Empty when they agree.
 */
export async function schemaDrift(store: Store): Promise<string[]> {
  const declared = declaredTables();
  const live = await liveTables(store);
  const problems: string[] = [];
  for (const [table, columns] of live) {
    const types = declared.get(table);
    if (types === undefined) {
      problems.push(`${table}: table in the database but not in LedgerflowDatabase in ${TABLES_DISPLAY}`);
      continue;
    }
    for (const [column, nullable] of columns) {
      const declaredNullable = types.columns.get(column);
      if (declaredNullable === undefined) {
        problems.push(
          `${table}.${column}: column in the database but not in ${types.interfaceName} in ${TABLES_DISPLAY}`,
        );
      } else if (declaredNullable !== nullable) {
        problems.push(
          nullable
            ? `${table}.${column}: nullable in the database, but its type in ${types.interfaceName} has no \`| null\``
            : `${table}.${column}: NOT NULL in the database, but its type in ${types.interfaceName} includes \`| null\``,
        );
      }
    }
  }
  for (const [table, types] of declared) {
    const columns = live.get(table);
    if (columns === undefined) {
      problems.push(`${table}: in LedgerflowDatabase in ${TABLES_DISPLAY} but not in the database`);
      continue;
    }
    for (const column of types.columns.keys()) {
      if (!columns.has(column))
        problems.push(`${table}.${column}: in ${types.interfaceName} in ${TABLES_DISPLAY} but not in the database`);
    }
  }
  return problems;
}
