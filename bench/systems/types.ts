/**
 * One adapter per queue system. A scenario only talks to this interface, so every system runs
 * the same workload in the same process, on the same database, in the same run.
 */
import type { Target } from "../lib/targets.js"

export type SystemId =
  | "sqlane"
  | "sqlane-delete-completed"
  | "pg-boss-default"
  | "pg-boss-tuned"
  | "pg-boss-tuned-all"
  | "graphile-worker"
  | "bullmq-redis"
  | "bullmq-pg"
  | "effect-sql-persisted-queue"
  | "skip-locked-1"
  | "skip-locked-50"

export const systemIds: ReadonlyArray<SystemId> = [
  "sqlane",
  "sqlane-delete-completed",
  "skip-locked-1",
  "skip-locked-50",
  "pg-boss-default",
  "pg-boss-tuned",
  "pg-boss-tuned-all",
  "graphile-worker",
  "bullmq-redis",
  "bullmq-pg",
  "effect-sql-persisted-queue"
]

/** The payload of every job: about 70 bytes of JSON, like the peers' comparison used. */
export interface Payload {
  readonly i: number
  readonly userId: number
  readonly email: string
  readonly template: string
}

export const payload = (i: number): Payload => ({ i, userId: 1000 + i, email: `user${i}@example.com`, template: "welcome" })

/**
 * Where the system's data lives and how to reach it. `ns` is unique per measurement; every system
 * keeps its tables under names (or in schemas) that start with `${ns}_`, which is how the scenarios'
 * settle step (lib/settle.ts) finds the tables to `ANALYZE` after a preload.
 */
export interface Env {
  readonly target: Pick<Target, "db" | "dialect" | "url" | "redis">
  readonly ns: string
}

export interface WorkOptions {
  /** Jobs in flight at once. */
  readonly concurrency: number
  /** Called when a handler starts, with the job's payload. Returns a promise for real work. */
  readonly handle: (p: Payload) => void | Promise<void>
}

export interface Instance {
  /** One job, in a transaction of its own (autocommit). */
  readonly enqueue: (p: Payload) => Promise<void>
  /** Many jobs, with the system's batch API (or one transaction, where it has none). */
  readonly enqueueMany: (ps: ReadonlyArray<Payload>) => Promise<void>
  /** Starts a worker on this instance; resolves when it is ready. The function it returns stops it. */
  readonly work: (o: WorkOptions) => Promise<() => Promise<void>>
  readonly close: () => Promise<void>
  /**
   * Sets (a number) or clears (undefined) a limit on the attempts of the bench's job name running
   * at once in every process, where the system has one (sqlane: a run-time concurrency limit).
   */
  readonly limitRunning?: (running: number | undefined) => Promise<void>
}

export interface OpenOptions {
  /** Connections in this instance's pool. */
  readonly pool?: number
  /** Poll interval where one is configurable and the scenario sets it (ms). */
  readonly pollMs?: number
  /** Jobs in flight this instance will run (for systems whose pool must cover them). */
  readonly concurrency?: number
}

export interface System {
  readonly id: SystemId
  readonly dialects: ReadonlyArray<"pg" | "mysql">
  /** Fresh tables/schema for `env.ns`. */
  readonly prepare: (env: Env) => Promise<void>
  readonly open: (env: Env, o?: OpenOptions) => Promise<Instance>
  /** Bytes on disk (or in Redis memory) of the system's tables for `env.ns`. */
  readonly bytes: (env: Env) => Promise<number>
  readonly drop: (env: Env) => Promise<void>
  /** What the bytes count: "disk" or "RAM". */
  readonly storage?: "disk" | "RAM"
  /**
   * Run on the preloaded tables before a drain (with and without statistics): throws, saying
   * why, when the system's claim would not read its index in order (the hand-written floor must
   * be a floor whatever the planner knows).
   */
  readonly checkPlan?: (env: Env) => Promise<void>
}

export const QUEUE = "bench"
