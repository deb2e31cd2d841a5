import { Schema } from "effect"
import { Job } from "../../src/index.js"

export const Crash = Job.make("crash", { payload: Schema.Struct({}) })
