import { existsSync, readFileSync } from 'node:fs';
import { UsageError } from './command.js';

/**
 * The value of a JSON option (`--input`, `--payload`): inline JSON, or `@file.json` for a file's
 * contents. A missing file or malformed JSON is a usage error, raised before the database is
 * touched.
 *
 * @example
 * const payload = parseJsonOption('payload', values.payload); // --payload '{"paid":true}' or --payload @event.json
 */
export function parseJsonOption(name: string, raw: string): unknown {
  let text = raw;
  let where = `--${name}`;
  if (raw.startsWith('@')) {
    const file = raw.slice(1);
    if (!existsSync(file)) throw new UsageError(`--${name} ${raw}: no such file. Nothing was written.`);
    text = readFileSync(file, 'utf8');
    where = `--${name} file ${file}`;
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new UsageError(`${where} is not valid JSON: ${(error as Error).message}. Nothing was written.`);
  }
}
