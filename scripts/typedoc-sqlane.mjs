// TypeDoc plugin for sqlane's site: names the modules as an app imports them (`sqlane`,
// `sqlane/testing`), and lists the exports whose docstring has no `@example`.
import { Converter, ReflectionKind } from "typedoc"

/** @param {import("typedoc").Application} app */
export const load = (app) => {
  app.converter.on(Converter.EVENT_RESOLVE_BEGIN, (context) => {
    for (const module of context.project.getChildrenByKind(ReflectionKind.Module)) {
      module.name = module.name === "index" ? "sqlane" : `sqlane/${module.name}`
    }
  })

  app.converter.on(Converter.EVENT_RESOLVE_END, (context) => {
    const missing = []
    const visit = (container, path) => {
      for (const child of container.children ?? []) {
        const name = path ? `${path}.${child.name}` : child.name
        if (child.kindOf(ReflectionKind.SomeModule)) visit(child, name)
        else if (!child.isReference() && !hasExample(child)) missing.push(name)
      }
    }
    visit(context.project, "")
    if (missing.length === 0) return
    const message = `${missing.length} export(s) without an @example: ${missing.join(", ")}`
    if (process.env.SQLANE_DOCS_STRICT) app.logger.error(message)
    else app.logger.info(message)
  })
}

const comments = (reflection) => [
  reflection.comment,
  ...(reflection.signatures ?? []).map((s) => s.comment),
  reflection.getSignature?.comment
].filter(Boolean)

const hasExample = (reflection) => comments(reflection).some((c) => c.getTag("@example") !== undefined)
