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
 * `ThreadService`'s reasons (THREADS.md §3) each have a subclass that carries its metadata as typed
 * properties, so `instanceof ThreadlineError` still catches everything:
 *
 * ```
 * ThreadlineError
 *  ├── ProtocolError       the server's answer broke the contract (Code.Internal, no reason)
 *  ├── ThreadNotFound      NOT_FOUND
 *  ├── CheckpointNotFound  NOT_FOUND
 *  ├── RunNotFound         NOT_FOUND
 *  ├── ThreadExists        ALREADY_EXISTS
 *  ├── RequestIdReused     INVALID_ARGUMENT     .runId .revision .status .differs
 *  ├── ThreadNotSuspended  FAILED_PRECONDITION  .answeredBy
 *  ├── RequestInterrupted  FAILED_PRECONDITION  .runId .revision .attempts
 *  ├── ThreadBusy          ABORTED              .runId .requestId .leaseExpiresAt .queueLength .isOwn()
 *  ├── ThreadQueueFull     RESOURCE_EXHAUSTED   .threadId .limit .queueLength
 *  ├── RevisionConflict    ABORTED              .currentRevision
 *  ├── LeaseLost           ABORTED
 *  ├── StoreUnavailable    UNAVAILABLE
 *  ├── ListenerTooSlow     RESOURCE_EXHAUSTED   .threadId .runId .requestId .backlog
 *  ├── RunAttemptLost      ABORTED              .runId .requestId .lastSequence .requestStatus .nextRunId
 *  ├── RunEventsExpired    FAILED_PRECONDITION  .runId .requestId .requestStatus .revision .why
 *  └── FollowerLimitReached RESOURCE_EXHAUSTED  .limit   (a server reason, for the live runs' calls)
 * ```
 *
 * Failures after a run has started are not errors: they arrive as a FAILED `RunResult`.
 *
 * @module
 */

import { Code, ConnectError } from "@connectrpc/connect";

