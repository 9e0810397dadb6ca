// Offline tests of the SDK's own code: the state codec, the resume helpers, `ThreadlineError` and
// `ProtocolError`, the checkpoint rebuilder, and the client's options.
// Everything that needs a server is in scenarios.test.ts.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

import { CandidateHistories } from "../src/checkpoints.js";
import * as deferredPb from "../src/gen/threadline/v1/deferred_pb.js";
import * as eventsPb from "../src/gen/threadline/v1/events_pb.js";
import * as servicePb from "../src/gen/threadline/v1/harness_service_pb.js";
import * as runPb from "../src/gen/threadline/v1/run_pb.js";
import * as statePb from "../src/gen/threadline/v1/state_pb.js";
import * as threadPb from "../src/gen/threadline/v1/thread_pb.js";
import * as threadServicePb from "../src/gen/threadline/v1/thread_service_pb.js";
import { BadRequestSchema, ErrorInfoSchema } from "../src/googleapis/google/rpc/error_details_pb.js";
import * as sdk from "../src/index.js";
import {
  DeferredKind,
  DeferredToolRequestsSchema,
  HarnessStateSchema,
  ProtocolError,
  ThreadlineError,
  approve,
  callFailed,
  callResult,
  createThreadlineClient,
  decodeMessage,
  decodeState,
  deny,
  encodeMessage,
  encodeState,
  pendingCalls,
  reasonOf,
  resumeWith,
} from "../src/index.js";
import { isProtocolError } from "./checks.js";

const state = create(HarnessStateSchema, {
  schemaVersion: "1",
  threadId: "thr_sdktest1",
  messageHistory: {
    format: "pydantic-ai.model-messages+json",
    formatVersion: "1",
    data: "[]",
    messageCount: 0n,
    sha256: new Uint8Array(32).fill(7),
  },
  capabilityStates: [{ capabilityId: "demo.counter", version: "1", dataJson: '{"value":2}' }],
  refs: [{ key: "k", digest: "0".repeat(64), size: 12n }],
  extraJson: '{"later":true}',
});

test("encodeState and decodeState round-trip the binary form", () => {
  const bytes = encodeState(state);
  const decoded = decodeState(bytes);
  assert.deepEqual(decoded, state);
  assert.deepEqual(encodeState(decoded), bytes);
});

test("the JSON form uses proto field names and round-trips", () => {
  const json = encodeState(state, "json");
  const parsed = JSON.parse(json) as Record<string, unknown>;
  assert.equal(parsed["thread_id"], "thr_sdktest1");
  assert.equal((parsed["message_history"] as Record<string, unknown>)["message_count"], undefined);
  assert.equal((parsed["message_history"] as Record<string, unknown>)["format_version"], "1");
  assert.deepEqual(decodeState(json), state);
});

test("unknown binary fields survive a decode and re-encode", () => {
  // Field 99 (a string) is unknown to this contract version: a newer server may add it.
  const extra = new Uint8Array([0x9a, 0x06, 0x03, 0x61, 0x62, 0x63]);
  const bytes = new Uint8Array([...encodeState(state), ...extra]);
  assert.deepEqual(encodeState(decodeState(bytes)), bytes);
});

test("unknown JSON fields are rejected rather than dropped", () => {
  assert.throws(() => decodeState('{"schema_version":"1","from_the_future":1}'));
});

test("encodeMessage and decodeMessage work for any contract message", () => {
  const batch = create(DeferredToolRequestsSchema, {
    approvals: [{ toolCallId: "c1", toolName: "delete_file", argsJson: '{"path":"a"}', kind: DeferredKind.APPROVAL }],
  });
  assert.deepEqual(decodeMessage(DeferredToolRequestsSchema, encodeMessage(DeferredToolRequestsSchema, batch)), batch);
  const json = encodeMessage(DeferredToolRequestsSchema, batch, "json");
  assert.match(json, /"tool_call_id":"c1"/);
  assert.match(json, /"kind":"DEFERRED_KIND_APPROVAL"/);
  assert.deepEqual(decodeMessage(DeferredToolRequestsSchema, json), batch);
});

