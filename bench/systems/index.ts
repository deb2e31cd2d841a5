import { bullmqPg, bullmqRedis } from "./bullmq.js"
import { effectSqlPersistedQueue } from "./effect-sql-persisted-queue.js"
import { graphileWorker } from "./graphile-worker.js"
import { pgBossDefault, pgBossTuned } from "./pg-boss.js"
import { skipLocked1, skipLocked50 } from "./skip-locked.js"
import { sqlane, sqlaneDeleteCompleted } from "./sqlane.js"
import type { System, SystemId } from "./types.js"

export const systems: Record<SystemId, System> = {
  sqlane,
  "sqlane-delete-completed": sqlaneDeleteCompleted,
  "skip-locked-1": skipLocked1,
  "skip-locked-50": skipLocked50,
  "pg-boss-default": pgBossDefault,
  "pg-boss-tuned": pgBossTuned,
  "graphile-worker": graphileWorker,
  "bullmq-redis": bullmqRedis,
  "bullmq-pg": bullmqPg,
  "effect-sql-persisted-queue": effectSqlPersistedQueue
}
