/**
 * Fills the worker's free slots with due runs: a loop that claims, and claims fused into the
 * completion commits of the runs it drives.
 * Long because the loop's modes, its wake-ups and its fused claims change one state (`#backlog`,
 * the free slots, the held claim), and splitting them would pass that state between files.
 *
 * Modes (`#backlog`):
 *
 *   polling  The last claim came back short: nothing more is due. The loop sleeps for
 *            `pollIntervalMs` — woken early by a NOTIFY (the runs subscription's hint), by a
 *            run that ends after a NOTIFY found no slot free, or by stop() — then claims for
 *            every free slot.
 *   backlog  The last claim took all it asked for, so more runs are probably due: a completing
 *            run's commit also claims the next runs (a fused claim, see `fusedClaim()`), and a
 *            run that ends with other runs in flight leaves its slot to their fused claims
 *            rather than waking the loop (whose poll still bounds how long a slot waits). The
 *            loop itself claims again at once after a full claim. Any claim that comes back
 *            short returns to polling.
 *
 * At most one claim is in flight (`#claiming`), the loop's or a fused one: claimers racing
 * over the head of the pending index only skip each other's locked rows.
 *
 * Slots — one count for every path (`#free()`): a slot is taken by
 *   - a flight, from the moment its claim's answer arrives (the loop's, a fused one, a start's,
 *     or an adoption's) until its drive ends: runs are launched in the same turn as the answer,
 *     so the lease keeper renews them from then on;
 *   - the claim in flight, for its whole limit, until its answer arrives;
 *   - a start reservation, until it is settled;
 *   - a claim whose outcome is unknown, for its whole limit, until the adoption that looks for
 *     its runs is over (`#adoptionHolds`).
 * A fused claim also counts the slots of the runs its commit completes (`freeing`): their
 * handlers are done, and their flights end right after. A lease is launched at most once
 * (`#launch` skips an `(id, token)` a flight already drives: an adoption may find the runs of a
 * claim whose answer is still on its way).
 *
 * Wake-ups: a NOTIFY (`hint()`) wakes the loop only when a slot is free; at capacity it is
 * remembered (`#hintMissed`) and the next slot to free up wakes the loop. In polling mode a slot
 * that frees up wakes the loop for nothing else: the last claim came back short, and every run
 * made due since (a start, a child, an event, a queue grant) came with a NOTIFY — runs due by
 * time (a retry's backoff, a timeout) are the poll's. A hint that arrives while a claim is in
 * flight — the loop's or a fused one — is held until that claim is answered (the claim may have
 * read before the run's commit) and then counts as if it arrived then: it wakes the loop if a slot
 * is free, else it is remembered. (A fused claim's completion commit can itself make a run due — a
 * queue slot it gives back is granted to a run in line — and on the embedded database that
 * commit's NOTIFY is heard before its claim is answered; woken then, the loop would find the claim
 * in flight and sleep again, and the run would wait for the poll.)
 *
 * Start reservations (`reserveStart()`): a start in this process (`createClient({ worker })`)
 * takes a free slot, inserts its run already leased to this worker — one statement, one commit:
 * `insertRunStatement` with `claimedBy` — then hands the claimed run back (`settle`). Reserved
 * slots count as taken for every claim. A reservation asked for while the loop's claim is in
 * flight waits for it (a claim costs a round trip, a start's commit an
 * fsync); none is given while a fused claim is in flight or no slot is free — the start then
 * NOTIFYs as any other.
 *
 * A failed claim: `error` (where 'claim'), the runs subscription is marked stale, and the loop
 * backs off (100 ms, doubling, at most 5 s) before it tries again; after its next successful
 * claim it launches the runs taken, then subscribes again. A fused claim whose commit
 * failed — or whose outcome is unknown, in which case it may have taken runs nobody here
 * drives — makes the loop ask the database which runs this worker holds and adopt the orphans
 * (`run-adopted`), so they do not wait out their lease and count as crashes. The claim's slots
 * stay held until then; the adoption starts once the runs its commit completed have ended (their
 * slots are among those it claimed for), launches up to the claim's limit plus any slot free,
 * and leaves the rest alone (a claim whose answer is on its way launches it, or its lease expires).
 *
 * The loop runs while the worker is running; stop() wakes it and waits for it to end. Runs a
 * fused claim took once the worker was stopping are released untouched (`released()` waits for
 * those releases), and so are orphans found then.
 */