test("resume helpers build each answer and resumeWith sorts them by category", () => {
  const batch = create(DeferredToolRequestsSchema, {
    approvals: [
      { toolCallId: "a1", toolName: "delete_file", argsJson: '{"path":"x"}', kind: DeferredKind.APPROVAL },
      { toolCallId: "a2", toolName: "delete_file", argsJson: "", kind: DeferredKind.APPROVAL },
    ],
    calls: [{ toolCallId: "c1", toolName: "local_time", argsJson: "{}", kind: DeferredKind.EXTERNAL }],
  });
  const [a1, a2] = batch.approvals;
  const [c1] = batch.calls;
  assert.ok(a1 && a2 && c1);
  const answers = [
    callResult(c1, { time: "12:00" }, { answeredBy: "host" }),
    approve(a1, { overrideArgs: { path: "y" } }),
    deny("a2", "not today"),
  ];
  const resume = resumeWith(batch, answers);
  assert.equal(resume.requests, batch);
  assert.equal(resume.recovery, false);
  assert.deepEqual(
    resume.results?.approvals.map((a) => [a.toolCallId, a.decision.case]),
    [
      ["a1", "approved"],
      ["a2", "denied"],
    ],
  );
  const approved = resume.results?.approvals[0]?.decision;
  assert.equal(approved?.case === "approved" && approved.value.overrideArgsJson, '{"path":"y"}');
  const denied = resume.results?.approvals[1]?.decision;
  assert.equal(denied?.case === "denied" && denied.value.message, "not today");
  const call = resume.results?.calls[0];
  assert.equal(call?.result.case === "valueJson" && call.result.value, '{"time":"12:00"}');
  assert.equal(call?.answeredBy, "host");
  assert.equal(callResult("x", undefined).result.value, "null");
  assert.equal(callFailed("x", "boom").result.case, "failed");
  assert.equal(approve("x").decision.value?.$typeName, "threadline.v1.ToolApproved");
  assert.equal(resumeWith(batch, [], { recovery: true }).recovery, true);
  assert.deepEqual(
    pendingCalls(batch).map((p) => [p.call.toolCallId, p.args]),
    [
      ["a1", { path: "x" }],
      ["a2", {}],
      ["c1", {}],
    ],
  );
});

test("ThreadlineError takes reason, domain, metadata and field violations from the details", () => {
  const cause = new ConnectError("schema_version '9' is not supported", Code.FailedPrecondition, undefined, [
    {
      desc: ErrorInfoSchema,
      value: { reason: "SCHEMA_VERSION_UNSUPPORTED", domain: "threadline", metadata: { received: "9", supported: "1" } },
    },
    {
      desc: BadRequestSchema,
      value: { fieldViolations: [{ field: "spec.previous_state.schema_version", description: "unsupported" }] },
    },
  ]);
  const err = ThreadlineError.from(cause);
  assert.ok(err instanceof Error);
  assert.equal(err.name, "ThreadlineError");
  assert.equal(err.code, Code.FailedPrecondition);
  assert.equal(err.reason, "SCHEMA_VERSION_UNSUPPORTED");
  assert.equal(err.domain, "threadline");
  assert.deepEqual(err.metadata, { received: "9", supported: "1" });
  assert.deepEqual(err.fieldViolations, [{ field: "spec.previous_state.schema_version", description: "unsupported" }]);
  assert.equal(err.rawMessage, "schema_version '9' is not supported");
  assert.equal(err.message, "[failed_precondition SCHEMA_VERSION_UNSUPPORTED] schema_version '9' is not supported");
  assert.equal(err.cause, cause);
  assert.equal(ThreadlineError.from(err), err);
  assert.equal(reasonOf(cause), "SCHEMA_VERSION_UNSUPPORTED");
});

test("ThreadlineError reads details that arrive as raw bytes from the wire", () => {
  const info = create(ErrorInfoSchema, { reason: "AGENT_UNKNOWN", domain: "threadline", metadata: { agent: "x" } });
  const cause = new ConnectError("unknown agent", Code.InvalidArgument);
  // This is how the gRPC transport stores the details it parsed from `grpc-status-details-bin`.
  cause.details.push({ type: "google.rpc.ErrorInfo", value: toBinary(ErrorInfoSchema, info) });
  const err = ThreadlineError.from(cause);
  assert.equal(err.reason, "AGENT_UNKNOWN");
  assert.deepEqual(err.metadata, { agent: "x" });
});

test("ThreadlineError.from turns anything else into Unknown or Canceled without a reason", () => {
  const plain = ThreadlineError.from(new Error("boom"));
  assert.equal(plain.code, Code.Unknown);
  assert.equal(plain.reason, "");
  assert.deepEqual(plain.metadata, {});
  assert.deepEqual(plain.fieldViolations, []);
  assert.equal(ThreadlineError.from("text").code, Code.Unknown);
  const aborted = new AbortController();
  aborted.abort();
  assert.equal(ThreadlineError.from(aborted.signal.reason).code, Code.Canceled);
  assert.equal(reasonOf(undefined), "");
});

/** A status with an ErrorInfo of `reason` (domain "threadline" unless given) and `metadata`. */
function statusWith(reason: string, metadata: Record<string, string> = {}, domain = "threadline"): ConnectError {
  return new ConnectError(`a ${reason}`, Code.Aborted, undefined, [{ desc: ErrorInfoSchema, value: { reason, domain, metadata } }]);
}

