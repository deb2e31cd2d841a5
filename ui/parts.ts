/**
 * Small pieces the views share: the action context (read-only or not, a status line for outcomes),
 * error and empty states, state badges, and a button that asks for confirmation inline.
 */
import { html } from "htm/preact"
import { createContext } from "preact"
import { useContext, useState } from "preact/hooks"
import type { Access } from "./api"
import { errorText } from "./format"

export interface Actions {
  readonly access: Access
  /** Shows an action's outcome (or its error) in the status line. */
  readonly report: (message: string, failed?: boolean) => void
}

export const ActionsContext = createContext<Actions>({ access: "read-only", report: () => {} })
export const useActions = () => useContext(ActionsContext)

/** Runs an action, reports its outcome or error, then calls `after` (a refresh). */
export const useRun = () => {
  const actions = useActions()
  const [busy, setBusy] = useState(false)
  const run = async (what: () => Promise<string>, after?: () => void) => {
    setBusy(true)
    try {
      actions.report(await what())
    } catch (e) {
      actions.report(errorText(e), true)
    } finally {
      setBusy(false)
      after?.()
    }
  }
  return { busy, run, canAct: actions.access === "allow" }
}

export const Failure = ({ error }: { error: unknown }) =>
  error === undefined ? null : html`<p class="error" role="alert">Could not load: ${errorText(error)}</p>`

export const Loading = () => html`<p class="empty">Loading…</p>`

export const State = ({ state }: { state: string }) => html`<span class=${`state state-${state}`}>${state}</span>`

/**
 * A button whose first click asks "question — Confirm / Cancel" beside it; Confirm runs `onConfirm`.
 */
export const ConfirmButton = (props: {
  label: string
  question: string
  action: string
  disabled?: boolean
  onConfirm: () => void
}) => {
  const [asking, setAsking] = useState(false)
  if (!asking) {
    return html`<button type="button" data-action=${props.action} disabled=${props.disabled} onClick=${() => setAsking(true)}>${props.label}</button>`
  }
  return html`<span class="confirm" role="group">
    <span>${props.question}</span>
    <button type="button" class="danger" data-action="confirm" onClick=${() => (setAsking(false), props.onConfirm())}>Confirm</button>
    <button type="button" data-action="dismiss" onClick=${() => setAsking(false)}>Cancel</button>
  </span>`
}
