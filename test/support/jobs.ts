/** Job definitions shared by the tests and the child processes they spawn. */
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { Job } from "../../src/index.js"

export const Noop = Job.make("noop", { payload: Schema.Struct({ i: Schema.Number }) })
/** Runs for an hour: a job to kill its worker under. */
export const Hang = Job.make("hang", { payload: Schema.Struct({}) })
/** Kills its own worker process; 3 attempts. */
export const Suicide = Job.make("suicide", {
  payload: Schema.Struct({}),
  retry: Job.attempts(3, Schedule.spaced("10 millis"))
})
/** The rates of `Rated`: 5 starts a second in all, 2 a second per tenant. */
export const ratedRates = { rate: { starts: 5, per: "1 second" }, ratePerKey: { starts: 2, per: "1 second" } } as const
/** A job name under rate limits, by tenant. */
export const Rated = Job.make("rated", {
  payload: Schema.Struct({ tenant: Schema.String, i: Schema.Number }),
  limits: { ...ratedRates, key: (p) => p.tenant }
})
/** Takes 3 seconds. */
export const Slow = Job.make("slow", { payload: Schema.Struct({}) })
/** The limits of `Limited`: 4 at once in all, 2 per tenant. */
export const limitedLimits = { running: 4, runningPerKey: 2 } as const
/** A job name under concurrency limits, by tenant. */
export const Limited = Job.make("limited", {
  payload: Schema.Struct({ tenant: Schema.String, i: Schema.Number }),
  limits: { ...limitedLimits, key: (p) => p.tenant }
})

/** A job name with a limit of 40 at once (slots that pass from attempt to attempt). */
export const Forty = Job.make("forty", { payload: Schema.Struct({ i: Schema.Number }), limits: { running: 40 } })