test("each of ThreadService's reasons is its own ThreadlineError", () => {
  const classes = [
    sdk.ThreadNotFound,
    sdk.CheckpointNotFound,
    sdk.RunNotFound,
    sdk.ThreadExists,
    sdk.RequestIdReused,
    sdk.ThreadNotSuspended,
    sdk.RequestInterrupted,
    sdk.ThreadBusy,
    sdk.ThreadQueueFull,
    sdk.RevisionConflict,
    sdk.LeaseLost,
    sdk.StoreUnavailable,
    sdk.ListenerTooSlow,
    sdk.RunAttemptLost,
    sdk.RunEventsExpired,
    sdk.FollowerLimitReached, // a server reason, typed for the live runs' calls
  ];
  // The reasons of THREADS.md §3's table, exactly.
  assert.deepEqual(
    classes.map((kind) => kind.REASON),
    [
      "THREAD_NOT_FOUND",
      "CHECKPOINT_NOT_FOUND",
      "RUN_NOT_FOUND",
      "THREAD_EXISTS",
      "REQUEST_ID_REUSED",
      "THREAD_NOT_SUSPENDED",
      "REQUEST_INTERRUPTED",
      "THREAD_BUSY",
      "THREAD_QUEUE_FULL",
      "REVISION_CONFLICT",
      "LEASE_LOST",
      "STORE_UNAVAILABLE",
      "LISTENER_TOO_SLOW",
      "RUN_ATTEMPT_LOST",
      "RUN_EVENTS_EXPIRED",
      "FOLLOWER_LIMIT_REACHED",
    ],
  );
  // The server's catalogue's rows marked "(threads)": a reason it adds fails here until it has its class.
  const catalogue = readFileSync(new URL("../../../docs/errors.md", import.meta.url), "utf8");
  assert.deepEqual(
    classes.filter((kind) => kind !== sdk.FollowerLimitReached).map((kind) => kind.REASON),
    [...catalogue.matchAll(/^\| `([A-Z_]+)` \(threads\) \|/gm)].map((row) => row[1]),
  );
  assert.match(catalogue, /^\| `FOLLOWER_LIMIT_REACHED` \(server\) \| RESOURCE_EXHAUSTED \|/m);
  for (const kind of classes) {
    const err = ThreadlineError.from(statusWith(kind.REASON));
    assert.ok(err instanceof kind && err instanceof ThreadlineError && err instanceof Error, kind.REASON);
    assert.equal(err.name, kind.name);
    assert.equal(err.reason, kind.REASON);
    assert.equal(err.message, `[aborted ${kind.REASON}] a ${kind.REASON}`);
    assert.equal(reasonOf(err), kind.REASON);
    for (const other of classes.filter((c) => c !== kind)) assert.ok(!(err instanceof other));
  }
});

test("thread reasons' metadata becomes typed properties", () => {
  const busy = ThreadlineError.from(
    statusWith("THREAD_BUSY", { run_id: "run-1", request_id: "req-1", lease_expires_at: "2026-12-01T10:00:00.250Z" }),
  );
  assert.ok(busy instanceof sdk.ThreadBusy);
  assert.deepEqual([busy.runId, busy.requestId, busy.queueLength], ["run-1", "req-1", 0]);
  assert.equal(busy.leaseExpiresAt?.toISOString(), "2026-12-01T10:00:00.250Z");
  const leased = ThreadlineError.from(
    statusWith("THREAD_BUSY", { run_id: "run-1", request_id: "req-1", lease_expires_at: "2026-12-01T10:00:00Z", queue_length: "3" }),
  );
  assert.ok(leased instanceof sdk.ThreadBusy);
  assert.deepEqual([leased.runId, leased.requestId, leased.queueLength], ["run-1", "req-1", 3]);
  // Only the queue holds the thread: its head's IDs, no lease.
  const queued = ThreadlineError.from(statusWith("THREAD_BUSY", { run_id: "run-5", request_id: "q00", lease_expires_at: "", queue_length: "1" }));
  assert.ok(queued instanceof sdk.ThreadBusy);
  assert.deepEqual([queued.runId, queued.requestId, queued.leaseExpiresAt, queued.queueLength], ["run-5", "q00", undefined, 1]);
  const full = ThreadlineError.from(statusWith("THREAD_QUEUE_FULL", { thread_id: "t-1", limit: "16", queue_length: "16" }));
  assert.ok(full instanceof sdk.ThreadQueueFull);
  assert.deepEqual([full.threadId, full.limit, full.queueLength], ["t-1", 16, 16]);
  const conflict = ThreadlineError.from(statusWith("REVISION_CONFLICT", { current_revision: "12" }));
  assert.ok(conflict instanceof sdk.RevisionConflict);
  assert.equal(conflict.currentRevision, 12n);
  const interrupted = ThreadlineError.from(statusWith("REQUEST_INTERRUPTED", { run_id: "run-2", revision: "0" }));
  assert.ok(interrupted instanceof sdk.RequestInterrupted);
  assert.deepEqual([interrupted.runId, interrupted.revision, interrupted.attempts], ["run-2", 0n, 0]);
  const capped = ThreadlineError.from(statusWith("REQUEST_INTERRUPTED", { run_id: "run-4", revision: "7", attempts: "3" }));
  assert.ok(capped instanceof sdk.RequestInterrupted);
  assert.deepEqual([capped.runId, capped.revision, capped.attempts], ["run-4", 7n, 3]);
  const slow = ThreadlineError.from(
    statusWith("LISTENER_TOO_SLOW", { thread_id: "t-1", run_id: "run-3", request_id: "req-3", backlog: "8192" }),
  );
  assert.ok(slow instanceof sdk.ListenerTooSlow);
  assert.deepEqual([slow.threadId, slow.runId, slow.requestId, slow.backlog], ["t-1", "run-3", "req-3", 8192]);
});