import { ThreadRunStatus } from "./gen/threadline/v1/thread_pb.js";
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
   * A status whose ErrorInfo (domain "threadline") names one of `ThreadService`'s reasons becomes
   * that reason's subclass (`ThreadBusy`, `RevisionConflict`, …).
   */
  static from(reason: unknown): ThreadlineError {
    if (reason instanceof ThreadlineError) {
      return reason;
    }
    const cause = ConnectError.from(reason);
    const info = cause.findDetails(ErrorInfoSchema)[0];
    const kind = info?.domain === THREADLINE_ERROR_DOMAIN ? BY_REASON.get(info.reason) : undefined;
    return kind === undefined ? new ThreadlineError(cause) : new kind(cause);
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

// --- ThreadService's reasons (THREADS.md §3) ------------------------------------------------------

/**
 * The base of the classes below: one ErrorInfo reason each (`REASON`), picked by
 * `ThreadlineError.from`.
 */
abstract class ReasonError extends ThreadlineError {
  /** @param cause - The `ConnectError` whose ErrorInfo carries the class's reason. */
  constructor(cause: ConnectError) {
    super(cause);
  }
}

/** A numeric metadata entry; 0n when the server sent none (or not an integer). */
function bigintEntry(metadata: Readonly<Record<string, string>>, key: string): bigint {
  const text = metadata[key] ?? "";
  return /^-?\d+$/.test(text) ? BigInt(text) : 0n;
}

/** A count in the metadata, as a number; 0 when the server sent none (or not a safe integer). */
function numberEntry(metadata: Readonly<Record<string, string>>, key: string): number {
  const value = Number(bigintEntry(metadata, key));
  return Number.isSafeInteger(value) ? value : 0;
}

/** NOT_FOUND: no thread has this ID (`THREAD_NOT_FOUND`). */
export class ThreadNotFound extends ReasonError {
  override name = "ThreadNotFound";
  /** The ErrorInfo reason this class stands for. */
  static readonly REASON = "THREAD_NOT_FOUND";
}

/** NOT_FOUND: the thread has no checkpoint with this revision (`CHECKPOINT_NOT_FOUND`). */
export class CheckpointNotFound extends ReasonError {
  override name = "CheckpointNotFound";
  /** The ErrorInfo reason this class stands for. */
  static readonly REASON = "CHECKPOINT_NOT_FOUND";
}

/** NOT_FOUND: `cancel` named a run this thread never had (`RUN_NOT_FOUND`). */
export class RunNotFound extends ReasonError {
  override name = "RunNotFound";
  /** The ErrorInfo reason this class stands for. */
  static readonly REASON = "RUN_NOT_FOUND";
}

/** ALREADY_EXISTS: `create` or `fork` with a thread ID in use (`THREAD_EXISTS`). */
export class ThreadExists extends ReasonError {
  override name = "ThreadExists";
  /** The ErrorInfo reason this class stands for. */
  static readonly REASON = "THREAD_EXISTS";
}

/**
 * INVALID_ARGUMENT: this thread already used the `requestId` for a different request
 * (`REQUEST_ID_REUSED`). A retry must repeat its request exactly (prompt, answers, expected
 * revision); a new request needs a new ID.
 */
export class RequestIdReused extends ReasonError {
  override name = "RequestIdReused";
  /** The ErrorInfo reason this class stands for. */
  static readonly REASON = "REQUEST_ID_REUSED";
  /** The original request's run (its last attempt); "" when the server sent none. */
  get runId(): string {
    return this.metadata["run_id"] ?? "";
  }
  /** The last checkpoint the original request committed; 0n when it committed none (or not sent). */
  get revision(): bigint {
    return bigintEntry(this.metadata, "revision");
  }
  /**
   * The original request's record's status as the server names it (`completed`, `running`,
   * `queued`, `suspended`, `failed`, `cancelled`, …); "" when not sent.
   */
  get status(): string {
    return this.metadata["status"] ?? "";
  }
  /**
   * The parts in which this request differs from the original, in this order: `prompt`,
   * `answers`, `expected_revision`, `busy_strategy` (e.g. `["prompt"]`). Undefined when the server
   * cannot tell (`unknown`: the original's record was made by an older server, which kept no part
   * digests) or sent none (an older server).
   */
  get differs(): string[] | undefined {
    const text = this.metadata["differs"] ?? "";
    return text === "" || text === "unknown" ? undefined : text.split(",");
  }
}

/**
 * The request that last consumed a thread's pending batch (`ThreadNotSuspended.answeredBy`): the
 * batch a refused `answers` was probably meant for.
 */
export interface AnsweredBy {
  /** The request that consumed the batch. */
  readonly requestId: string;
  /** The `SUSPENDED` checkpoint whose batch it consumed. */
  readonly revision: bigint;
  /**
   * How: `answers` (it answered the batch) or `prompt` (a prompt without answers continued the
   * thread, and the pending calls were settled without an answer: see
   * `UNANSWERED_APPROVAL_MESSAGE`).
   */
  readonly how: "answers" | "prompt";
  /** The last checkpoint that request committed; 0n when it committed none. */
  readonly runRevision: bigint;
  /**
   * Whether the refused answers name exactly that batch's call IDs: `true` for a retry under a new
   * request ID whose first try was answered (its answers already reached the thread, or were
   * overtaken by that request).
   */
  readonly matches: boolean;
}

/**
 * FAILED_PRECONDITION: `answers` for a thread that is not SUSPENDED (`THREAD_NOT_SUSPENDED`), also
 * with `busyStrategy: "enqueue"` or `"interrupt"` (answers are never queued), or with `"rollback"`
 * when the turn it would throw away began from no pending batch. `answeredBy` names who consumed
 * the batch these answers were probably for.
 */
export class ThreadNotSuspended extends ReasonError {
  override name = "ThreadNotSuspended";
  /** The ErrorInfo reason this class stands for. */
  static readonly REASON = "THREAD_NOT_SUSPENDED";
  /**
   * The request that last consumed a pending batch of the thread, and how; undefined when none did
   * (since a rollback restored one), when the server did not say (an older server, and the
   * `busyStrategy: "rollback"` refusals, which carry `began_at` instead), or when it names neither
   * `answers` nor `prompt`.
   */
  get answeredBy(): AnsweredBy | undefined {
    const requestId = this.metadata["request_id"] ?? "";
    const how = this.metadata["answered"] ?? "";
    if (requestId === "" || (how !== "answers" && how !== "prompt")) {
      return undefined;
    }
    return Object.freeze({
      requestId,
      revision: bigintEntry(this.metadata, "revision"),
      how,
      runRevision: bigintEntry(this.metadata, "run_revision"),
      matches: this.metadata["matches"] === "true",
    });
  }
}

/**
 * FAILED_PRECONDITION: a retry of a request whose run was closed INTERRUPTED
 * (`REQUEST_INTERRUPTED`): its holder was gone and another request took the thread, or, for a
 * background run (`startRun`), its attempts kept losing their server (`attempts` of them, the
 * server's `--max-run-attempts`). This request never finishes; `revision` tells the host whether
 * its input reached the thread.
 */
export class RequestInterrupted extends ReasonError {
  override name = "RequestInterrupted";
  /** The ErrorInfo reason this class stands for. */
  static readonly REASON = "REQUEST_INTERRUPTED";
  /** The interrupted run (its last attempt); "" when the server sent none. */
  get runId(): string {
    return this.metadata["run_id"] ?? "";
  }
  /** The last checkpoint the interrupted run committed; 0n when it committed none. */
  get revision(): bigint {
    return bigintEntry(this.metadata, "revision");
  }
  /**
   * How many attempts of a background request ended by a lost server when the attempt cap closed
   * it; 0 when the server sent none (a request superseded by another).
   */
  get attempts(): number {
    return numberEntry(this.metadata, "attempts");
  }
}

/**
 * ABORTED: a run holds the thread's lease, or requests wait in its queue (`THREAD_BUSY`). When
 * `requestId` is the request just sent (`isOwn(id)`), that request's own run is still going (e.g. a
 * retry after a dropped connection): retry later with the same ID to get its outcome. To wait for the thread
 * instead of failing, send the request with `busyStrategy: "enqueue"`; to stop the running turn and
 * run next, `"interrupt"` (or `"rollback"`, which also discards that turn).
 */
export class ThreadBusy extends ReasonError {
  override name = "ThreadBusy";
  /** The ErrorInfo reason this class stands for. */
  static readonly REASON = "THREAD_BUSY";
  /** The run holding the thread (`threads.cancel` takes it); when only the queue holds it, the queue's head's run ID. */
  get runId(): string {
    return this.metadata["run_id"] ?? "";
  }
  /** The request that run serves (or the queue's head's, when only the queue holds the thread). */
  get requestId(): string {
    return this.metadata["request_id"] ?? "";
  }
  /**
   * When the holder's lease expires unless renewed, by the store's clock; undefined if not sent, and
   * when only the queue holds the thread (no lease).
   */
  get leaseExpiresAt(): Date | undefined {
    const text = this.metadata["lease_expires_at"] ?? "";
    const time = text === "" ? Number.NaN : Date.parse(text);
    return Number.isNaN(time) ? undefined : new Date(time);
  }
  /** How many requests wait in the thread's queue (`Thread.queue`); 0 when none (or not sent). */
  get queueLength(): number {
    return numberEntry(this.metadata, "queue_length");
  }
  /**
   * Whether the request this error names (the lease holder's, or the queue's head's when only the
   * queue holds the thread) is `requestId`: true when the thread is busy with that request itself
   * (e.g. one the host started with `startRun`, or a retry of its own request), so its outcome is
   * worth waiting for (`joinRun`, or the same request again later); false for another request, and
   * for an empty `requestId`.
   */
  isOwn(requestId: string): boolean {
    return requestId !== "" && this.requestId === requestId;
  }
}

/**
 * RESOURCE_EXHAUSTED: a `busyStrategy: "enqueue"` (or `"interrupt"`, `"rollback"`) request found the thread's
 * queue full (`THREAD_QUEUE_FULL`): `limit` requests (the server's `--max-queued-runs`,
 * `ThreadStoreInfo.maxQueuedRuns`) wait already. Nothing was written: send it again once the
 * queue has room (a `watchThread` change `QUEUE` says when), with the same request ID.
 */
export class ThreadQueueFull extends ReasonError {
  override name = "ThreadQueueFull";
  /** The ErrorInfo reason this class stands for. */
  static readonly REASON = "THREAD_QUEUE_FULL";
  /** The thread whose queue is full; "" when the server sent none. */
  get threadId(): string {
    return this.metadata["thread_id"] ?? "";
  }
  /** How many requests may wait in one thread's queue (`--max-queued-runs`); 0 when not sent. */
  get limit(): number {
    return numberEntry(this.metadata, "limit");
  }
  /** How many requests waited in it when the server refused this one; 0 when not sent. */
  get queueLength(): number {
    return numberEntry(this.metadata, "queue_length");
  }
}

/** ABORTED: `expectedRevision` is not the thread's head (`REVISION_CONFLICT`). */
export class RevisionConflict extends ReasonError {
  override name = "RevisionConflict";
  /** The ErrorInfo reason this class stands for. */
  static readonly REASON = "REVISION_CONFLICT";
  /** The head's revision when the server checked; 0n when the server sent none. */
  get currentRevision(): bigint {
    return bigintEntry(this.metadata, "current_revision");
  }
}

/**
 * ABORTED: the server lost the thread's lease before or during the run (`LEASE_LOST`). The call
 * ended with no result; nothing after the run's last commit reached the thread, and the next run
 * recovers it.
 */
export class LeaseLost extends ReasonError {
  override name = "LeaseLost";
  /** The ErrorInfo reason this class stands for. */
  static readonly REASON = "LEASE_LOST";
}

/** UNAVAILABLE: the thread store cannot be reached or written (`STORE_UNAVAILABLE`). */
export class StoreUnavailable extends ReasonError {
  override name = "StoreUnavailable";
  /** The ErrorInfo reason this class stands for. */
  static readonly REASON = "STORE_UNAVAILABLE";
}

/**
 * RESOURCE_EXHAUSTED: a stream fell more than `backlog` events behind its run and was dropped
 * (`LISTENER_TOO_SLOW`). The events before it arrived in order, and the run goes on and commits:
 * send the same request again (`requestId`) for its outcome once the run ended, which the server
 * replays.
 */
export class ListenerTooSlow extends ReasonError {
  override name = "ListenerTooSlow";
  /** The ErrorInfo reason this class stands for. */
  static readonly REASON = "LISTENER_TOO_SLOW";
  /** The thread of the run; "" when the server sent none. */
  get threadId(): string {
    return this.metadata["thread_id"] ?? "";
  }
  /** The run that goes on (`threads.cancel` takes it). */
  get runId(): string {
    return this.metadata["run_id"] ?? "";
  }
  /** The request that run serves: send it again for the outcome. */
  get requestId(): string {
    return this.metadata["request_id"] ?? "";
  }
  /** How many events the server keeps for a caller that has not taken them; 0 when not sent. */
  get backlog(): number {
    return numberEntry(this.metadata, "backlog");
  }
}

/**
 * A run status in the metadata, named as the enum names it (`THREAD_RUN_STATUS_RUNNING`, or
 * without the prefix); UNSPECIFIED when the server sent none (or an unknown one).
 */
function runStatusEntry(metadata: Readonly<Record<string, string>>, key: string): ThreadRunStatus {
  const name = (metadata[key] ?? "").toUpperCase().replace(/^THREAD_RUN_STATUS_/, "");
  const value = (ThreadRunStatus as unknown as Record<string, unknown>)[name];
  return typeof value === "number" ? (value as ThreadRunStatus) : ThreadRunStatus.UNSPECIFIED;
}

/**
 * ABORTED: the attempt a join (or an attached retry) followed was lost (`RUN_ATTEMPT_LOST`): its
 * server crashed, was stopped past its lease, or a later request superseded it, after the events
 * it had written, which the stream delivered. Final for that attempt: `threads.stream` sends its
 * request again and `joinRun` by `requestId` follows the next attempt, unless `reconnect: false`.
 */
export class RunAttemptLost extends ReasonError {
  override name = "RunAttemptLost";
  /** The ErrorInfo reason this class stands for. */
  static readonly REASON = "RUN_ATTEMPT_LOST";
  /** The lost attempt; "" when the server sent none. */
  get runId(): string {
    return this.metadata["run_id"] ?? "";
  }
  /** The request it served. */
  get requestId(): string {
    return this.metadata["request_id"] ?? "";
  }
  /** The sequence of the attempt's last written event; 0n when not sent. */
  get lastSequence(): bigint {
    return bigintEntry(this.metadata, "last_sequence");
  }
  /** The request's status now (RUNNING when a next attempt runs it); UNSPECIFIED when not sent. */
  get requestStatus(): ThreadRunStatus {
    return runStatusEntry(this.metadata, "request_status");
  }
  /** The request's next attempt, once one runs; "" until then. */
  get nextRunId(): string {
    return this.metadata["next_run_id"] ?? "";
  }
}

/**
 * FAILED_PRECONDITION: the attempt's event log is past its retention, or was never recorded (its
 * server had the log off) (`RUN_EVENTS_EXPIRED`). The result stays readable: a retry of
 * `requestId` replays it, and `threads.checkpoint(threadId, revision)` has its state.
 */
export class RunEventsExpired extends ReasonError {
  override name = "RunEventsExpired";
  /** The ErrorInfo reason this class stands for. */
  static readonly REASON = "RUN_EVENTS_EXPIRED";
  /** The attempt joined; "" when the server sent none. */
  get runId(): string {
    return this.metadata["run_id"] ?? "";
  }
  /** The request it served. */
  get requestId(): string {
    return this.metadata["request_id"] ?? "";
  }
  /** The request's status; UNSPECIFIED when not sent. */
  get requestStatus(): ThreadRunStatus {
    return runStatusEntry(this.metadata, "request_status");
  }
  /** The last checkpoint the request committed; 0n when none. */
  get revision(): bigint {
    return bigintEntry(this.metadata, "revision");
  }
  /** `retention` (the log expired) or `not_recorded` (it was never kept); "" when not sent. */
  get why(): string {
    return this.metadata["why"] ?? "";
  }
}

/**
 * RESOURCE_EXHAUSTED: the replica already serves its `--max-followers` joins, attached retries and
 * watches (`FOLLOWER_LIMIT_REACHED`, a server reason). Nothing was started: try again later or on
 * another replica.
 */
export class FollowerLimitReached extends ReasonError {
  override name = "FollowerLimitReached";
  /** The ErrorInfo reason this class stands for. */
  static readonly REASON = "FOLLOWER_LIMIT_REACHED";
  /** The replica's `--max-followers`; 0 when not sent. */
  get limit(): number {
    return numberEntry(this.metadata, "limit");
  }
}

/** The class of each of `ThreadService`'s reasons, for `ThreadlineError.from`. */
const BY_REASON: ReadonlyMap<string, new (cause: ConnectError) => ThreadlineError> = new Map(
  [
    ThreadNotFound,
    CheckpointNotFound,
    RunNotFound,
    ThreadExists,
    RequestIdReused,
    ThreadNotSuspended,
    RequestInterrupted,
    ThreadBusy,
    ThreadQueueFull,
    RevisionConflict,
    LeaseLost,
    StoreUnavailable,
    ListenerTooSlow,
    RunAttemptLost,
    RunEventsExpired,
    FollowerLimitReached,
  ].map((kind) => [kind.REASON, kind] as const),
);
