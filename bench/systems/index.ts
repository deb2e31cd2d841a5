/**
 * The systems the bench runs, each loaded when a run selects it: the peers' packages (pg-boss,
 * graphile-worker, BullMQ with ioredis) are installed by `npm run bench:install` into
 * bench/node_modules, apart from the repository's own install; sqlane, plain SKIP LOCKED and
 * Effect's SqlPersistedQueue need nothing more.
 */
import type { System, SystemId } from "./types.js"

const loaders: Record<SystemId, () => Promise<System>> = {
  sqlane: () => import("./sqlane.js").then((m) => m.sqlane),
  "sqlane-delete-completed": () => import("./sqlane.js").then((m) => m.sqlaneDeleteCompleted),
  "skip-locked-1": () => import("./skip-locked.js").then((m) => m.skipLocked1),
  "skip-locked-50": () => import("./skip-locked.js").then((m) => m.skipLocked50),
  "pg-boss-default": () => import("./pg-boss.js").then((m) => m.pgBossDefault),
  "pg-boss-tuned": () => import("./pg-boss.js").then((m) => m.pgBossTuned),
  "pg-boss-tuned-all": () => import("./pg-boss.js").then((m) => m.pgBossTunedAll),
  "graphile-worker": () => import("./graphile-worker.js").then((m) => m.graphileWorker),
  "bullmq-redis": () => import("./bullmq.js").then((m) => m.bullmqRedis),
  "bullmq-pg": () => import("./bullmq.js").then((m) => m.bullmqPg),
  "effect-sql-persisted-queue": () => import("./effect-sql-persisted-queue.js").then((m) => m.effectSqlPersistedQueue)
}

/** System `id`'s adapter; when its packages are not installed, an error that says how to install them. */
export const loadSystem = (id: SystemId): Promise<System> =>
  loaders[id]().catch((error: unknown) => {
    if ((error as { code?: unknown }).code !== "ERR_MODULE_NOT_FOUND") throw error
    throw new Error(
      `${id}: its packages are not installed; run \`npm run bench:install\` (bench/package.json), ` +
        `or leave it out with --system (${String((error as Error).message).split("\n")[0]})`
    )
  })
