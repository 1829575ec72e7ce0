import type { Kysely } from 'kysely';
import type { LedgerflowDatabase } from '../store/tables.js';
import type { LeasedRun } from '../store/leased-run.js';
import type { HeldLease } from './lease.js';
import { advanceRun, advanceRuns, isBatchable } from './step-commits.js';
import type { AdvanceParams, AdvanceResult, FusedClaim } from './result-commit.js';
import { isConnectionError } from '../store/connection-errors.js';

/**
 * Group commit of step results across runs: the worker's flights hand their result commits
 * (`advanceRun`) to one queue, which sends them as few statements as it can without ever
 * making a commit wait for nothing.
 *
 * Natural batching, no timers:
 *
 *   idle       fewer than `maxInFlight` groups are in flight: a commit is sent at once — alone,
 *              as the plain one-run statement, so a lone run pays no latency.
 *   saturated  `maxInFlight` groups are in flight: commits queue up; when a group returns, all
 *              that queued meanwhile (at most `maxGroup`) go out as ONE statement
 *              (`advanceRunsStatement`), each row fenced by its own run's token.
 *
 * A group never holds two commits of one run, nor two fused claims (either waits for the next
 * group). A group that completes runs and carries no fused claim of a driver's asks the worker
 * for one (`GroupClaims`) covering the slots all its completions free: without it, a group's
 * completions would end their flights together with nothing claimed for their slots, and the
 * worker would drain in waves. Outcomes are per run: a zombie's row changes nothing and only its driver hears
 * "not fenced". A group that fails as a whole — a database error such as a deadlock or a
 * constraint violation — is retried one commit per statement, so that the error reaches only
 * the run it belongs to; a broken connection leaves every commit of the group unknown, which
 * each driver resolves for its own run (`commitKnowingOutcome` reads its attempt row).
 *
 * Commits that cannot be grouped (inside a step's own transaction, or without a worker's
 * attempt) go out alone at once; so do all commits when grouping is off (`maxGroup` 1).
 */
export class CommitQueue {
  readonly #db: Kysely<LedgerflowDatabase>;
  readonly #maxGroup: number;
  readonly #maxInFlight: number;
  readonly #claims: GroupClaims | undefined;
  #waiting: Waiting[] = [];
  #inFlight = 0;
  /** Statements sent and commits they carried, for tests and the bench. */
  readonly stats = { statements: 0, commits: 0 };

