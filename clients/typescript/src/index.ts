/**
 * `@threadline/client`: the TypeScript host SDK of Threadline.
 *
 * - `createThreadlineClient` — the client (`streamRun`, `run`, state operations, server info).
 * - `approve`, `deny`, `callResult`, … and `resumeWith` — answers to a suspended run.
 * - `encodeState` / `decodeState` — store an envelope as protobuf bytes or proto3 JSON.
 * - `ThreadlineError` — every failure, with the server's `reason` and `metadata`; `ProtocolError` —
 *   the kind the SDK throws itself when the server's answer breaks the contract.
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
export { decodeMessage, decodeState, encodeMessage, encodeState } from "./codec.js";
export type { Format } from "./codec.js";
export {
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
export { Code, ProtocolError, THREADLINE_ERROR_DOMAIN, ThreadlineError, codeName, reasonOf } from "./errors.js";
export type { FieldViolation } from "./errors.js";

export * from "./gen/threadline/v1/deferred_pb.js";
export * from "./gen/threadline/v1/events_pb.js";
export * from "./gen/threadline/v1/harness_service_pb.js";
export * from "./gen/threadline/v1/run_pb.js";
export * from "./gen/threadline/v1/state_pb.js";
