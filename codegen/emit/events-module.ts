import type { WaitedEvent } from '../model/waited-events.js';
import { inComment, tsHeader } from './generated-file.js';
import { eventSenderName, importSpecifier } from './naming.js';

/**
 * The typed senders (`contracts/events.ts`): per event some workflow waits for, a
 * `send<Event>(client, key, payload, options?)` that calls `client.sendEvent` with the event's
 * declaration, so a payload is checked against its schema at compile time. Events are emitted in
 * name order, each imported from the module that declares it (aliased when two declarations
 * share a const name). Pure: plain data in, text out.
 *
 * @param modulePath where the module goes, relative to the codegen root (for its imports).
 */
export function emitEventsModule(events: readonly WaitedEvent[], modulePath: string): string {
  const sorted = [...events].sort((a, b) => (a.event.name < b.event.name ? -1 : a.event.name > b.event.name ? 1 : 0));
  const localNames = new Map<WaitedEvent, string>();
  const used = new Set<string>();
  for (const waited of sorted) {
    let local = waited.event.exportName;
    for (let n = 2; used.has(local); n++) local = `${waited.event.exportName}${n}`;
    used.add(local);
    localNames.set(waited, local);
  }
  const byModule = new Map<string, string[]>();
  for (const waited of sorted) {
    const local = localNames.get(waited)!;
    const binding = local === waited.event.exportName ? local : `${waited.event.exportName} as ${local}`;
    byModule.set(waited.event.file, [...(byModule.get(waited.event.file) ?? []), binding]);
  }
  const imports = [...byModule]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([file, bindings]) => `import { ${bindings.sort().join(', ')} } from '${importSpecifier(modulePath, file)}';`);

  const out: string[] = [
    tsHeader(
      'Typed senders of the events the workflows wait for. Regenerate with `npx ledgerflow codegen`;',
      '`npx ledgerflow codegen --check` fails CI when this file is stale.',
    ),
    `import type { EventSendPayload } from 'ledgerflow/dsl';`,
    `import type { EventSender, SendEventOptions, SentEvent } from 'ledgerflow/runtime';`,
    ...imports,
  ];
  for (const waited of sorted) {
    const local = localNames.get(waited)!;
    out.push(
      '',
      '/**',
      ` * Sends "${waited.event.name}" with correlation key \`key\`; the payload is validated against the event's schema`,
      ' * before anything is written. Waiting for it:',
      ...waited.waiters.map(({ workflow, step }) => {
        const match = step.functions.find((f) => f.part === 'match');
        const key =
          match === undefined
            ? 'a signal: `key` is the run id'
            : `\`key\` as \`\` ${inComment(match.text)} \`\` computes it`;
        return ` * - "${workflow.name}" v${workflow.version}, step "${step.name}": ${key}`;
      }),
      ' */',
      `export function ${eventSenderName(waited.event.name)}(`,
      '  client: EventSender,',
      '  key: string,',
      `  payload: EventSendPayload<typeof ${local}>,`,
      '  options?: SendEventOptions,',
      '): Promise<SentEvent> {',
      `  return client.sendEvent(${local}, key, payload, options);`,
      '}',
    );
  }
  return `${out.join('\n')}\n`;
}
