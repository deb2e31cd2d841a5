/**
 * The ticks of periodic jobs across both daylight-saving changes of 2026, in three zones: the
 * clock going back (a repeated hour) and jumping ahead (a skipped hour). Pure: no database.
 *
 * The changes: America/Los_Angeles 03-08 10:00Z (02:00 PST → 03:00 PDT) and 11-01 09:00Z
 * (02:00 PDT → 01:00 PST); Europe/Berlin 03-29 01:00Z (02:00 CET → 03:00 CEST) and 10-25 01:00Z
 * (03:00 CEST → 02:00 CET); Australia/Sydney 04-04 16:00Z (03:00 AEDT → 02:00 AEST) and 10-03
 * 16:00Z (02:00 AEST → 03:00 AEDT).
 *
 * Also what a periodic job's declaration accepts (its time zone, its priority).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Cron from "effect/Cron"
import * as DateTime from "effect/DateTime"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { Job, PeriodicJob } from "../src/index.js"
import { fallBacks, latestTick, nextTick, wildHours } from "../src/internal/cron.js"

const LA = "America/Los_Angeles"
const BERLIN = "Europe/Berlin"
const SYDNEY = "Australia/Sydney"

/** The ticks in `(from, to]` by `nextTick`, as ISO instants. */
const ticks = (expr: string, zone: string, from: string, to: string): Array<string> => {
  const cron = Cron.unsafeParse(expr, zone)
  const out: Array<string> = []
  let t = new Date(from)
  while (true) {
    t = nextTick(cron, t)
    if (t.getTime() > Date.parse(to)) return out
    out.push(t.toISOString())
  }
}

/** Every `stepMinutes` minutes of real time in `(from, to]`, as ISO instants. */
const every = (stepMinutes: number, from: string, to: string): Array<string> => {
  const out: Array<string> = []
  for (let t = Date.parse(from) + stepMinutes * 60_000; t <= Date.parse(to); t += stepMinutes * 60_000) {
    out.push(new Date(t).toISOString())
  }
  return out
}

const z = (s: string) => `2026-${s}:00.000Z`

