/**
 * A worker's next claim made in the write of its ends: the ends free slots, and the claim fills them,
 * and the jobs that may wait claimed ahead (`WorkerOptions.prefetch`), in the same commit
 * (`Claimer.finishAndClaim`: on PostgreSQL one statement, on MySQL/MariaDB one transaction), so the
 * claim costs no commit of its own. The Completer asks the worker for the claim when it writes a
 * batch holding the worker's ends, has the Claimer make it with the batch, and hands back what it
 * took as data; the worker starts the jobs itself.
 *
 * @internal
 */
import type * as Queue from "effect/Queue"
import type { ClaimedRow, Group, KeyedClaim } from "./driver/Driver.js"

/**
 * Called once an end is written, on a fiber of the Completer, synchronously: whether it changed the
 * job (false: its attempt was stale, or it could not be written; called without an argument: true),
 * and `unwritten` true when the database refused the end and the dead letter in its place, so the
 * job is left `running` under its worker, for a rescuer to take back once that worker is gone;
 * `retaken` true when the write carried its worker's claim and that claim took at least as many
 * jobs as the write ended of that worker (the slots the ends freed were taken in the same commit);
 * `handed` false when the end named an attempt to pass its name slot to (`Finish.handTo`) and the
 * slot did not pass (or whether it did is not known: the batch was written end by end).
 */
export type EndWritten = (changed?: boolean, unwritten?: boolean, retaken?: boolean, handed?: boolean) => void

/** A claim to make with a batch of ends. */
export interface ClaimRequest {
  /** The due groups, best first. */
  readonly groups: ReadonlyArray<Group>
  readonly limit: number
  /** µs since the epoch. */
  readonly nowUs: number
  readonly workerId: string
  /**
   * The keyed claim (`Claimer.finishAndClaim`), for groups of names with mutex keys or limits, and
   * what it may take ahead without slots.
   */
  readonly keyed?: KeyedClaim | undefined
}

/**
 * The jobs a claim made with a batch of ends took (none when it could not be written), and its limit;
 * `failed`: the statement failed (its commit may have been applied, its answer lost).
 */
export interface ClaimAnswer {
  readonly rows: ReadonlyArray<ClaimedRow>
  readonly asked: number
  readonly failed?: boolean
}

/** A worker whose next claim may be made with the write of its ends. */
export interface Claimant {
  /**
   * A batch holding `ended` ends of this worker is about to be written, and `offered` says whether
   * it may carry this worker's claim (false: it carries another worker's, or none). The claim to
   * make with it, or undefined (always undefined when not `offered`). Called once per such batch,
   * on the Completer's fiber, synchronously; when it returns a claim, its answer is put in
   * `answers` before the batch's ends call back.
   */
  readonly claimWith: (ended: number, offered: boolean) => ClaimRequest | undefined
  /** Where the Completer puts the answers to this worker's claims. */
  readonly answers: Queue.Enqueue<ClaimAnswer>
}
