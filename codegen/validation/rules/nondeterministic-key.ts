import type { Diagnostic } from '../../model/diagnostic.js';
import type { NondeterministicSource } from '../../model/workflow-model.js';
import { describeLocation } from '../../model/source-location.js';
import { describeOrigin } from '../describe-via.js';
import type { Rule } from '../rule.js';
import { checkedFunctions, wordingOf, type CheckedPart } from '../step-functions.js';

const FROM_IDENTIFIERS =
  'build the key from business identifiers in the input (e.g. input.orderId), or create the value in an earlier step and read it from steps';
const FROM_INPUT =
  'derive it from the input (e.g. input.orderId), or create the value in an earlier step and read it from steps';
const FROM_EARLIER_STEP =
  'keys are synchronous and pure: load what you need in an earlier step and read its output from steps';
const SYNC_FROM_EARLIER_STEP =
  'it must be synchronous and pure: load what you need in an earlier step and read its output from steps';
const LOCALE =
  "use the UTC methods (getUTCFullYear(), toISOString()), or pass an explicit locale and timeZone (toLocaleString('en-US', { timeZone: 'UTC' }), new Intl.DateTimeFormat('en-US', { timeZone: 'UTC' }))";
const CLOCK = "pass the time in the workflow input or take it from an earlier step's output";
/** For a workflow's partition key, which sees the input alone. */
const RUN_FROM_INPUT =
  'derive it from the input (e.g. input.customerId): it is computed for the whole run, which has no earlier steps';
const RUN_SYNC_FROM_INPUT = 'it must be synchronous and pure: put what it needs in the workflow input';

/** For a schedule's input, which sees its tick alone. */
const TICK_FROM_SCHEDULED_AT =
  "derive it from scheduledAt (e.g. scheduledAt.slice(0, 10)); a value the run needs fresh, create in the workflow's first step";
const TICK_SYNC = "it must be synchronous and pure: load what the run needs in the workflow's first step";

/**
 * What each source is, and how to do without it: in a key, in the other functions of a step, in
 * a workflow's partition key (`runFix`) and in a schedule's input (`tickFix`).
 */
const SOURCES: Record<
  NondeterministicSource,
  {
    readonly what: string;
    readonly keyFix: string;
    readonly fix: string;
    readonly runFix: string;
    readonly tickFix: string;
  }
> = {
  clock: {
    what: 'reads the clock',
    keyFix: CLOCK,
    fix: CLOCK,
    runFix: 'pass the time in the workflow input',
    tickFix:
      'build the input from scheduledAt, the instant of the tick it is for, which is the same on every worker and retry',
  },
  random: {
    what: 'uses randomness',
    keyFix: FROM_IDENTIFIERS,
    fix: FROM_INPUT,
    runFix: RUN_FROM_INPUT,
    tickFix: TICK_FROM_SCHEDULED_AT,
  },
  uuid: {
    what: 'generates a random UUID',
    keyFix: FROM_IDENTIFIERS,
    fix: FROM_INPUT,
    runFix: RUN_FROM_INPUT,
    tickFix: TICK_FROM_SCHEDULED_AT,
  },
  env: {
    what: 'reads the process environment',
    keyFix: 'put the value in the workflow input; read configuration in handlers, not in keys',
    fix: 'put the value in the workflow input; read configuration in handlers, not in the functions a step declares',
    runFix:
      'put the value in the workflow input; read configuration in handlers, not in the functions a workflow declares',
    tickFix: "write the value in the schedule's declaration, or read configuration in the workflow's handlers",
  },
  await: {
    what: 'awaits',
    keyFix: FROM_EARLIER_STEP,
    fix: SYNC_FROM_EARLIER_STEP,
    runFix: RUN_SYNC_FROM_INPUT,
    tickFix: TICK_SYNC,
  },
  async: {
    what: 'is declared async',
    keyFix: `remove async: ${FROM_EARLIER_STEP}`,
    fix: `remove async: ${SYNC_FROM_EARLIER_STEP}`,
    runFix: `remove async: ${RUN_SYNC_FROM_INPUT}`,
    tickFix: `remove async: ${TICK_SYNC}`,
  },
  io: {
    what: 'does I/O',
    keyFix: FROM_EARLIER_STEP,
    fix: SYNC_FROM_EARLIER_STEP,
    runFix: RUN_SYNC_FROM_INPUT,
    tickFix: TICK_SYNC,
  },
  locale: {
    what: "depends on the process's locale or time zone, which differ between workers",
    keyFix: LOCALE,
    fix: LOCALE,
    runFix: LOCALE,
    tickFix: LOCALE,
  },
  gc: {
    what: 'depends on garbage collection',
    keyFix: `use a Map or an object built inside the function, or ${FROM_INPUT}`,
    fix: `use a Map or an object built inside the function, or ${FROM_INPUT}`,
    runFix: 'use a Map or an object built inside the function',
    tickFix: 'use a Map or an object built inside the function',
  },
};