test("live runs' reasons' metadata becomes typed properties", () => {
  const lost = ThreadlineError.from(
    statusWith("RUN_ATTEMPT_LOST", {
      run_id: "run-1",
      request_id: "req-1",
      last_sequence: "41",
      request_status: "THREAD_RUN_STATUS_RUNNING",
      next_run_id: "run-2",
    }),
  );
  assert.ok(lost instanceof sdk.RunAttemptLost);
  assert.deepEqual(
    [lost.runId, lost.requestId, lost.lastSequence, lost.requestStatus, lost.nextRunId],
    ["run-1", "req-1", 41n, sdk.ThreadRunStatus.RUNNING, "run-2"],
  );
  const expired = ThreadlineError.from(
    statusWith("RUN_EVENTS_EXPIRED", { run_id: "run-3", request_id: "req-3", request_status: "completed", revision: "9", why: "retention" }),
  );
  assert.ok(expired instanceof sdk.RunEventsExpired);
  assert.deepEqual(
    [expired.runId, expired.requestId, expired.requestStatus, expired.revision, expired.why],
    ["run-3", "req-3", sdk.ThreadRunStatus.COMPLETED, 9n, "retention"],
  );
  const full = ThreadlineError.from(statusWith("FOLLOWER_LIMIT_REACHED", { limit: "1024" }));
  assert.ok(full instanceof sdk.FollowerLimitReached);
  assert.equal(full.limit, 1024);
  // Missing or malformed metadata reads as empty.
  const bare = ThreadlineError.from(statusWith("RUN_ATTEMPT_LOST", { last_sequence: "x", request_status: "later" }));
  assert.ok(bare instanceof sdk.RunAttemptLost);
  assert.deepEqual([bare.runId, bare.lastSequence, bare.requestStatus, bare.nextRunId], ["", 0n, sdk.ThreadRunStatus.UNSPECIFIED, ""]);
});

test("missing or malformed thread metadata reads as empty", () => {
  const busy = ThreadlineError.from(statusWith("THREAD_BUSY", { lease_expires_at: "soon" }));
  assert.ok(busy instanceof sdk.ThreadBusy);
  assert.deepEqual([busy.runId, busy.requestId, busy.leaseExpiresAt, busy.queueLength], ["", "", undefined, 0]);
  for (const count of ["", "many", "-"]) {
    const busyNow = ThreadlineError.from(statusWith("THREAD_BUSY", { queue_length: count }));
    assert.ok(busyNow instanceof sdk.ThreadBusy);
    assert.equal(busyNow.queueLength, 0, count);
    const full = ThreadlineError.from(statusWith("THREAD_QUEUE_FULL", { limit: count, queue_length: count }));
    assert.ok(full instanceof sdk.ThreadQueueFull);
    assert.deepEqual([full.threadId, full.limit, full.queueLength], ["", 0, 0], count);
  }
  const conflict = ThreadlineError.from(statusWith("REVISION_CONFLICT", { current_revision: "12x" }));
  assert.ok(conflict instanceof sdk.RevisionConflict);
  assert.equal(conflict.currentRevision, 0n);
  const interrupted = ThreadlineError.from(statusWith("REQUEST_INTERRUPTED", { attempts: "three" }));
  assert.ok(interrupted instanceof sdk.RequestInterrupted);
  assert.deepEqual([interrupted.runId, interrupted.revision, interrupted.attempts], ["", 0n, 0]);
  for (const backlog of ["many", "1e3", "99999999999999999999"]) {
    const slow = ThreadlineError.from(statusWith("LISTENER_TOO_SLOW", { backlog }));
    assert.ok(slow instanceof sdk.ListenerTooSlow);
    assert.deepEqual([slow.threadId, slow.runId, slow.requestId, slow.backlog], ["", "", "", 0], backlog);
  }
});

test("ThreadNotSuspended names who consumed the batch (LIVE §5.5)", () => {
  const prompted = ThreadlineError.from(
    statusWith("THREAD_NOT_SUSPENDED", {
      thread_id: "t-1",
      status: "THREAD_STATUS_IDLE",
      request_id: "req-2",
      revision: "3",
      answered: "prompt",
      run_revision: "5",
      matches: "true",
    }),
  );
  assert.ok(prompted instanceof sdk.ThreadNotSuspended);
  const by: sdk.AnsweredBy | undefined = prompted.answeredBy;
  assert.deepEqual(by, { requestId: "req-2", revision: 3n, how: "prompt", runRevision: 5n, matches: true });
  assert.ok(Object.isFrozen(by));
  const answered = ThreadlineError.from(
    statusWith("THREAD_NOT_SUSPENDED", { request_id: "req-1", revision: "1", answered: "answers", run_revision: "0", matches: "false" }),
  );
  assert.ok(answered instanceof sdk.ThreadNotSuspended);
  assert.deepEqual(answered.answeredBy, { requestId: "req-1", revision: 1n, how: "answers", runRevision: 0n, matches: false });
  // Malformed numbers read as 0n; only "true" matches.
  const odd = ThreadlineError.from(
    statusWith("THREAD_NOT_SUSPENDED", { request_id: "req-1", revision: "x", answered: "answers", run_revision: "", matches: "yes" }),
  );
  assert.ok(odd instanceof sdk.ThreadNotSuspended);
  assert.deepEqual(odd.answeredBy, { requestId: "req-1", revision: 0n, how: "answers", runRevision: 0n, matches: false });
  const without: Record<string, string>[] = [
    // Nothing consumed a batch since one was restored.
    { thread_id: "t-1", status: "THREAD_STATUS_IDLE", request_id: "", revision: "0", answered: "", run_revision: "0", matches: "false" },
    // An older server: thread_id and status only.
    { thread_id: "t-1", status: "THREAD_STATUS_IDLE" },
    // A ROLLBACK refusal: began_at instead of the five.
    { thread_id: "t-1", status: "THREAD_STATUS_RUNNING", began_at: "4" },
    // A way of consuming this SDK does not know.
    { request_id: "req-1", revision: "1", answered: "later", run_revision: "2", matches: "true" },
    {},
  ];
  for (const metadata of without) {
    const err = ThreadlineError.from(statusWith("THREAD_NOT_SUSPENDED", metadata));
    assert.ok(err instanceof sdk.ThreadNotSuspended);
    assert.equal(err.answeredBy, undefined, JSON.stringify(metadata));
  }
});

