/**
 * sqlane: a background job queue for Effect apps that keeps its jobs in the SQL database the
 * app already runs (PostgreSQL, MySQL 8.0+, MariaDB 10.6+).
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as Job from "./schema/Job.js"
/** @since 0.1.0 */
export * as JobInfo from "./schema/JobInfo.js"
/** @since 0.1.0 */
export * as PeriodicJob from "./schema/PeriodicJob.js"
/** @since 0.1.0 */
export * as Errors from "./schema/Errors.js"
/** @since 0.1.0 */
export * as Queue from "./services/Queue.js"
/** @since 0.1.0 */
export * as Worker from "./services/Worker.js"
/** @since 0.1.0 */
export * as Scheduler from "./services/Scheduler.js"
/** @since 0.1.0 */
export * as Claimer from "./services/Claimer.js"
/** @since 0.1.0 */
export * as Completer from "./services/Completer.js"
/** @since 0.1.0 */
export * as Notifier from "./services/Notifier.js"
/** @since 0.1.0 */
export * as QueueConfig from "./services/QueueConfig.js"
/** @since 0.1.0 */
export * as Migrations from "./services/Migrations.js"
/** @since 0.1.0 */
export * as Metrics from "./services/Metrics.js"
/** @since 0.1.0 */
export * as Admin from "./services/Admin.js"
/** @since 0.1.0 */
export * as Pruner from "./services/Pruner.js"
/** @since 0.1.0 */
export * as Events from "./services/Events.js"
/** @since 0.1.0 */
export { QueueLive } from "./layers/QueueLive.js"
/** @since 0.1.0 */
export type { QueueOptions } from "./services/QueueConfig.js"
/** @since 0.1.0 */
export type { EnqueueManyOptions, EnqueueOptions, InsertResult, UniqueOptions } from "./services/Queue.js"
/** @since 0.1.0 */
export type { WorkerOptions } from "./services/Worker.js"
/** @since 0.1.0 */
export type { SchedulerOptions } from "./services/Scheduler.js"