import type { Kysely } from 'kysely';
import type { LedgerflowDatabase } from '../store/tables.js';
import { exponentialBackoffMs } from '../backoff.js';
import type { StartReservation } from '../client/local-starts.js';
import { claimRuns } from './claim.js';
import { heldRuns, loadLeasedRun } from './commit-outcome.js';
import type { LeasedRun } from '../store/leased-run.js';
import { flightKey, type Flight } from './flight.js';
import { releaseLeases, type HeldLease } from './lease.js';
import type { WorkflowRegistry } from './registry.js';
import type { RunsSubscription } from './runs-subscription.js';
import type { FusedClaim } from './result-commit.js';
import { serializeError } from './step-errors.js';
import type { WorkerEvent } from './worker-events.js';

const CLAIM_FAILURE_BACKOFF = { firstMs: 100, maxMs: 5_000 } as const;

export interface ClaimLoopContext {
  readonly db: Kysely<LedgerflowDatabase>;
  readonly registry: WorkflowRegistry;
  readonly workerId: string;
  readonly leaseMs: number;
  readonly concurrency: number;
  readonly pollIntervalMs: number;
  /** The worker's flights: how many slots are taken, and which leases are already driven. */
  readonly flights: ReadonlyMap<string, Flight>;
  readonly subscription: Pick<RunsSubscription, 'stale' | 'markStale' | 'subscribe'>;
  isRunning(): boolean;
  /** Drives a run this worker just claimed (or adopted). */
  launch(run: LeasedRun): void;
  emit(event: WorkerEvent): void;
}

export class ClaimLoop {
  readonly #ctx: ClaimLoopContext;
  /** The last claim took all it asked for (see the module comment: backlog mode). */
  #backlog = false;
  /** A claim is in flight — the loop's, or one fused into a completion commit. */
  #claiming = false;
  /** The limit of the claim in flight (the loop's or a fused one). */
  #claimLimit = 0;
  /** The runs whose completion commit carries the fused claim in flight (none for the loop's claim). */
  #claimFreeing: readonly HeldLease[] = [];
  /** Slots held for claims whose outcome is unknown, until their adoption is over. */
  #adoptionHolds = 0;
  /** The loop's claim in flight, which a start reservation may wait for. */
  #loopClaim: Promise<unknown> | undefined;
  /** Slots held by start reservations not settled yet. */
  #reserved = 0;
  /** `released()` calls waiting for the start reservations to be settled. */
  readonly #unreserved = new Set<() => void>();
  /** A NOTIFY arrived while no slot was free: the next slot that frees up claims. */
  #hintMissed = false;
  /** A NOTIFY arrived while a claim was in flight: heard again once that claim is answered. */
  #hintDuringClaim = false;
  /** Releases of runs a fused claim took while the worker was already stopping. */
  readonly #releasing = new Set<Promise<void>>();
  #loop: Promise<void> | undefined;
  #wakeUp: (() => void) | undefined;
  #wakePending = false;