test("RequestIdReused names what the original request did (LIVE §5.5)", () => {
  const reused = ThreadlineError.from(
    statusWith("REQUEST_ID_REUSED", { request_id: "req-1", run_id: "run-1", revision: "4", status: "completed", differs: "prompt" }),
  );
  assert.ok(reused instanceof sdk.RequestIdReused);
  assert.deepEqual([reused.runId, reused.revision, reused.status, reused.differs], ["run-1", 4n, "completed", ["prompt"]]);
  const several = ThreadlineError.from(
    statusWith("REQUEST_ID_REUSED", {
      request_id: "req-2",
      run_id: "run-2",
      revision: "0",
      status: "queued",
      differs: "answers,expected_revision,busy_strategy",
    }),
  );
  assert.ok(several instanceof sdk.RequestIdReused);
  assert.deepEqual(
    [several.runId, several.revision, several.status, several.differs],
    ["run-2", 0n, "queued", ["answers", "expected_revision", "busy_strategy"]],
  );
  // A record an older server made: the parts cannot be told.
  const unknown = ThreadlineError.from(
    statusWith("REQUEST_ID_REUSED", { request_id: "req-3", run_id: "run-3", revision: "2", status: "running", differs: "unknown" }),
  );
  assert.ok(unknown instanceof sdk.RequestIdReused);
  assert.deepEqual([unknown.runId, unknown.revision, unknown.status, unknown.differs], ["run-3", 2n, "running", undefined]);
  // An older server: request_id only.
  const older = ThreadlineError.from(statusWith("REQUEST_ID_REUSED", { request_id: "req-4" }));
  assert.ok(older instanceof sdk.RequestIdReused);
  assert.deepEqual([older.runId, older.revision, older.status, older.differs], ["", 0n, "", undefined]);
});

test("ThreadBusy.isOwn tells whether the request it names is the one given", () => {
  const busy = ThreadlineError.from(statusWith("THREAD_BUSY", { run_id: "run-1", request_id: "req-1", queue_length: "2" }));
  assert.ok(busy instanceof sdk.ThreadBusy);
  assert.deepEqual([busy.isOwn("req-1"), busy.isOwn("req-2"), busy.isOwn(""), busy.queueLength], [true, false, false, 2]);
  // Only the queue holds the thread: its head is the request named.
  const queued = ThreadlineError.from(statusWith("THREAD_BUSY", { run_id: "run-5", request_id: "q00", lease_expires_at: "", queue_length: "1" }));
  assert.ok(queued instanceof sdk.ThreadBusy);
  assert.deepEqual([queued.isOwn("q00"), queued.isOwn("q01")], [true, false]);
  // No request named: nothing is its own, not even "".
  const bare = ThreadlineError.from(statusWith("THREAD_BUSY"));
  assert.ok(bare instanceof sdk.ThreadBusy);
  assert.deepEqual([bare.isOwn(""), bare.isOwn("req-1")], [false, false]);
});

test("the server's fixed texts for calls it settled without running", () => {
  assert.equal(sdk.UNANSWERED_APPROVAL_MESSAGE, "Not approved: the thread continued without an answer.");
  assert.equal(sdk.NOT_EXECUTED_TOOL_RESULT, "The tool call was not executed: its tool is no longer available.");
});

test("other reasons, and thread reasons of another domain, stay plain ThreadlineErrors", () => {
  for (const cause of [
    statusWith("AGENT_UNKNOWN"),
    statusWith("THREAD_BUSY", {}, "example.com"),
    statusWith("THREAD_QUEUE_FULL", {}, "example.com"),
    new ConnectError("x", Code.Aborted),
  ]) {
    const err = ThreadlineError.from(cause);
    assert.equal(Object.getPrototypeOf(err), ThreadlineError.prototype);
    assert.equal(err.name, "ThreadlineError");
  }
});

