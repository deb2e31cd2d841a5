/**
 * PostgreSQL: notifications between sessions. `channelListen` holds one dedicated connection that
 * `LISTEN`s on a channel: unlike `PgClient.listen` it tells when `LISTEN` is active (so a worker can
 * re-probe then and miss nothing), and it fails when the connection dies, so the caller can listen
 * again with a `Schedule`. `channelNotify` sends with `pg_notify` (`PgClient.notify` is broken in
 * @effect/sql-pg 0.53).
 *
 * @internal
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type Pg from "pg"
import type { NotificationsOps } from "../Driver.js"
import { ListenError } from "../errors.js"
import type { PgContext } from "./context.js"

/**
 * Connects, runs `LISTEN`, calls `onReady`, then calls `onPayload` for each notification until
 * the connection fails (the effect fails) or the scope closes (the connection is closed).
 */
const listen = (
  pg: typeof Pg,
  config: PgClient.PgClientConfig,
  channel: string,
  onReady: () => void,
  onPayload: (payload: string) => void
): Effect.Effect<never, ListenError> =>
  Effect.scoped(
    Effect.gen(function*() {
      const client = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: async () => {
            const client = new pg.Client({
              connectionString: config.url ? Redacted.value(config.url) : undefined,
              host: config.host,
              port: config.port,
              user: config.username,
              password: config.password ? Redacted.value(config.password) : undefined,
              database: config.database,
              ssl: config.ssl as any,
              application_name: `sqlane-listen:${channel}`.slice(0, 63)
            })
            client.on("error", () => {})
            await client.connect()
            return client
          },
          catch: (cause) => new ListenError(`cannot connect for LISTEN: ${String(cause)}`, { cause })
        }),
        (client) =>
          Effect.promise(() => client.end().catch(() => undefined)).pipe(Effect.interruptible, Effect.timeoutOption(1000))
      )
      return yield* Effect.async<never, ListenError>((resume) => {
        const onNotification = (msg: Pg.Notification) => {
          if (msg.channel === channel) onPayload(msg.payload ?? "")
        }
        const onError = (err: Error) =>
          resume(Effect.fail(new ListenError(`LISTEN connection failed: ${err.message}`, { cause: err })))
        const onEnd = () => resume(Effect.fail(new ListenError("LISTEN connection closed")))
        client.on("notification", onNotification)
        client.on("error", onError)
        client.on("end", onEnd)
        client.query(`LISTEN ${pg.escapeIdentifier(channel)}`).then(
          () => onReady(),
          (err) => resume(Effect.fail(new ListenError(`LISTEN failed: ${String(err)}`, { cause: err })))
        )
        return Effect.sync(() => {
          client.off("notification", onNotification)
          client.off("error", onError)
          client.off("end", onEnd)
        })
      })
    })
  )

export const make = (ctx: PgContext): NotificationsOps => {
  const { options, sql } = ctx
  const settings = options.listen
  return {
    channelListen: (channel, onReady, onPayload) =>
      settings === undefined
        ? Effect.fail(new ListenError("no LISTEN without the settings of @effect/sql-pg's PgClient"))
        : listen(settings.pg, settings.config, channel, onReady, onPayload),
    channelNotify: (channel, payload) => sql`SELECT pg_notify(${channel}, ${payload})`.pipe(Effect.asVoid)
  }
}