describe("nextTick: the clock goes back (a repeated hour)", () => {
  it("America/Los_Angeles: wildcard and step hours run by real time, 01:30 once", () => {
    const [from, to] = ["2026-11-01T07:00:00Z", "2026-11-01T11:00:00Z"]
    const minutes = ticks("* * * * *", LA, from, to)
    assert.strictEqual(minutes.length, 240)
    assert.deepStrictEqual(minutes, every(1, from, to))
    assert.deepStrictEqual(ticks("*/15 * * * *", LA, from, to), every(15, from, to))
    assert.deepStrictEqual(ticks("0 * * * *", LA, from, to), [z("11-01T08:00"), z("11-01T09:00"), z("11-01T10:00"), z("11-01T11:00")])
    // 01:00 is not an even hour: 00:00 PDT, then 02:00 PST three real hours later
    assert.deepStrictEqual(ticks("0 */2 * * *", LA, "2026-11-01T06:00:00Z", "2026-11-01T12:00:00Z"), [
      z("11-01T07:00"),
      z("11-01T10:00"),
      z("11-01T12:00")
    ])
    assert.deepStrictEqual(ticks("30 1 * * *", LA, "2026-10-31T00:00:00Z", "2026-11-03T00:00:00Z"), [
      z("10-31T08:30"),
      z("11-01T08:30"),
      z("11-02T09:30")
    ])
  })

  it("America/Los_Angeles: what Cron.next does, and nextTick from inside the second 01:xx", () => {
    const minutely = Cron.unsafeParse("* * * * *", LA)
    const hourly = Cron.unsafeParse("0 * * * *", LA)
    const fixed = Cron.unsafeParse("30 1 * * *", LA)
    // Cron.next skips the second 01:xx, and steps back into the first from inside it
    assert.strictEqual(Cron.next(minutely, new Date(z("11-01T08:59"))).toISOString(), z("11-01T10:00"))
    assert.strictEqual(Cron.next(hourly, new Date(z("11-01T08:00"))).toISOString(), z("11-01T10:00"))
    assert.strictEqual(Cron.next(minutely, new Date(z("11-01T09:30"))).toISOString(), z("11-01T08:31"))
    assert.strictEqual(Cron.next(fixed, new Date(z("11-01T09:10"))).toISOString(), z("11-01T08:30"))
    assert.strictEqual(nextTick(minutely, new Date(z("11-01T08:59"))).toISOString(), z("11-01T09:00"))
    assert.strictEqual(nextTick(minutely, new Date(z("11-01T09:30"))).toISOString(), z("11-01T09:31"))
    assert.strictEqual(nextTick(minutely, new Date("2026-11-01T09:59:30Z")).toISOString(), z("11-01T10:00"))
    assert.strictEqual(nextTick(hourly, new Date(z("11-01T08:00"))).toISOString(), z("11-01T09:00"))
    // a scheduler starting in the second 01:xx does not fire 01:30 again
    assert.strictEqual(nextTick(fixed, new Date(z("11-01T09:10"))).toISOString(), z("11-02T09:30"))
    assert.strictEqual(nextTick(fixed, new Date(z("11-01T08:10"))).toISOString(), z("11-01T08:30"))
    // seconds (6 fields): every 20 s through the second copy too
    assert.deepStrictEqual(ticks("*/20 * * * * *", LA, "2026-11-01T08:59:00Z", "2026-11-01T09:00:40Z"), [
      "2026-11-01T08:59:20.000Z",
      "2026-11-01T08:59:40.000Z",
      "2026-11-01T09:00:00.000Z",
      "2026-11-01T09:00:20.000Z",
      "2026-11-01T09:00:40.000Z"
    ])
  })

  it("Europe/Berlin: 02:xx twice (00:00–00:59Z, 01:00–01:59Z)", () => {
    const [from, to] = ["2026-10-24T23:00:00Z", "2026-10-25T03:00:00Z"]
    assert.deepStrictEqual(ticks("* * * * *", BERLIN, from, to), every(1, from, to))
    assert.deepStrictEqual(ticks("*/15 * * * *", BERLIN, from, to), every(15, from, to))
    assert.deepStrictEqual(ticks("0 * * * *", BERLIN, from, to), [z("10-25T00:00"), z("10-25T01:00"), z("10-25T02:00"), z("10-25T03:00")])
    // 02:00 is an even hour: it fires at both copies, an hour apart
    assert.deepStrictEqual(ticks("0 */2 * * *", BERLIN, "2026-10-24T20:00:00Z", "2026-10-25T05:00:00Z"), [
      z("10-24T22:00"),
      z("10-25T00:00"),
      z("10-25T01:00"),
      z("10-25T03:00"),
      z("10-25T05:00")
    ])
    assert.deepStrictEqual(ticks("30 2 * * *", BERLIN, "2026-10-23T00:00:00Z", "2026-10-27T00:00:00Z"), [
      z("10-23T00:30"),
      z("10-24T00:30"),
      z("10-25T00:30"),
      z("10-26T01:30")
    ])
  })

  it("Australia/Sydney: 02:xx twice in April (15:00–15:59Z, 16:00–16:59Z)", () => {
    const [from, to] = ["2026-04-04T13:00:00Z", "2026-04-04T18:00:00Z"]
    assert.deepStrictEqual(ticks("* * * * *", SYDNEY, from, to), every(1, from, to))
    assert.deepStrictEqual(ticks("*/15 * * * *", SYDNEY, from, to), every(15, from, to))
    assert.deepStrictEqual(ticks("0 * * * *", SYDNEY, from, to), [
      z("04-04T14:00"),
      z("04-04T15:00"),
      z("04-04T16:00"),
      z("04-04T17:00"),
      z("04-04T18:00")
    ])
    assert.deepStrictEqual(ticks("0 */2 * * *", SYDNEY, "2026-04-04T10:00:00Z", "2026-04-04T20:00:00Z"), [
      z("04-04T11:00"),
      z("04-04T13:00"),
      z("04-04T15:00"),
      z("04-04T16:00"),
      z("04-04T18:00"),
      z("04-04T20:00")
    ])
    assert.deepStrictEqual(ticks("30 2 * * *", SYDNEY, "2026-04-03T00:00:00Z", "2026-04-07T00:00:00Z"), [
      z("04-03T15:30"),
      z("04-04T15:30"),
      z("04-05T16:30"),
      z("04-06T16:30")
    ])
  })
})