test("answers sorts each answer into its category, in order", () => {
  const results = sdk.answers(approve("a1"), callResult("c1", 1), deny("a2", "no"), callFailed("c2", "broken"));
  assert.equal(results.$typeName, "threadline.v1.DeferredToolResults");
  assert.deepEqual(
    results.approvals.map((a) => [a.toolCallId, a.decision.case]),
    [
      ["a1", "approved"],
      ["a2", "denied"],
    ],
  );
  assert.deepEqual(
    results.calls.map((c) => [c.toolCallId, c.result.case]),
    [
      ["c1", "valueJson"],
      ["c2", "failed"],
    ],
  );
  assert.deepEqual([sdk.answers().approvals, sdk.answers().calls], [[], []]);
});

test("every thread request gets a fresh request ID unless given, and a prompt is text or parts", async () => {
  const ids = new Set(Array.from({ length: 100 }, () => sdk.newRequestId()));
  assert.equal(ids.size, 100);
  for (const id of ids) assert.match(id, /^req-[0-9a-f]{32}$/);
  const client = createThreadlineClient({ baseUrl: "127.0.0.1:1" });
  try {
    const fresh = [client.threads.stream("thread_x"), client.threads.stream("thread_x")];
    assert.notEqual(fresh[0]!.requestId, fresh[1]!.requestId);
    assert.match(fresh[0]!.requestId, /^req-[0-9a-f]{32}$/);
    assert.equal(client.threads.stream("thread_x", { requestId: "req-mine" }).requestId, "req-mine");
    assert.equal(client.threads.stream("thread_x", { requestId: "" }).requestId.length, 36);
    assert.throws(() => client.threads.stream("thread_x", { text: "a", parts: { parts: [] } }), {
      name: "TypeError",
      message: "give the prompt as text or as parts, not both",
    });
    await assert.rejects(client.threads.run("thread_x", { text: "a", parts: { parts: [] } }), TypeError);
  } finally {
    client.close();
  }
});

test("busyStrategy is sent as the contract's BusyStrategy; unset is UNSPECIFIED; another value is a TypeError", async () => {
  // Every call is answered here, before the network: INVALID_ARGUMENT, which nothing retries.
  const sent: { method: string; strategy: threadServicePb.BusyStrategy | undefined }[] = [];
  const client = createThreadlineClient({
    baseUrl: "127.0.0.1:1",
    interceptors: [
      () => async (request) => {
        let message: unknown;
        if (request.stream) {
          for await (const first of request.message) {
            message = first;
            break;
          }
        } else {
          message = request.message;
        }
        const spec = (message as { spec?: threadServicePb.ThreadRunSpec }).spec;
        sent.push({ method: request.method.name, strategy: spec?.busyStrategy });
        throw new ConnectError("answered offline", Code.InvalidArgument);
      },
    ],
  });
  const { BusyStrategy } = threadServicePb;
  try {
    for (const [busyStrategy, want] of [
      [undefined, BusyStrategy.UNSPECIFIED],
      ["reject", BusyStrategy.REJECT],
      ["enqueue", BusyStrategy.ENQUEUE],
      ["interrupt", BusyStrategy.INTERRUPT],
      ["rollback", BusyStrategy.ROLLBACK],
    ] as const) {
      sent.length = 0;
      const input = busyStrategy === undefined ? { text: "hello" } : { text: "hello", busyStrategy };
      await assert.rejects(client.threads.run("thread_x", input), { code: Code.InvalidArgument });
      await assert.rejects(client.threads.startRun("thread_x", input), { code: Code.InvalidArgument });
      await assert.rejects(client.threads.stream("thread_x", { ...input, reconnect: false }).collect(), { code: Code.InvalidArgument });
      assert.deepEqual(
        sent,
        ["RunThread", "StartThreadRun", "StreamThreadRun"].map((method) => ({ method, strategy: want })),
        String(busyStrategy),
      );
    }
    sent.length = 0;
    const bogus = { text: "hello", busyStrategy: "preempt" as sdk.BusyStrategyName };
    const message = 'busyStrategy must be "reject", "enqueue", "interrupt" or "rollback", not "preempt"';
    assert.throws(() => client.threads.stream("thread_x", bogus), { name: "TypeError", message });
    await assert.rejects(client.threads.run("thread_x", bogus), { name: "TypeError", message });
    await assert.rejects(client.threads.startRun("thread_x", bogus), { name: "TypeError", message });
    assert.deepEqual(sent, [], "nothing was sent");
  } finally {
    client.close();
  }
});

test("a QUEUED start exposes its queue position; otherwise it is 0", () => {
  const threads = createThreadlineClient({ baseUrl: "127.0.0.1:1" }).threads;
  const start = () => Promise.reject(new Error("not sent"));
  const queued = new sdk.StartedRun({
    threads,
    threadId: "thread_x",
    response: create(threadServicePb.StartThreadRunResponseSchema, {
      runId: "run-q",
      requestId: "req-q",
      revision: 4n,
      status: threadPb.ThreadRunStatus.QUEUED,
      queuePosition: 2,
    }),
    start,
    runTimeoutMs: 0,
  });
  assert.deepEqual(
    [queued.status, queued.queuePosition, queued.runId, queued.requestId, queued.revision, queued.replayed, queued.outcome],
    [threadPb.ThreadRunStatus.QUEUED, 2, "run-q", "req-q", 4n, false, undefined],
  );
  const running = new sdk.StartedRun({
    threads,
    threadId: "thread_x",
    response: create(threadServicePb.StartThreadRunResponseSchema, { runId: "run-r", status: threadPb.ThreadRunStatus.RUNNING }),
    start,
    runTimeoutMs: 0,
  });
  assert.equal(running.queuePosition, 0);
});