  constructor(db: Kysely<LedgerflowDatabase>, options: CommitQueueOptions = {}) {
    this.#db = db;
    this.#maxGroup = options.maxGroup ?? DEFAULT_MAX_GROUP;
    this.#maxInFlight = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    this.#claims = options.claims;
    if (!(Number.isInteger(this.#maxGroup) && this.#maxGroup >= 1))
      throw new RangeError(`CommitQueue: maxGroup must be an integer >= 1 (got ${this.#maxGroup})`);
    if (!(Number.isInteger(this.#maxInFlight) && this.#maxInFlight >= 1)) {
      throw new RangeError(`CommitQueue: maxInFlight must be an integer >= 1 (got ${this.#maxInFlight})`);
    }
  }

  /** Commits `p` (see `advanceRun`), alone or with other runs' commits; resolves with this run's own outcome. */
  advance(p: AdvanceParams): Promise<AdvanceResult> {
    if (this.#maxGroup === 1 || !isBatchable(p)) {
      this.#count(1);
      return advanceRun(this.#db, p);
    }
    return new Promise<AdvanceResult>((resolve, reject) => {
      this.#waiting.push({ params: p, resolve, reject });
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#inFlight < this.#maxInFlight && this.#waiting.length > 0) {
      const group = this.#takeGroup();
      this.#inFlight += 1;
      void this.#send(group).finally(() => {
        this.#inFlight -= 1;
        this.#pump();
      });
    }
  }

  /** The oldest waiting commits that may share a statement; the rest keep their order. */
  #takeGroup(): Waiting[] {
    const group: Waiting[] = [];
    const left: Waiting[] = [];
    const runs = new Set<string>();
    let fused = false;
    for (const w of this.#waiting) {
      const c = w.params.continuation;
      const claims = c.kind === 'complete' && c.claimNext !== undefined;
      if (group.length < this.#maxGroup && !runs.has(w.params.lease.runId) && !(claims && fused)) {
        group.push(w);
        runs.add(w.params.lease.runId);
        fused ||= claims;
      } else {
        left.push(w);
      }
    }
    this.#waiting = left;
    return group;
  }

  async #send(group: readonly Waiting[]): Promise<void> {
    if (group.length === 1) {
      const [only] = group as [Waiting];
      this.#count(1);
      await advanceRun(this.#db, only.params).then(only.resolve, only.reject);
      return;
    }
    const params = group.map((w) => w.params);
    const claim = this.#groupClaim(params);
    if (claim !== undefined)
      params[claim.at] = { ...params[claim.at]!, continuation: { ...claim.complete, claimNext: claim.fused } };
    // The runs the group's own claim took (undefined: its commit failed or its outcome is unknown).
    let claimed: readonly LeasedRun[] | undefined;
    try {
      let results: AdvanceResult[];
      try {
        this.#count(group.length);
        results = await advanceRuns(this.#db, params);
      } catch (error) {
        if (isConnectionError(error)) {
          for (const w of group) w.reject(error);
          return;
        }
        // The statement failed as a whole (nothing of it committed): one statement per commit,
        // so that whatever failed it fails only its own run.
        await Promise.all(
          group.map((w, i) => {
            this.#count(1);
            return advanceRun(this.#db, params[i]!).then((result) => {
              if (i === claim?.at) claimed = result.claimed;
              w.resolve(ownResult(result, i === claim?.at));
            }, w.reject);
          }),
        );
        return;
      }
      if (claim !== undefined) claimed = results[claim.at]!.claimed;
      for (const [i, w] of group.entries()) w.resolve(ownResult(results[i]!, i === claim?.at));
    } finally {
      if (claim !== undefined) this.#claims!.adopt(claimed);
    }
  }

  /** The claim for the slots a group's completions free, unless a driver's fused claim rides in it already. */
  #groupClaim(
    params: readonly AdvanceParams[],
  ):
    | { at: number; complete: Extract<AdvanceParams['continuation'], { kind: 'complete' }>; fused: FusedClaim }
    | undefined {
    if (this.#claims === undefined) return undefined;
    let at: number | undefined;
    const completing: HeldLease[] = [];
    for (const [i, p] of params.entries()) {
      if (p.continuation.kind !== 'complete') continue;
      if (p.continuation.claimNext !== undefined) return undefined;
      at ??= i;
      completing.push(p.lease);
    }
    if (at === undefined) return undefined;
    const fused = this.#claims.fusedClaim(completing);
    const complete = params[at]!.continuation as Extract<AdvanceParams['continuation'], { kind: 'complete' }>;
    return fused === undefined ? undefined : { at, complete, fused };
  }

  #count(commits: number): void {
    this.stats.statements += 1;
    this.stats.commits += commits;
  }
}

/** The worker's claims, for a group whose completions free slots (see `ClaimLoop.fusedClaim`). */
export interface GroupClaims {
  /** A claim for the free slots plus those of `freeing`, the runs the group completes; answered by exactly one `adopt`. */
  fusedClaim(freeing: readonly HeldLease[]): FusedClaim | undefined;
  adopt(runs: readonly LeasedRun[] | undefined): void;
}

/** A driver that asked for no claim gets none back. */
function ownResult(result: AdvanceResult, groupClaim: boolean): AdvanceResult {
  return groupClaim ? { ...result, claimed: undefined } : result;
}

export interface CommitQueueOptions {
  /** Claims fused into a group's statement for the slots its completions free. */
  readonly claims?: GroupClaims;
  /** Most commits in one statement; 1 turns grouping off. Default 64. */
  readonly maxGroup?: number;
  /** Groups in flight at once before commits start to queue. Default 1. */
  readonly maxInFlight?: number;
}

const DEFAULT_MAX_GROUP = 64;
const DEFAULT_MAX_IN_FLIGHT = 1;

interface Waiting {
  readonly params: AdvanceParams;
  resolve(result: AdvanceResult): void;
  reject(error: unknown): void;
}