/** A sleep that reads the clock usually means a duration: the runtime fixes the wake-up time itself. */
const SLEEP_CLOCK =
  'to sleep for a duration, return it from for: ({ input, steps }) => milliseconds — the runtime adds it to the database time once, when the run reaches the step';

function fixFor(part: CheckedPart, source: NondeterministicSource, seesSteps: boolean): string {
  if (part === 'scheduleInput') return SOURCES[source].tickFix;
  if (source === 'clock' && (part === 'for' || part === 'until')) return SLEEP_CLOCK;
  if (!seesSteps) return SOURCES[source].runFix;
  return part === 'key' ? SOURCES[source].keyFix : SOURCES[source].fix;
}

/**
 * LF002: a key — and every other function the runtime evaluates for a step (condition, sleep
 * time, match, items, child input, partition key), for a run (its queue's partition key) or for a
 * schedule's tick (its input) — must not read the clock, randomness, the environment or I/O, nor call anything not known pure.
 */
export const nondeterministicKey: Rule = (input) => {
  const diagnostics: Diagnostic[] = [];
  for (const checked of checkedFunctions(input)) {
    const wording = wordingOf(checked);
    for (const finding of checked.fn.findings) {
      const origin = describeOrigin(finding.text, finding.at, finding.origin, finding.via);
      if (finding.kind === 'nondeterministic' && finding.source === 'async') {
        // Reported on the property that declares the function, where a function declared elsewhere is named.
        const at = checked.fn.location;
        const declared =
          finding.origin.line === at.line && finding.origin.file === at.file
            ? ''
            : ` (at ${describeLocation(finding.origin, at)})`;
        diagnostics.push({
          code: 'LF002',
          severity: 'error',
          ...at,
          message:
            `${wording.subject} is declared async${declared}: it returns a Promise, not its value, and the worker fails such an attempt ` +
            `for good (a non-retryable error) rather than await it; ${fixFor(checked.part, finding.source, wording.seesSteps)}.`,
        });
      } else if (finding.kind === 'nondeterministic') {
        diagnostics.push({
          code: 'LF002',
          severity: 'error',
          ...finding.at,
          message:
            `${wording.subject} ${SOURCES[finding.source].what} (${origin}), so ${wording.consequence}; ` +
            `${fixFor(checked.part, finding.source, wording.seesSteps)}.`,
        });
      } else if (finding.kind === 'impure-call') {
        const callee = describeOrigin(finding.callee, finding.at, finding.origin, finding.via);
        const fix = wording.isKey
          ? 'build the key with the standard library (template literals, String(), JSON.stringify(), string, number and array methods…) and helper functions declared in this project'
          : 'write it with the standard library (template literals, String(), JSON.stringify(), string, number and array methods…) and helper functions declared in this project';
        diagnostics.push({
          code: 'LF002',
          severity: 'error',
          ...finding.at,
          message:
            `${wording.subject} calls ${callee}, whose code codegen does not analyse (a package's, a class's, or a function it cannot see), so it cannot prove it pure; ` +
            `${fix}, or compute the value in an earlier step and read it from steps.`,
        });
      }
    }
  }
  return diagnostics;
};