/** A checkpoint candidate event whose history is `data`, sent as a delta on `base` or whole. */
function candidate(sequence: number, data: string, delta?: { base: string; keep?: number }) {
  const bytes = Buffer.from(data, "utf8");
  const keep = delta?.keep ?? commonPrefix(Buffer.from(delta?.base ?? "", "utf8"), bytes);
  return create(eventsPb.RunEventSchema, {
    sequence: BigInt(sequence),
    event: {
      case: "checkpointCandidate",
      value: {
        state: {
          schemaVersion: "1",
          threadId: "thr_sdktest1",
          messageHistory: {
            format: "pydantic-ai.model-messages+json",
            formatVersion: "1",
            data: delta === undefined ? data : "",
            messageCount: BigInt((JSON.parse(data) as unknown[]).length),
            sha256: createHash("sha256").update(bytes).digest(),
          },
        },
        historyDelta: delta && { keepBytes: BigInt(keep), append: bytes.subarray(keep).toString("utf8") },
      },
    },
  });
}

/** The bytes `data` shares with `base` at its start, as the server counts them (whole characters). */
function commonPrefix(base: Buffer, data: Buffer): number {
  let keep = 0;
  while (keep < base.length && keep < data.length && base[keep] === data[keep]) keep++;
  while (keep > 0 && keep < data.length && (data[keep]! & 0xc0) === 0x80) keep--;
  return keep;
}

function historyOf(event: eventsPb.RunEvent): string | undefined {
  return event.event.case === "checkpointCandidate" ? event.event.value.state?.messageHistory?.data : undefined;
}

test("delta candidates are rebuilt in UTF-8 bytes, each from the one before", () => {
  const spec = create(runPb.RunSpecSchema, { prompt: { case: "text", value: "hi" }, checkpoints: true });
  const histories = new CandidateHistories(spec);
  // No previous state: the first base is `[]`.
  // The last two differ inside a character (é = C3 A9, è = C3 A8): the delta keeps whole ones.
  const steps = ["[]", '["Déjà"]', '["Déjà","vu — ✓"]', '["Déjà","vu — ✓","🧵"]', '["Déjà","vé"]', '["Déjà","vè"]'];
  let base = "[]";
  steps.forEach((data, i) => {
    const event = candidate(i, data, { base });
    histories.complete(event);
    assert.equal(historyOf(event), data);
    // The delta stays, for a host that wants to see it.
    assert.ok(event.event.case === "checkpointCandidate" && event.event.value.historyDelta);
    base = data;
  });
  // Other events pass untouched.
  const other = create(eventsPb.RunEventSchema, { sequence: 9n, event: { case: "runStarted", value: {} } });
  histories.complete(other);
  assert.equal(other.event.case, "runStarted");
});

test("the first delta applies to the previous state's history as sent; a full candidate is the next base", () => {
  const previous = '[{"kind":"request"}]';
  const histories = new CandidateHistories(
    create(runPb.RunSpecSchema, {
      previousState: { threadId: "thr_sdktest1", messageHistory: { data: previous } },
      checkpoints: true,
    }),
  );
  const first = candidate(1, '[{"kind":"request"},{"kind":"response"}]', { base: previous });
  histories.complete(first);
  assert.equal(historyOf(first), '[{"kind":"request"},{"kind":"response"}]');
  const full = candidate(2, '["whole"]');
  histories.complete(full);
  assert.equal(historyOf(full), '["whole"]');
  const next = candidate(3, '["whole","more"]', { base: '["whole"]' });
  histories.complete(next);
  assert.equal(historyOf(next), '["whole","more"]');
  // A previous state without a history sent empty data: that is the base.
  const empty = new CandidateHistories(create(runPb.RunSpecSchema, { previousState: { threadId: "thr_x" } }));
  const fromEmpty = candidate(4, "[]", { base: "" });
  empty.complete(fromEmpty);
  assert.equal(historyOf(fromEmpty), "[]");
});

test("a ProtocolError is a ThreadlineError with Code.Internal, no reason, and what broke", () => {
  const err = new ProtocolError("the stream ended without its terminal result");
  isProtocolError("the stream ended without its terminal result")(err);
  assert.equal(ThreadlineError.from(err), err);
  assert.equal(reasonOf(err), "");
  // A status the server sent is a ThreadlineError, never a ProtocolError, even when it is INTERNAL.
  const sent = ThreadlineError.from(new ConnectError("The server failed unexpectedly; see its logs.", Code.Internal));
  assert.equal(sent.code, Code.Internal);
  assert.ok(!(sent instanceof ProtocolError));
});

