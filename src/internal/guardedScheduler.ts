/**
 * A scheduler for the fibers of job attempts that keeps one attempt's broken fiber from stopping
 * the others.
 *
 * Effect's run loop inspects what a handler throws (`Effect.sync(() => { throw value })`): when
 * that inspection throws too (a `Proxy` whose traps throw), the exception leaves the run loop, and
 * the fiber never ends. Thrown from a task of the default scheduler, it also drops every task
 * queued behind it in that pass — other fibers that then never resume (the worker's own loop
 * among them). This scheduler runs each task of an attempt's fiber in a `try`, reports the
 * exception with the fiber that threw it, and lets the pass go on.
 *
 * @internal
 */
import type * as Fiber from "effect/Fiber"
import type * as Scheduler from "effect/Scheduler"

/**
 * `inner` with each task run in a `try`: an exception a task throws goes to `escaped`, with the
 * fiber whose task it was (`undefined` if Effect did not say), and the scheduler's pass goes on.
 */
export const guardedScheduler = (
  inner: Scheduler.Scheduler,
  escaped: (thrown: unknown, fiber: Fiber.RuntimeFiber<unknown, unknown> | undefined) => void
): Scheduler.Scheduler => ({
  shouldYield: (fiber) => inner.shouldYield(fiber),
  scheduleTask: (task, priority, fiber) =>
    inner.scheduleTask(() => {
      try {
        task()
      } catch (thrown) {
        escaped(thrown, fiber)
      }
    }, priority, fiber)
})