describe("nextTick: the clock jumps ahead (a skipped hour): each skipped wall time once, read in the offset before", () => {
  it("several times in the skipped hour each fire: Los Angeles, Berlin, Troll (2 h), Lord Howe (30 min)", () => {
    // Cron.next gives only the first of them: 10:00Z, then the next day.
    assert.deepStrictEqual(ticks("*/20 2 * * *", LA, "2026-03-08T09:00:00Z", "2026-03-09T09:30:00Z"), [
      z("03-08T10:00"),
      z("03-08T10:20"),
      z("03-08T10:40"),
      z("03-09T09:00"),
      z("03-09T09:20")
    ])
    assert.deepStrictEqual(ticks("15,45 2 * * *", BERLIN, "2026-03-29T00:00:00Z", "2026-03-30T01:00:00Z"), [
      z("03-29T01:15"),
      z("03-29T01:45"),
      z("03-30T00:15"),
      z("03-30T00:45")
    ])
    // Antarctica/Troll: +00 → +02 at 01:00Z, wall 01:00–02:59 skipped; 03:00 (+02) is 01:00Z again.
    assert.deepStrictEqual(ticks("0 1-3 * * *", "Antarctica/Troll", "2026-03-28T23:00:00Z", "2026-03-30T00:00:00Z"), [
      z("03-29T01:00"),
      z("03-29T02:00"),
      z("03-29T23:00"),
      z("03-30T00:00")
    ])
    // Australia/Lord_Howe: +10:30 → +11 at 15:30Z, wall 02:00–02:29 skipped.
    assert.deepStrictEqual(ticks("*/20 2 * * *", "Australia/Lord_Howe", "2026-10-03T15:00:00Z", "2026-10-03T16:30:00Z"), [
      z("10-03T15:30"),
      z("10-03T15:40"),
      z("10-03T15:50")
    ])
  })

  it("latestTick finds each skipped wall time (Cron.prev finds one at most)", () => {
    const cron = Cron.unsafeParse("*/20 2 * * *", LA)
    // The latest tick enqueued: the day before's last.
    const lastUs = Date.parse("2026-03-07T10:40:00Z") * 1000
    assert.strictEqual(latestTick(cron, Date.parse("2026-03-08T10:30:00Z"), lastUs)?.toISOString(), z("03-08T10:20"))
    assert.strictEqual(latestTick(cron, Date.parse("2026-03-08T10:50:00Z"), lastUs)?.toISOString(), z("03-08T10:40"))
    assert.strictEqual(latestTick(cron, Date.parse("2026-03-08T12:00:00Z"), lastUs)?.toISOString(), z("03-08T10:40"))
  })

  it("latestTick survives Cron.prev throwing after a DST gap (30 2 * * * Europe/Berlin)", () => {
    const cron = Either.getOrThrow(Cron.parse("30 2 * * *", "Europe/Berlin"))
    const now = Date.parse("2026-03-29T03:00:00Z")
    // effect's Cron.prev throws here (the 02:30 of 29 March does not exist in Berlin)
    assert.throws(() => Cron.prev(cron, new Date(now)))
    const lastUs = Date.parse("2026-03-28T01:30:00Z") * 1000
    assert.strictEqual(latestTick(cron, now, lastUs)?.toISOString(), "2026-03-29T01:30:00.000Z")
    // and the ordinary path
    assert.strictEqual(
      latestTick(cron, Date.parse("2026-03-31T12:00:00Z"), lastUs)?.toISOString(),
      "2026-03-31T00:30:00.000Z"
    )
  })

  it("America/Los_Angeles: no real minute is lost; 02:30 fires once, at 03:30 PDT", () => {
    const [from, to] = ["2026-03-08T08:00:00Z", "2026-03-08T12:00:00Z"]
    assert.deepStrictEqual(ticks("* * * * *", LA, from, to), every(1, from, to))
    assert.deepStrictEqual(ticks("*/15 * * * *", LA, from, to), every(15, from, to))
    assert.deepStrictEqual(ticks("0 * * * *", LA, from, to), [z("03-08T09:00"), z("03-08T10:00"), z("03-08T11:00"), z("03-08T12:00")])
    // 02:00 PST does not exist: read as 03:00 PDT, then 04:00 PDT an hour later
    assert.deepStrictEqual(ticks("0 */2 * * *", LA, "2026-03-08T06:00:00Z", "2026-03-08T14:00:00Z"), [
      z("03-08T08:00"),
      z("03-08T10:00"),
      z("03-08T11:00"),
      z("03-08T13:00")
    ])
    assert.deepStrictEqual(ticks("30 2 * * *", LA, "2026-03-06T12:00:00Z", "2026-03-10T00:00:00Z"), [
      z("03-07T10:30"),
      z("03-08T10:30"),
      z("03-09T09:30")
    ])
  })

  it("Europe/Berlin: 02:xx skipped on 03-29", () => {
    const [from, to] = ["2026-03-28T23:00:00Z", "2026-03-29T03:00:00Z"]
    assert.deepStrictEqual(ticks("* * * * *", BERLIN, from, to), every(1, from, to))
    assert.deepStrictEqual(ticks("*/15 * * * *", BERLIN, from, to), every(15, from, to))
    assert.deepStrictEqual(ticks("0 * * * *", BERLIN, from, to), [z("03-29T00:00"), z("03-29T01:00"), z("03-29T02:00"), z("03-29T03:00")])
    assert.deepStrictEqual(ticks("0 */2 * * *", BERLIN, "2026-03-28T20:00:00Z", "2026-03-29T05:00:00Z"), [
      z("03-28T21:00"),
      z("03-28T23:00"),
      z("03-29T01:00"),
      z("03-29T02:00"),
      z("03-29T04:00")
    ])
    assert.deepStrictEqual(ticks("30 2 * * *", BERLIN, "2026-03-27T00:00:00Z", "2026-03-31T00:00:00Z"), [
      z("03-27T01:30"),
      z("03-28T01:30"),
      z("03-29T01:30"),
      z("03-30T00:30")
    ])
  })

  it("Australia/Sydney: 02:xx skipped on 10-04 (local)", () => {
    const [from, to] = ["2026-10-03T13:00:00Z", "2026-10-03T18:00:00Z"]
    assert.deepStrictEqual(ticks("* * * * *", SYDNEY, from, to), every(1, from, to))
    assert.deepStrictEqual(ticks("*/15 * * * *", SYDNEY, from, to), every(15, from, to))
    assert.deepStrictEqual(ticks("0 * * * *", SYDNEY, from, to), [
      z("10-03T14:00"),
      z("10-03T15:00"),
      z("10-03T16:00"),
      z("10-03T17:00"),
      z("10-03T18:00")
    ])
    assert.deepStrictEqual(ticks("0 */2 * * *", SYDNEY, "2026-10-03T10:00:00Z", "2026-10-03T20:00:00Z"), [
      z("10-03T12:00"),
      z("10-03T14:00"),
      z("10-03T16:00"),
      z("10-03T17:00"),
      z("10-03T19:00")
    ])
    assert.deepStrictEqual(ticks("30 2 * * *", SYDNEY, "2026-10-02T00:00:00Z", "2026-10-06T00:00:00Z"), [
      z("10-02T16:30"),
      z("10-03T16:30"),
      z("10-04T15:30"),
      z("10-05T15:30")
    ])
  })
})

