import { sql, type RawBuilder } from 'kysely';

/*
 * The hash the archive keeps of a pruned run's input and of a pruned event's payload. Here, below
 * retention and the client, because a prune writes it and a start or a send compares against it:
 * a start that meets an archived run, or a send that meets an archived event, tells by this hash
 * whether its input is the one the archive remembers.
 */

/** The hash run_archive.input_hash holds: sha256 (hex) of the input's jsonb text. */
export function inputHash(input: RawBuilder<unknown>): RawBuilder<string> {
  return sql<string>`encode(sha256(convert_to(${input}::text, 'UTF8')), 'hex')`;
}
