/**
 * Jobs claimed ahead that wait to start, taking turns by key. The jobs of a name with fair shares
 * (`limits.key`) wait in a queue per concurrency key; every other job waits in one queue of its
 * own. Each queue keeps its jobs in claim order, and the queues take turns, round-robin: the next
 * job to start is the first of the queue whose turn it is, and a queue that appears joins the end
 * of the round.
 *
 * So fair shares hold among a worker's waiting jobs as they do in its claims
 * (`driver/fairShares.ts`): a key whose jobs a claim brings while jobs of another key wait ahead of
 * them starts them in turn with those, instead of after them. Without jobs of fair names there is one
 * queue, and jobs start in claim order.
 *
 * Source: round-robin across groups as in pg-boss's groups and Hatchet's `GROUP_ROUND_ROBIN`, kept
 * by the worker for what it has claimed.
 *
 * @internal
 */

/** Waiting jobs (`A`) in queues by key, taking turns. */
export interface Turns<A> {
  /** How many jobs wait. */
  readonly size: () => number
  /** Puts a job at the end of its key's queue. */
  readonly push: (key: string, item: A) => void
  /** Takes the first job of the queue whose turn it is; that queue's next turn comes after every other queue's. */
  readonly shift: () => A | undefined
  /** Takes out the jobs `which` selects, in the order they would start within each queue. */
  readonly remove: (which: (item: A) => boolean) => Array<A>
  /** Every waiting job (queue after queue). */
  readonly items: () => Array<A>
  /** Takes out every job. */
  readonly clear: () => void
}

/** The key of the one queue of jobs that take no turns of their own. */
export const unturned = ""

export const make = <A>(): Turns<A> => {
  // A Map iterates in insertion order: its first key's queue has the turn, and a queue that had
  // one is deleted and set again, which moves it to the end of the round.
  const queues = new Map<string, Array<A>>()
  let size = 0
  return {
    size: () => size,
    push: (key, item) => {
      const queue = queues.get(key)
      if (queue === undefined) queues.set(key, [item])
      else queue.push(item)
      size++
    },
    shift: () => {
      const first = queues.entries().next()
      if (first.done === true) return undefined
      const [key, queue] = first.value
      const item = queue.shift()!
      size--
      queues.delete(key)
      if (queue.length > 0) queues.set(key, queue)
      return item
    },
    remove: (which) => {
      const removed: Array<A> = []
      for (const [key, queue] of queues) {
        const kept = queue.filter((item) => !which(item) || (removed.push(item), false))
        if (kept.length === queue.length) continue
        if (kept.length === 0) queues.delete(key)
        else queues.set(key, kept)
      }
      size -= removed.length
      return removed
    },
    items: () => Array.from(queues.values()).flat(),
    clear: () => {
      queues.clear()
      size = 0
    }
  }
}
