/**
 * Errors of the Threadline SDK.
 *
 * Every call of the client rejects (or, for `streamRun`, throws from the loop) with a
 * `ThreadlineError`. The server sends a gRPC status whose `grpc-status-details-bin` trailer carries
 * a `google.rpc.ErrorInfo` (domain "threadline") for every error it raises on purpose: `reason` is
 * the core's error code in UPPER_SNAKE (`SCHEMA_VERSION_UNSUPPORTED`, `DEFERRED_RESUME_INVALID`,
 * …) and is what a host branches on. Errors without ErrorInfo (a transport failure, a cancelled
 * call, an expired deadline, grpc's own message-size limit) have an empty `reason`; branch on
 * `code` for those.
 *
 * A `ProtocolError` is the kind of `ThreadlineError` the SDK throws itself when the server's answer
 * breaks the contract (a stream without its terminal result, a checkpoint delta that does not
 * rebuild, a response without a required field): `Code.Internal`, no reason, and a message that
 * says what broke. `err instanceof ProtocolError` tells it from a status the server sent.
 *
 * Failures after a run has started are not errors: they arrive as a FAILED `RunResult`.
 *
 * @module
 */

import { Code, ConnectError } from "@connectrpc/connect";

import { BadRequestSchema, ErrorInfoSchema } from "./googleapis/google/rpc/error_details_pb.js";

export { Code };

/** The ErrorInfo domain of every error the Threadline server raises on purpose. */
export const THREADLINE_ERROR_DOMAIN = "threadline";

/** A request field the server found at fault (`google.rpc.BadRequest.FieldViolation`). */
export interface FieldViolation {
  /** The field's path in proto field names, e.g. `spec.previous_state.thread_id`. */
  readonly field: string;
  /** Why the field is at fault. */
  readonly description: string;
}

/**
 * An error from a Threadline server (or from reaching it).
 *
 * Note that `message` includes the server's message, which may quote data from the request.
 */
export class ThreadlineError extends Error {
  override name = "ThreadlineError";
  /** The gRPC status code (`Code.FailedPrecondition`, …); `Code.Unknown` for non-RPC errors. */
  readonly code: Code;
  /** The ErrorInfo reason (`SCHEMA_VERSION_UNSUPPORTED`, …); empty when the status carried none. */
  readonly reason: string;
  /** The ErrorInfo domain: "threadline" for the server's own errors; empty when there is none. */
  readonly domain: string;
  /**
   * The ErrorInfo metadata, e.g. `{received: "2", supported: "1"}` for an unsupported schema
   * version. Empty when the status carried none.
   */
  readonly metadata: Readonly<Record<string, string>>;
  /** Request fields at fault (`google.rpc.BadRequest`), in the server's order; often empty. */
  readonly fieldViolations: readonly FieldViolation[];
  /** The server's message without the code prefix. */
  readonly rawMessage: string;
  /** The `ConnectError` this error was made from. */
  override readonly cause: ConnectError;

  /** Use `ThreadlineError.from`; subclasses pass the `ConnectError` they stand for. */
  protected constructor(cause: ConnectError) {
    const info = cause.findDetails(ErrorInfoSchema)[0];
    const reason = info?.reason ?? "";
    super(`[${codeName(cause.code)}${reason ? ` ${reason}` : ""}] ${cause.rawMessage}`);
    this.cause = cause;
    this.code = cause.code;
    this.reason = reason;
    this.domain = info?.domain ?? "";
    this.metadata = Object.freeze({ ...(info?.metadata ?? {}) });
    this.fieldViolations = Object.freeze(
      cause
        .findDetails(BadRequestSchema)
        .flatMap((detail) => detail.fieldViolations)
        .map((violation) => Object.freeze({ field: violation.field, description: violation.description })),
    );
    this.rawMessage = cause.rawMessage;
  }

  /**
   * Turn anything a call threw into a `ThreadlineError`.
   *
   * A `ThreadlineError` is returned as it is; a `ConnectError` keeps its code and details; an
   * `AbortError` becomes `Code.Canceled`; anything else becomes `Code.Unknown` with no reason.
   */
  static from(reason: unknown): ThreadlineError {
    if (reason instanceof ThreadlineError) {
      return reason;
    }
    return new ThreadlineError(ConnectError.from(reason));
  }
}

/**
 * The ErrorInfo reason of any error, or "" when it has none (like `connect.CodeOf` in Go).
 *
 * @example
 * if (reasonOf(err) === "SCHEMA_VERSION_UNSUPPORTED") { migrateOrAsk(); }
 */
export function reasonOf(err: unknown): string {
  return ThreadlineError.from(err).reason;
}

/** The gRPC name of a code in lower snake case, as grpc spells it: `failed_precondition`. */
export function codeName(code: Code): string {
  const name = Code[code] as string | undefined;
  if (name === undefined) {
    return String(code);
  }
  return name.replace(/[A-Z]/g, (letter, index: number) => (index === 0 ? "" : "_") + letter.toLowerCase());
}

/**
 * The server's answer broke the contract, and the SDK found it: the server sent no such status.
 *
 * Always `Code.Internal` (as Connect reports protocol violations) with an empty `reason`, no
 * details, and a `rawMessage` saying what broke, e.g. "the stream ended without its terminal
 * result". A conforming server never causes one, so retrying will not help: it points to a bug in
 * the server or in something between the two.
 *
 * @example
 * try { await client.run(spec); } catch (err) {
 *   if (err instanceof ProtocolError) report(err.rawMessage); // else: a status the server sent
 * }
 */
export class ProtocolError extends ThreadlineError {
  override name = "ProtocolError";

  /** @param message - What broke. */
  constructor(message: string) {
    super(new ConnectError(message, Code.Internal));
  }
}
