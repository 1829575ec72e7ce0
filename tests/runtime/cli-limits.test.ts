import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PAYLOAD_LIMITS, readPayloadLimits, setPayloadLimits } from 'ledgerflow/operator';
import { migrateForTest } from '../support/migrate-for-test.js';
import { runCli as run } from '../support/run-cli.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';

const TIME = '\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\dZ';

describe('ledgerflow limits (PostgreSQL)', () => {
  let store: TestStore;
  let db: string[];
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store);
    db = ['--database-url', store.url!];
  }, 60_000);
  afterAll(async () => {
    await store.close();
  });

  it('shows the limits stored in the database, as a table and as JSON', async () => {
    const shown = await run(['limits', ...db]);
    expect(shown.code).toBe(0);
    expect(shown.stderr).toBe('');
    expect(shown.stdout).toMatch(
      new RegExp(
        [
          '^LIMIT +BYTES +OPTION',
          'run input \\(refused above\\) +1048576 +--max-input-bytes',
          'step output \\(the step fails above\\) +1048576 +--max-output-bytes',
          'event payload \\(refused above\\) +1048576 +--max-event-payload-bytes',
          'error record \\(truncated above\\) +65536 +--max-error-bytes',
          `Last changed ${TIME}\\.\\n$`,
        ].join(' *\\n'),
      ),
    );
    const json = await run(['limits', '--json', ...db]);
    expect(JSON.parse(json.stdout)).toEqual({
      ...DEFAULT_PAYLOAD_LIMITS,
      updatedAt: expect.any(String),
      maxJsonDepth: 1_000,
    });
  });

  it('sets the limits given and keeps the others; refuses nonsense, saying what to do, and changes nothing', async () => {
    try {
      const set = await run(['limits', 'set', '--max-input-bytes', '2097152', '--max-error-bytes', '4096', ...db]);
      expect(set.code).toBe(0);
      expect(set.stdout).toContain('Changed: every client and worker of this database applies these within 5 s.');
      const { updatedAt, ...stored } = await readPayloadLimits(store.db);
      expect(updatedAt).toBeInstanceOf(Date);
      expect(stored).toEqual({ ...DEFAULT_PAYLOAD_LIMITS, maxInputBytes: 2_097_152, maxErrorBytes: 4_096 });

      expect(await run(['limits', 'set', ...db])).toMatchObject({
        code: 2,
        stderr: expect.stringContaining(
          'limits set needs at least one of --max-input-bytes, --max-output-bytes, --max-event-payload-bytes, --max-error-bytes.',
        ),
      });
      expect(await run(['limits', '--max-input-bytes', '100', ...db])).toMatchObject({
        code: 2,
        stderr: expect.stringContaining('The --max-…-bytes options go with `ledgerflow limits set`.'),
      });
      expect(await run(['limits', 'set', '--max-output-bytes', 'lots', ...db])).toMatchObject({
        code: 2,
        stderr: expect.stringContaining('--max-output-bytes must be an integer >= 1 (got "lots").'),
      });
      const tooSmall = await run(['limits', 'set', '--max-error-bytes', '10', ...db]);
      expect(tooSmall.code).toBe(1);
      expect(tooSmall.stderr).toContain(
        'maxErrorBytes: must be a whole number of bytes from 1024 to 16777216 (got 10)',
      );
      expect(tooSmall.stderr).toContain('Nothing was changed.');
      expect((await readPayloadLimits(store.db)).maxErrorBytes).toBe(4_096);
    } finally {
      await setPayloadLimits(store.db, DEFAULT_PAYLOAD_LIMITS);
    }
  });
});