test("a candidate that does not rebuild is a ProtocolError naming its sequence", () => {
  const spec = create(runPb.RunSpecSchema, {});
  const broken = (sequence: number, why: string) =>
    isProtocolError(`the checkpoint candidate at sequence ${sequence} does not rebuild: ${why}`);
  // `[]` has 2 bytes.
  assert.throws(
    () => new CandidateHistories(spec).complete(candidate(5, '["a"]', { base: "[]", keep: 3 })),
    broken(5, "its history_delta keeps 3 bytes of a base that has 2"),
  );
  const tampered = candidate(6, '["a"]', { base: "[]" });
  assert.ok(tampered.event.case === "checkpointCandidate");
  tampered.event.value.state!.messageHistory!.sha256[0]! ^= 1;
  const histories = new CandidateHistories(spec);
  assert.throws(() => histories.complete(tampered), broken(6, "its rebuilt history does not match message_history.sha256"));
  assert.equal(historyOf(tampered), "", "left as it came");
  // The base stays as it was, so the right candidate still rebuilds after the broken one.
  const right = candidate(7, '["a"]', { base: "[]" });
  histories.complete(right);
  assert.equal(historyOf(right), '["a"]');
  // The base counts bytes, not UTF-16 units: `["é"]` is 6 bytes, 5 units.
  const utf8 = new CandidateHistories(spec);
  utf8.complete(candidate(7, '["é"]'));
  assert.throws(
    () => utf8.complete(candidate(8, '["é"]', { base: '["é"]', keep: 7 })),
    broken(8, "its history_delta keeps 7 bytes of a base that has 6"),
  );
  const headless = candidate(9, "[]", { base: "[]" });
  assert.ok(headless.event.case === "checkpointCandidate");
  headless.event.value.state!.messageHistory = undefined;
  assert.throws(
    () => new CandidateHistories(spec).complete(headless),
    broken(9, "its history_delta has no state.message_history to rebuild"),
  );
});

test("collectRun of events without a result is a ProtocolError", async () => {
  async function* withoutResult() {
    yield create(eventsPb.RunEventSchema, { sequence: 0n, event: { case: "runStarted", value: {} } });
  }
  await assert.rejects(sdk.collectRun(withoutResult()), isProtocolError("the stream ended without its terminal result"));
});

test("maxEventsPerMessage must be an integer from 0 to 2^32 - 1", () => {
  // Creating a client opens no connection, so no server is needed.
  for (const maxEventsPerMessage of [0, 1, 64, 256, 1000, 2 ** 32 - 1]) {
    createThreadlineClient({ baseUrl: "127.0.0.1:1", maxEventsPerMessage }).close();
  }
  for (const [maxEventsPerMessage, shown] of [
    [-1, "-1"],
    [1.5, "1.5"],
    [Number.NaN, "NaN"],
    [Number.POSITIVE_INFINITY, "Infinity"],
    [2 ** 32, "4294967296"],
    ["64" as unknown as number, '"64"'],
  ] as const) {
    assert.throws(() => createThreadlineClient({ baseUrl: "127.0.0.1:1", maxEventsPerMessage }), {
      name: "RangeError",
      message: `maxEventsPerMessage must be an integer from 0 to 4294967295 (0 or 1 = one event per message), got ${shown}`,
    });
  }
});

test("the package exports exactly its public surface plus the generated contract", () => {
  const generated = [deferredPb, eventsPb, servicePb, runPb, statePb, threadPb, threadServicePb].flatMap((module) =>
    Object.keys(module),
  );
  for (const name of generated) {
    assert.ok(name in sdk, `${name} is re-exported`);
  }
  const own = Object.keys(sdk)
    .filter((name) => !generated.includes(name))
    .sort();
  // A change here is a change of the public API: review it as one.
  assert.deepEqual(own, [
    "CheckpointNotFound",
    "Code",
    "DEFAULT_MAX_EVENTS_PER_MESSAGE",
    "DEFAULT_RUN_TIMEOUT_MS",
    "DEFAULT_TIMEOUT_MS",
    "FollowerLimitReached",
    "LeaseLost",
    "ListenerTooSlow",
    "NOT_EXECUTED_TOOL_RESULT",
    "ProtocolError",
    "RECONNECT_RETRIES",
    "RUN_RETRIES",
    "RequestIdReused",
    "RequestInterrupted",
    "RevisionConflict",
    "RunAttemptLost",
    "RunEventsExpired",
    "RunNotFound",
    "StartedRun",
    "StoreUnavailable",
    "THREADLINE_ERROR_DOMAIN",
    "ThreadBusy",
    "ThreadExists",
    "ThreadNotFound",
    "ThreadNotSuspended",
    "ThreadQueueFull",
    "ThreadRunStream",
    "ThreadlineError",
    "Threads",
    "UNANSWERED_APPROVAL_MESSAGE",
    "answers",
    "approve",
    "callFailed",
    "callResult",
    "callRetry",
    "childAnswer",
    "childRunning",
    "codeName",
    "collectRun",
    "createThreadlineClient",
    "decodeMessage",
    "decodeState",
    "deny",
    "encodeMessage",
    "encodeState",
    "externalResult",
    "newRequestId",
    "pendingCalls",
    "pendingChildren",
    "reasonOf",
    "resumeWith",
  ]);
});
