/**
 * The error the `sqlane` command reports as one line: a usage or connection problem.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * A usage or connection problem the CLI reports as one line.
 *
 * @since 0.1.0
 * @category errors
 */
export class CliError extends Schema.TaggedError<CliError>("sqlane/CliError")("CliError", {
  message: Schema.String
}) {}
