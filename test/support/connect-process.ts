/**
 * A worker program as an app would write it (NodeRuntime.runMain, QueueLive, Worker.layer), for
 * tests of what it prints and how fast it gives up when the database cannot be reached.
 *
 *   connect-process.ts <pg|mysql> <url>
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Job, QueueLive, Worker } from "../../src/index.js"
import { Noop } from "./jobs.js"
import { clientLayer } from "./targets.js"

const [dialect, url] = process.argv.slice(2)

const WorkerLive = Worker.layer({ handlers: [Job.handler(Noop, () => Effect.void)] }).pipe(
  Layer.provideMerge(QueueLive({ prefix: "connect_" })),
  Layer.provideMerge(clientLayer({ id: "child", dialect: dialect as "pg" | "mysql", url }, { maxConnections: 4 }))
)

NodeRuntime.runMain(Layer.launch(WorkerLive))
