/**
 * A TCP proxy on loopback between a test's processes and a database server, which the test can cut:
 * to the processes behind it, the database is then gone — without stopping a server other tests use.
 *
 * - `refuse`: every connection through it is closed and new ones are refused (a server that stopped).
 * - `blackhole`: connections stay open but nothing crosses any more, and new ones hang (a network
 *   that drops packets: a client learns of it only from its own timeouts).
 */
import * as net from "node:net"
import * as Effect from "effect/Effect"

export interface Proxy {
  /** `host:port` to connect to instead of the server's. */
  readonly address: string
  readonly port: number
  readonly cut: (mode: "refuse" | "blackhole") => Effect.Effect<void>
  /** Passes new connections again (after `refuse`: the server is back). */
  readonly restore: Effect.Effect<void>
}

/** Starts a proxy to `host:port` for the life of the scope. */
export const proxyTo = (host: string, port: number) =>
  Effect.acquireRelease(
    Effect.async<{ proxy: Proxy; close: () => void }>((resume) => {
      const sockets = new Set<net.Socket>()
      let mode: "pass" | "refuse" | "blackhole" = "pass"
      const server = net.createServer((client) => {
        if (mode === "refuse") return void client.destroy()
        sockets.add(client)
        client.on("close", () => sockets.delete(client))
        client.on("error", () => {})
        if (mode === "blackhole") return
        const upstream = net.connect(port, host)
        sockets.add(upstream)
        upstream.on("close", () => sockets.delete(upstream))
        upstream.on("error", () => client.destroy())
        client.on("error", () => upstream.destroy())
        // Data is forwarded only while the proxy passes it (`pipe` would keep forwarding).
        client.on("data", (d) => mode === "pass" && upstream.write(d))
        upstream.on("data", (d) => mode === "pass" && client.write(d))
        client.on("close", () => mode !== "blackhole" && upstream.destroy())
        upstream.on("close", () => mode !== "blackhole" && client.destroy())
      })
      server.listen(0, "127.0.0.1", () => {
        const listening = (server.address() as net.AddressInfo).port
        const close = () => {
          for (const s of sockets) s.destroy()
          server.close()
        }
        const proxy: Proxy = {
          address: `127.0.0.1:${listening}`,
          port: listening,
          cut: (to) =>
            Effect.sync(() => {
              mode = to
              if (to === "refuse") for (const s of sockets) s.destroy()
            }),
          restore: Effect.sync(() => {
            mode = "pass"
          })
        }
        resume(Effect.succeed({ proxy, close }))
      })
    }),
    ({ close }) => Effect.sync(close)
  ).pipe(Effect.map(({ proxy }) => proxy))