describe("nextTick: helpers", () => {
  it("wildHours: a wildcard or a step hour field, from the parsed hours", () => {
    const wild = (hours: string) => wildHours(Cron.unsafeParse(`0 ${hours} * * *`))
    for (const h of ["*", "*/1", "*/2", "*/5", "*/23", "0-23"]) assert.isTrue(wild(h), h)
    for (const h of ["0", "1", "1-3", "1,2", "1-23/2", "9-17"]) assert.isFalse(wild(h), h)
  })

  it("fallBacks: the repeated hours of 2026, none in UTC or at a fixed offset", () => {
    const year = (zone: string) =>
      fallBacks(DateTime.zoneUnsafeMakeNamed(zone), Date.parse("2026-01-01T00:00:00Z"), Date.parse("2027-01-01T00:00:00Z"))
        .map((r) => [new Date(r.start).toISOString(), new Date(r.end).toISOString(), r.offsetAfter / 3_600_000])
    assert.deepStrictEqual(year(LA), [[z("11-01T09:00"), z("11-01T10:00"), -8]])
    assert.deepStrictEqual(year(BERLIN), [[z("10-25T01:00"), z("10-25T02:00"), 1]])
    assert.deepStrictEqual(year(SYDNEY), [[z("04-04T16:00"), z("04-04T17:00"), 10]])
    assert.deepStrictEqual(year("UTC"), [])
    assert.deepStrictEqual(fallBacks(DateTime.zoneMakeOffset(3_600_000), 0, Date.parse("2027-01-01T00:00:00Z")), [])
  })

  it("latestTick follows nextTick around a fall-back (Cron.prev does not)", () => {
    const minutely = Cron.unsafeParse("* * * * *", LA)
    const fixed = Cron.unsafeParse("30 1 * * *", LA)
    // Cron.prev jumps an hour back at the second 01:00, and misses the first 01:30 from inside the second copy
    assert.strictEqual(Cron.prev(minutely, new Date(z("11-01T09:00"))).toISOString(), z("11-01T07:59"))
    assert.strictEqual(Cron.prev(fixed, new Date(z("11-01T09:05"))).toISOString(), z("10-31T08:30"))
    const latest = (cron: Cron.Cron, at: string) => latestTick(cron, Date.parse(at), 0)?.toISOString()
    assert.strictEqual(latest(minutely, "2026-11-01T08:30:00Z"), z("11-01T08:30"))
    assert.strictEqual(latest(minutely, "2026-11-01T09:00:00Z"), z("11-01T09:00"))
    assert.strictEqual(latest(minutely, "2026-11-01T09:35:30Z"), z("11-01T09:35"))
    assert.strictEqual(latest(minutely, "2026-11-01T12:05:00Z"), z("11-01T12:05"))
    for (const at of ["2026-11-01T08:45:00Z", "2026-11-01T09:05:00Z", "2026-11-01T09:35:00Z", "2026-11-01T10:05:00Z"]) {
      assert.strictEqual(latest(fixed, at), z("11-01T08:30"), at)
    }
    assert.strictEqual(latest(fixed, "2026-11-01T08:29:00Z"), z("10-31T08:30"))
  })

  it("a periodic job without a time zone is read in UTC, whatever the process's zone", () => {
    const Tick = Job.make("tick", { payload: Schema.Struct({}) })
    const p = PeriodicJob.unsafeMake("p", { cron: "0 9 * * *", job: Tick, payload: {} })
    assert.strictEqual(Option.getOrUndefined(Option.map(p.cron.tz, DateTime.zoneToString)), "UTC")
  })

  it("a periodic job's priority may be any 32-bit integer, like an enqueue's", () => {
    const J = Job.make("sched-p", { payload: Schema.Struct({}) })
    for (const priority of [-2147483648, 2147483647]) {
      assert.isTrue(Either.isRight(PeriodicJob.make("p", { cron: "* * * * *", job: J, payload: {}, priority })))
    }
    assert.isTrue(Either.isLeft(PeriodicJob.make("p", { cron: "* * * * *", job: J, payload: {}, priority: 2147483648 })))
  })
})
