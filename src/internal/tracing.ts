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
