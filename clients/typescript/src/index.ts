/**
 * `@threadline/client`: the TypeScript host SDK of Threadline.
 *
 * - `createThreadlineClient` — the client (`streamRun`, `run`, state operations, server info).
 * - `client.threads` (`Threads`) — durable threads the server keeps (`ThreadService`), by ID;
 *   `threads.startRun` gives a `StartedRun`, a run the server drives in the background.
 * - `approve`, `deny`, `callResult`, … and `resumeWith` — answers to a suspended run; `answers` —
 *   the same answers for a thread the server keeps; `UNANSWERED_APPROVAL_MESSAGE`,
 *   `NOT_EXECUTED_TOOL_RESULT` — the server's fixed texts for calls it settled without running.
 * - `client.runChild` / `streamChild`, `pendingChildren`, `childAnswer` — Host-managed children:
 *   run a suspended parent's child request as a thread of its own and answer the parent with it.
 * - `encodeState` / `decodeState` — store an envelope as protobuf bytes or proto3 JSON.
 * - `ThreadlineError` — every failure, with the server's `reason` and `metadata`; `ProtocolError` —
 *   the kind the SDK throws itself when the server's answer breaks the contract; `ThreadBusy`,
 *   `RevisionConflict`, … — one kind per `ThreadService` reason, with its metadata typed.
 * - The contract's generated messages and enums (`threadline.v1`), re-exported as they are.
 *
 * @module
 */

export {
  DEFAULT_MAX_EVENTS_PER_MESSAGE,
  DEFAULT_RUN_TIMEOUT_MS,
  DEFAULT_TIMEOUT_MS,
  collectRun,
  createThreadlineClient,
} from "./client.js";
export type {
  CallOptions,
  ForkStateOptions,
  NewStateInput,
  RunInput,
  StateSource,
  ThreadlineClient,
  ThreadlineClientOptions,
  ValidatedState,
} from "./client.js";
export { childAnswer, childRunning, pendingChildren } from "./children.js";
export type { ChildRunInput, PendingChild } from "./children.js";
export { decodeMessage, decodeState, encodeMessage, encodeState } from "./codec.js";
export type { Format } from "./codec.js";
export { RECONNECT_RETRIES, RUN_RETRIES, StartedRun, ThreadRunStream, Threads, newRequestId } from "./threads.js";
export type {
  BusyStrategyName,
  ClientToolInput,
  CreateThreadOptions,
  ExpectedRevisionOptions,
  ForkThreadOptions,
  GetThreadOptions,
  JoinRunOptions,
  ListCheckpointsOptions,
  ListThreadsOptions,
  ListThreadsPageOptions,
  Revision,
  StartRunInput,
  StartedRunEventsOptions,
  StartedRunInit,
  ThreadRunInput,
  ThreadRunOutcome,
  ThreadUpdate,
  WatchThreadOptions,
} from "./threads.js";
export {
  NOT_EXECUTED_TOOL_RESULT,
  UNANSWERED_APPROVAL_MESSAGE,
  answers,
  approve,
  callFailed,
  callResult,
  callRetry,
  deny,
  externalResult,
  pendingCalls,
  resumeWith,
} from "./deferred.js";
export type { Answer, AnswerOptions, ApproveOptions, CallRef, PendingCall } from "./deferred.js";
export {
  CheckpointNotFound,
  Code,
  FollowerLimitReached,
  LeaseLost,
  ListenerTooSlow,
  ProtocolError,
  RequestIdReused,
  RequestInterrupted,
  RevisionConflict,
  RunAttemptLost,
  RunEventsExpired,
  RunNotFound,
  StoreUnavailable,
  THREADLINE_ERROR_DOMAIN,
  ThreadBusy,
  ThreadExists,
  ThreadNotFound,
  ThreadNotSuspended,
  ThreadQueueFull,
  ThreadlineError,
  codeName,
  reasonOf,
} from "./errors.js";
export type { AnsweredBy, FieldViolation } from "./errors.js";

export * from "./gen/threadline/v1/deferred_pb.js";
export * from "./gen/threadline/v1/events_pb.js";
export * from "./gen/threadline/v1/harness_service_pb.js";
export * from "./gen/threadline/v1/run_pb.js";
export * from "./gen/threadline/v1/state_pb.js";
export * from "./gen/threadline/v1/thread_pb.js";
export * from "./gen/threadline/v1/thread_service_pb.js";
