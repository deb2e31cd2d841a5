/**
 * Spans only when someone reads them. With Effect's built-in tracer (no exporter such as
 * `@effect/opentelemetry` installed) a span per job or per enqueue costs CPU and is seen by
 * nobody; with any other tracer the span is made as usual.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Tracer from "effect/Tracer"

/** The tracer a fiber has when the app installed none. */
export const builtInTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)

/** `Effect.withSpan`, skipped while the current tracer is the built-in one. */
export const withSpanIfTraced = (name: string, options: Tracer.SpanOptions) =>
<A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.tracer, (tracer) => tracer === builtInTracer ? self : Effect.withSpan(self, name, options))

/**
 * A span's ids as stored with a job, `<trace id>:<span id>:<sampled 1|0>`, or null when they are
 * not W3C ids (e.g. the no-op span of `Effect.withTracerEnabled(false)`).
 */
export const encodeTraceContext = (span: { readonly traceId: string; readonly spanId: string; readonly sampled: boolean }) =>
  /^[0-9a-f]{32}$/.test(span.traceId) && /^[0-9a-f]{16}$/.test(span.spanId)
    ? `${span.traceId}:${span.spanId}:${span.sampled ? 1 : 0}`
    : null

/** The ids of a stored trace context, if it is well formed. */
export const decodeTraceContext = (text: string | null) => {
  const match = text === null ? null : /^([0-9a-f]{32}):([0-9a-f]{16}):([01])$/.exec(text)
  return match === null ? undefined : { traceId: match[1], spanId: match[2], sampled: match[3] === "1" }
}
