/**
 * Jobs claimed ahead that wait to start, in priority order and, within a priority, taking turns by
 * key. The jobs of a name with fair shares (`limits.key`) wait in a queue per concurrency key; every
 * other job of the same priority waits in one queue of its own. Each queue keeps its jobs in claim
 * order. The next job to start is one of the lowest priority number waiting, from the queue whose
 * turn it is among that priority's queues, which take turns round-robin; a queue that appears joins
 * the end of its priority's round.
 *
 * So fair shares hold among a worker's waiting jobs as they do in its claims
 * (`driver/fairShares.ts`, per name and priority): a key whose jobs a claim brings while jobs of
 * another key wait ahead of them starts them in turn with those, instead of after them; and a job of
 * a lower priority number never waits behind one of a higher. Without jobs of fair names there is one
 * queue per priority, and jobs start in claim order within it.
 *
 * Source: round-robin across groups as in pg-boss's groups and Hatchet's `GROUP_ROUND_ROBIN`, kept
 * by the worker for what it has claimed.
 *
 * @internal
 */

/** Waiting jobs (`A`) by priority, in queues by key taking turns. */
export interface Turns<A> {
  /** How many jobs wait. */
  readonly size: () => number
  /** Puts a job at the end of its key's queue among the jobs of its priority. */
  readonly push: (priority: number, key: string, item: A) => void
  /**
   * Takes the first job of the queue whose turn it is among those of the lowest priority number;
   * that queue's next turn comes after every other queue's of its priority.
   */
  readonly shift: () => A | undefined
  /** Takes out the jobs `which` selects, in the order they would start within each queue. */
  readonly remove: (which: (item: A) => boolean) => Array<A>
  /** Every waiting job (priority after priority, queue after queue). */
  readonly items: () => Array<A>
  /** Takes out every job. */
  readonly clear: () => void
}

/** The key of the queue of jobs that take no turns of their own (in each priority). */
export const unturned = ""

export const make = <A>(): Turns<A> => {
  // Per priority, its queues by key. A Map iterates in insertion order: its first key's queue has
  // the turn, and a queue that had one is deleted and set again, which moves it to the end.
  const rounds = new Map<number, Map<string, Array<A>>>()
  /** The priorities with waiting jobs, lowest number first. */
  let priorities: Array<number> = []
  let size = 0
  const drop = (priority: number) => {
    rounds.delete(priority)
    priorities = priorities.filter((p) => p !== priority)
  }
  return {
    size: () => size,
    push: (priority, key, item) => {
      let round = rounds.get(priority)
      if (round === undefined) {
        rounds.set(priority, round = new Map())
        priorities.push(priority)
        priorities.sort((a, b) => a - b)
      }
      const queue = round.get(key)
      if (queue === undefined) round.set(key, [item])
      else queue.push(item)
      size++
    },
    shift: () => {
      if (size === 0) return undefined
      const priority = priorities[0]
      const round = rounds.get(priority)!
      const [key, queue] = round.entries().next().value!
      const item = queue.shift()!
      size--
      round.delete(key)
      if (queue.length > 0) round.set(key, queue)
      else if (round.size === 0) drop(priority)
      return item
    },
    remove: (which) => {
      const removed: Array<A> = []
      for (const [priority, round] of rounds) {
        for (const [key, queue] of round) {
          const kept = queue.filter((item) => !which(item) || (removed.push(item), false))
          if (kept.length === queue.length) continue
          if (kept.length === 0) round.delete(key)
          else round.set(key, kept)
        }
        if (round.size === 0) drop(priority)
      }
      size -= removed.length
      return removed
    },
    items: () => priorities.flatMap((p) => Array.from(rounds.get(p)!.values()).flat()),
    clear: () => {
      rounds.clear()
      priorities = []
      size = 0
    }
  }
}