  constructor(ctx: ClaimLoopContext) {
    this.#ctx = ctx;
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  /** Wakes the loop and resolves once it has ended; call once the worker is no longer running. */
  async stop(): Promise<void> {
    this.wake();
    await this.#loop;
  }

  /** Resolves once every start reservation is settled and the runs taken while stopping are released. */
  async released(): Promise<void> {
    while (this.#reserved > 0) await new Promise<void>((resolve) => this.#unreserved.add(resolve));
    await Promise.all(this.#releasing);
  }

  /** Ends the loop's sleep now (or, if it is not asleep, its next one). */
  wake(): void {
    const wakeUp = this.#wakeUp;
    if (wakeUp === undefined) {
      this.#wakePending = true;
      return;
    }
    this.#wakeUp = undefined;
    wakeUp();
  }

  /**
   * The claim a completing run's commit should also make, if any. While a backlog lasts, it
   * claims for the slot the run frees and every other free one (the limit counts the completing
   * run, still in flight until it returns) — once at least a quarter of the slots are free: a
   * claim costs its planning, so at high concurrency slots are gathered into batches (mostly by
   * later completions) rather than refilled one claim per run. `freeing` are the leases of the
   * runs in flight the commit completes (more than one for a group commit's claim); should its
   * outcome be unknown, the adoption waits for their flights to end. Every claim returned
   * here must be answered by exactly one {@link ClaimLoop.adopt} call.
   */
  fusedClaim(freeing: readonly HeldLease[]): FusedClaim | undefined {
    const { concurrency } = this.#ctx;
    if (!this.#ctx.isRunning() || !this.#backlog || this.#claiming) return undefined;
    const limit = this.#free() + freeing.length;
    if (limit < Math.ceil(concurrency / 4)) return undefined;
    this.#claiming = true;
    this.#claimLimit = limit;
    this.#claimFreeing = freeing;
    return {
      registry: this.#ctx.registry,
      options: { workerId: this.#ctx.workerId, leaseMs: this.#ctx.leaseMs, limit },
    };
  }

  /**
   * The answer to a {@link ClaimLoop.fusedClaim} made for `flight` (none for a group commit's
   * claim): the runs it took; `undefined` if its commit failed.
   */
  adopt(flight: Flight | undefined, runs: readonly LeasedRun[] | undefined): void {
    this.#claiming = false;
    if (runs === undefined) {
      // The loop claims once the adoption is over: that claim hears any hint held meanwhile.
      this.#hintDuringClaim = false;
      // The commit failed — or its outcome is unknown (the connection broke after it committed),
      // and then its claim took runs nobody here drives: ask the database which runs are ours,
      // then claim for whatever slots the claim held and no orphan took.
      void this.#adoptOrphans(this.#claimLimit, this.#claimFreeing).then(() => this.wake());
      return;
    }
    if (flight !== undefined) flight.refilled = true;
    this.#backlog = runs.length === this.#claimLimit;
    this.#take(runs);
    this.#claimAnswered();
  }

  /** A NOTIFY arrived (or the subscription is back after an outage): claim now if a slot is free. */
  hint(): void {
    // A claim in flight may have read before the run's commit: heard again once it is answered.
    if (this.#claiming) this.#hintDuringClaim = true;
    else if (this.#free() > 0) this.wake();
    else this.#hintMissed = true;
  }

  /** A claim was answered (its runs taken): a hint that arrived meanwhile is heard now. */
  #claimAnswered(): void {
    if (!this.#hintDuringClaim) return;
    this.#hintDuringClaim = false;
    this.hint();
  }

  /**
   * A slot for a start in this process that creates a run of `workflowName@version` already
   * claimed for this worker; `undefined` when this worker does not serve that version, is not
   * running, or has no slot free (see the module comment).
   */
  async reserveStart(workflowName: string, version: number): Promise<StartReservation | undefined> {
    const ctx = this.#ctx;
    if (ctx.registry.get(workflowName, version) === undefined) return undefined;
    for (;;) {
      if (!ctx.isRunning()) return undefined;
      if (this.#free() > 0) break;
      const loopClaim = this.#loopClaim;
      if (loopClaim === undefined) return undefined;
      await loopClaim.catch(() => {});
    }
    this.#reserved += 1;
    let settled = false;
    return {
      lease: { workerId: ctx.workerId, leaseMs: ctx.leaseMs },
      settle: (runs) => {
        if (settled) throw new Error('A start reservation was settled twice.');
        settled = true;
        this.#reserved -= 1;
        if (this.#reserved === 0) {
          for (const resolve of this.#unreserved) resolve();
          this.#unreserved.clear();
        }
        if (runs === undefined) {
          // The start's commit may have happened (the connection broke after it): ask the database.
          void this.#adoptOrphans(1).then(() => this.#slotFreed());
          return;
        }
        this.#take(runs);
        if (runs.length === 0) this.#slotFreed();
      },
    };
  }

  /**
   * Launches runs this worker just claimed — or, once stop() began, gives them back untouched.
   * Called in the same turn as the claim's answer arrives: from then on the runs count as
   * flights and their leases are renewed.
   */
  #take(runs: readonly LeasedRun[]): void {
    if (runs.length === 0) return;
    if (this.#ctx.isRunning()) {
      for (const run of runs) this.#launch(run);
      return;
    }
    // A start's run not inserted yet has no lease to give back: its start inserts it itself, unclaimed.
    for (const run of runs) run.pendingStart?.flightEnded();
    const leases = runs
      .filter((run) => run.pendingStart === undefined)
      .map((run) => ({ runId: run.id, fencingToken: run.fencingToken }));
    if (leases.length === 0) return;
    const releasing = releaseLeases(
      this.#ctx.db,
      leases,
      `worker ${this.#ctx.workerId} was stopping when it claimed the run`,
    )
      .then(() => {})
      .catch((error: unknown) => this.#ctx.emit({ type: 'error', where: 'stop', error: serializeError(error) }))
      .finally(() => this.#releasing.delete(releasing));
    this.#releasing.add(releasing);
  }

  /**
   * A flight ended (already removed from the flights). While a backlog lasts and other runs are
   * in flight, the next completion's fused claim refills its slot together with its own (a
   * batch, one commit fewer); the loop's poll bounds how long the slot can wait for one.
   */
  flightEnded(flight: Flight): void {
    // A missed hint first: a refilled flight's claim may have come back short of it.
    if (this.#hintMissed) this.wake();
    else if (!flight.refilled && this.#backlog && this.#ctx.flights.size === 0) this.wake();
  }

  /** A reserved slot was given back unused: claim if a NOTIFY was missed meanwhile. */
  #slotFreed(): void {
    if (this.#hintMissed) this.wake();
  }

  /**
   * Slots no run, reservation or claim holds (see the module comment: the one count every
   * claimer, start and adoption asks).
   */
  #free(): number {
    const taken =
      this.#ctx.flights.size + this.#reserved + (this.#claiming ? this.#claimLimit : 0) + this.#adoptionHolds;
    return this.#ctx.concurrency - taken;
  }

  /** Drives a run this worker holds, unless a flight already drives that lease. */
  #launch(run: LeasedRun): void {
    if (this.#ctx.flights.has(flightKey(run.id, run.fencingToken))) return;
    this.#ctx.launch(run);
  }

  async #run(): Promise<void> {
    const ctx = this.#ctx;
    let failures = 0;
    while (ctx.isRunning()) {
      const free = this.#free();
      if (free > 0 && !this.#claiming) {
        this.#claiming = true;
        this.#claimLimit = free;
        this.#claimFreeing = [];
        this.#hintMissed = false;
        try {
          const claiming = claimRuns(ctx.db, ctx.registry, {
            workerId: ctx.workerId,
            leaseMs: ctx.leaseMs,
            limit: free,
          });
          this.#loopClaim = claiming;
          let claimed: LeasedRun[];
          try {
            claimed = await claiming;
          } finally {
            this.#claiming = false;
            this.#loopClaim = undefined;
          }
          failures = 0;
          this.#backlog = claimed.length === free;
          // In the same turn as the answer: the runs hold their slots (and are renewed) from here on.
          this.#take(claimed);
          this.#claimAnswered();
          if (ctx.subscription.stale) await ctx.subscription.subscribe();
          if (claimed.length === free) continue;
        } catch (error) {
          failures += 1;
          // The loop claims again after its back-off: that claim hears any hint held meanwhile.
          this.#hintDuringClaim = false;
          ctx.subscription.markStale();
          ctx.emit({ type: 'error', where: 'claim', error: serializeError(error) });
          await this.#sleep(exponentialBackoffMs(failures, CLAIM_FAILURE_BACKOFF));
          continue;
        }
      }
      await this.#sleep(ctx.pollIntervalMs);
    }
  }

  /**
   * Launches every run the database says this worker holds and no flight drives: what a claim
   * whose commit outcome was unknown took. Otherwise they would wait out their lease and count
   * as a crash. That claim's `limit` slots stay held until this is over; it starts once the runs
   * whose commit carried the claim (`after`) have ended, since it claimed for their slots. Never
   * rejects.
   */
  async #adoptOrphans(limit: number, after: readonly HeldLease[] = []): Promise<void> {
    const ctx = this.#ctx;
    let held = limit;
    this.#adoptionHolds += held;
    try {
      await Promise.all(after.map((lease) => ctx.flights.get(flightKey(lease.runId, lease.fencingToken))?.done));
      for (const row of await heldRuns(ctx.db, ctx.workerId)) {
        if (ctx.flights.has(flightKey(row.id, row.fencing_token))) continue;
        const run = await loadLeasedRun(ctx.db, row.id, row.fencing_token);
        if (run === undefined || ctx.flights.has(flightKey(run.id, run.fencingToken))) continue;
        if (!ctx.isRunning()) {
          await releaseLeases(
            ctx.db,
            [{ runId: run.id, fencingToken: run.fencingToken }],
            `worker ${ctx.workerId} was stopping when it found the run`,
          );
          continue;
        }
        // Its slot: one the unknown claim held, else a free one. Without either it is left alone:
        // a claim whose answer is on its way launches it, or its lease expires.
        if (held > 0) {
          held -= 1;
          this.#adoptionHolds -= 1;
        } else if (this.#free() <= 0) {
          continue;
        }
        ctx.emit({ type: 'run-adopted', runId: run.id, fencingToken: run.fencingToken });
        this.#launch(run);
      }
    } catch (error) {
      ctx.emit({ type: 'error', where: 'claim', error: serializeError(error) });
    } finally {
      this.#adoptionHolds -= held;
    }
  }

  /** Sleeps up to `ms`; {@link ClaimLoop.wake} ends it early. */
  #sleep(ms: number): Promise<void> {
    if (this.#wakePending) {
      this.#wakePending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#wakeUp = undefined;
        resolve();
      }, ms);
      this.#wakeUp = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
