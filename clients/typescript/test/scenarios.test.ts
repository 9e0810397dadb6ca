// The shared scenario suite, against a real server: `THREADLINE_ADDR`, or `threadline serve
// --port 0` started here. The server's embedded "default" agent has a scripted model that picks
// its path from the prompt (server/demo.py): `delete <path>` asks for approval, `lookup <topic>`
// calls a plain tool, `count` bumps a capability-state counter, `sleep <s>` waits, and
// `client:<name> {json}` calls the host's client tool; anything else is echoed.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { isMessage } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";

import {
  Code,
  DEFAULT_MAX_EVENTS_PER_MESSAGE,
  DeferredKind,
  type RunEvent,
  type RunResult,
  RunStatus,
  StreamRunRequestSchema,
  StreamRunResponseSchema,
  SuspendReason,
  type ThreadlineClient,
  ThreadlineError,
  ToolCategory,
  ToolOutcome,
  approve,
  callResult,
  collectRun,
  createThreadlineClient,
  decodeState,
  deny,
  encodeState,
  pendingCalls,
  resumeWith,
} from "../src/index.js";
import { SERVER_ADDR, type TestServer, startServer } from "./server.js";
import { VECTORS_DIR, checkVector, manifest, unlistedFiles } from "./vectors.js";

let server: TestServer;
let client: ThreadlineClient;

before(async () => {
  server = await startServer();
  client = createThreadlineClient({ baseUrl: server.baseUrl, token: process.env["THREADLINE_TOKEN"], timeoutMs: 30_000 });
});

after(async () => {
  client?.close();
  await server?.stop();
});

/** The host's own tool: the model calls it with `client:local_time {"zone": "..."}`. */
const LOCAL_TIME = {
  name: "local_time",
  description: "The current local time in a time zone.",
  parametersJsonSchema: JSON.stringify({
    type: "object",
    properties: { zone: { type: "string" } },
    required: ["zone"],
  }),
};

function localTime(args: unknown): string {
  const { zone } = args as { zone: string };
  return `12:34 in ${zone}`;
}

function output(result: RunResult): unknown {
  assert.equal(result.status, RunStatus.COMPLETED, `run ended ${RunStatus[result.status]}: ${result.failure?.message}`);
  return JSON.parse(result.outputJson);
}

/** What one client sent and received on its `StreamRun` calls, as a Connect interceptor saw it. */
interface StreamRunTrace {
  /** Each request's `max_events_per_message`. */
  readonly requested: number[];
  /** Each response, in order: the field its events came in and how many. */
  readonly responses: { field: "event" | "events"; count: number }[];
}

/** A client of the suite's server whose `StreamRun` calls are traced on the wire. */
function tracedClient(maxEventsPerMessage?: number): { traced: ThreadlineClient; trace: StreamRunTrace } {
  const trace: StreamRunTrace = { requested: [], responses: [] };
  const tracer: Interceptor = (next) => async (request) => {
    if (!request.stream || request.method.name !== "StreamRun") {
      return next(request);
    }
    const sent = request.message;
    const response = await next({
      ...request,
      message: (async function* () {
        for await (const message of sent) {
          if (isMessage(message, StreamRunRequestSchema)) trace.requested.push(message.maxEventsPerMessage);
          yield message;
        }
      })(),
    });
    if (!response.stream) {
      return response;
    }
    const received = response.message;
    return {
      ...response,
      message: (async function* () {
        for await (const message of received) {
          if (isMessage(message, StreamRunResponseSchema)) {
            const packed = message.event === undefined;
            trace.responses.push({ field: packed ? "events" : "event", count: packed ? message.events.length : 1 });
          }
          yield message;
        }
      })(),
    };
  };
  const traced = createThreadlineClient({
    baseUrl: server.baseUrl,
    token: process.env["THREADLINE_TOKEN"],
    interceptors: [tracer],
    ...(maxEventsPerMessage === undefined ? {} : { maxEventsPerMessage }),
  });
  return { traced, trace };
}

/** Check a whole stream: sequence numbers 0, 1, 2, … and exactly one result, last. */
function assertWholeStream(events: RunEvent[]): void {
  assert.deepEqual(
    events.map((e) => e.sequence),
    events.map((_, i) => BigInt(i)),
  );
  assert.equal(events.at(-1)?.event.case, "result");
  assert.equal(events.filter((e) => e.event.case === "result").length, 1);
}

function stateOf(result: RunResult) {
  assert.ok(result.state, "the result carries a state");
  return result.state;
}

describe("threads", () => {
  test("the server describes itself and its demo agent", async () => {
    const info = await client.getServerInfo();
    assert.ok(info.schemaVersions.includes("1"));
    assert.equal(info.defaultAgent, "default");
    const agent = info.agents.find((a) => a.name === info.defaultAgent);
    assert.ok(agent);
    assert.equal(agent.tools.find((t) => t.name === "delete_file")?.category, ToolCategory.REQUIRES_APPROVAL);
  });

  test("a thread continues twice: same thread ID, a new run ID each time, growing history", async () => {
    const first = await client.run({ prompt: "hello" });
    assert.equal(output(first), "You said: hello");
    const second = await client.run({ prompt: "hello again", previousState: stateOf(first) });
    assert.equal(output(second), "You said: hello again");
    const third = await client.run({ prompt: "and again", previousState: stateOf(second) });
    assert.equal(output(third), "You said: and again");

    assert.match(first.threadId, /^thread_[0-9a-f]{32}$/);
    for (const result of [first, second, third]) {
      assert.equal(result.threadId, first.threadId);
      assert.equal(stateOf(result).threadId, first.threadId);
      assert.match(result.runId, /^run-[0-9a-f]{32}$/);
    }
    assert.equal(new Set([first.runId, second.runId, third.runId]).size, 3);
    const counts = [first, second, third].map((r) => stateOf(r).messageHistory?.messageCount);
    assert.deepEqual(counts, [2n, 4n, 6n]);
    // The history is returned byte for byte: the earlier history is a prefix of the later one.
    const before = JSON.parse(stateOf(first).messageHistory!.data) as unknown[];
    const later = JSON.parse(stateOf(third).messageHistory!.data) as unknown[];
    assert.deepEqual(later.slice(0, before.length), before);
  });

  test("a thread continues from a state stored as bytes or as JSON", async () => {
    const first = await client.run({ prompt: "remember me" });
    const fromBytes = decodeState(encodeState(stateOf(first)));
    const fromJson = decodeState(encodeState(stateOf(first), "json"));
    assert.deepEqual(fromJson, fromBytes);
    const next = await client.run({ prompt: "still here", previousState: fromJson });
    assert.equal(next.threadId, first.threadId);
    assert.equal(output(next), "You said: still here");
  });

  test("a fork gets a new thread ID and the same history", async () => {
    const source = stateOf(await client.run({ prompt: "lookup grpc" }));
    const fork = await client.forkState(source);
    assert.notEqual(fork.threadId, source.threadId);
    assert.match(fork.threadId, /^thread_[0-9a-f]{32}$/);
    assert.deepEqual(fork.messageHistory, source.messageHistory);
    assert.deepEqual(fork.capabilityStates, source.capabilityStates);

    const named = await client.forkState(source, { threadId: "thr_forkednamed1" });
    assert.equal(named.threadId, "thr_forkednamed1");
    assert.deepEqual(named.messageHistory, source.messageHistory);

    const continued = await client.run({ prompt: "hello fork", previousState: fork });
    assert.equal(continued.threadId, fork.threadId);
    assert.equal(output(continued), "You said: hello fork");

    await assert.rejects(client.forkState(source, { threadId: source.threadId }), (err: unknown) => {
      assert.ok(err instanceof ThreadlineError);
      assert.equal(err.code, Code.InvalidArgument);
      assert.equal(err.reason, "FORK_THREAD_ID_CONFLICT");
      return true;
    });
  });

  test("capability state travels in the envelope from run to run", async () => {
    const first = await client.run({ prompt: "count" });
    const second = await client.run({ prompt: "count", previousState: stateOf(first) });
    assert.match(String(output(second)), /count: 2/);
    const counter = stateOf(second).capabilityStates.find((s) => s.capabilityId === "demo.counter");
    assert.deepEqual(JSON.parse(counter?.dataJson ?? "null"), { value: 2 });
  });
});

describe("deferred tool calls", () => {
  test("an approval suspends the run; approving it completes the run", async () => {
    const suspended = await client.run({ prompt: "delete a.txt" });
    assert.equal(suspended.status, RunStatus.SUSPENDED);
    assert.equal(suspended.suspendReason, SuspendReason.DEFERRED);
    assert.ok(suspended.deferred);
    assert.equal(suspended.deferred.calls.length, 0);
    const [pending] = pendingCalls(suspended.deferred);
    assert.ok(pending);
    assert.equal(pending.call.toolName, "delete_file");
    assert.equal(pending.call.kind, DeferredKind.APPROVAL);
    assert.deepEqual(pending.args, { path: "a.txt" });

    const resume = resumeWith(suspended.deferred, [approve(pending.call, { answeredBy: "ts-suite" })]);
    const done = await client.run({ previousState: stateOf(suspended), deferredResume: resume });
    assert.equal(done.threadId, suspended.threadId);
    assert.notEqual(done.runId, suspended.runId);
    assert.match(String(output(done)), /Deleted a\.txt\./);
  });

  test("a denial reaches the model with the host's message", async () => {
    const suspended = await client.run({ prompt: "delete secrets.txt" });
    assert.equal(suspended.status, RunStatus.SUSPENDED);
    const call = suspended.deferred?.approvals[0];
    assert.ok(call);
    const { events, result } = await collectRun(
      client.streamRun({
        previousState: stateOf(suspended),
        deferredResume: resumeWith(suspended.deferred!, [deny(call, "not today")]),
      }),
    );
    const text = String(output(result));
    assert.match(text, /not today/);
    assert.doesNotMatch(text, /Deleted/);
    const denied = events.flatMap((e) => (e.event.case === "toolResult" ? [e.event.value] : []));
    assert.ok(
      denied.some((r) => r.toolCallId === call.toolCallId && r.outcome === ToolOutcome.DENIED),
      "the stream shows the call as denied",
    );
  });

  test("a client tool is executed by the host and the run completes", async () => {
    const clientTools = [LOCAL_TIME];
    const suspended = await client.run({ prompt: 'client:local_time {"zone": "UTC"}', clientTools });
    assert.equal(suspended.status, RunStatus.SUSPENDED);
    assert.ok(suspended.deferred);
    assert.equal(suspended.deferred.approvals.length, 0);
    const [pending] = pendingCalls(suspended.deferred);
    assert.ok(pending);
    assert.equal(pending.call.kind, DeferredKind.EXTERNAL);
    assert.equal(pending.call.toolName, "local_time");
    assert.equal(pending.call.targetIdentity, "tool/threadline.client/local_time");
    assert.deepEqual(pending.args, { zone: "UTC" });

    const answer = callResult(pending.call, localTime(pending.args));
    const done = await client.run({
      previousState: stateOf(suspended),
      deferredResume: resumeWith(suspended.deferred, [answer]),
      clientTools,
    });
    assert.match(String(output(done)), /local_time: 12:34 in UTC/);
  });

  test("remainingDeferred reports what a checkpoint's history has not yet answered", async () => {
    const suspended = await client.run({ prompt: "delete b.txt" });
    const resume = resumeWith(suspended.deferred!, [approve(suspended.deferred!.approvals[0]!)]);
    const remaining = await client.remainingDeferred(resume, stateOf(suspended));
    assert.ok(remaining);
    assert.equal(remaining.requests?.approvals.length, 1);
    const done = await client.run({ previousState: stateOf(suspended), deferredResume: resume });
    assert.equal(await client.remainingDeferred(resume, stateOf(done)), undefined);
  });
});

describe("streaming", () => {
  test("events are in order, gap-free, and checkpoint candidates come before the result", async () => {
    const { events, result } = await collectRun(client.streamRun({ prompt: "lookup grpc", checkpoints: true }));
    assert.deepEqual(
      events.map((e) => e.sequence),
      events.map((_, i) => BigInt(i)),
    );
    assert.equal(events[0]?.event.case, "runStarted");
    assert.equal(events.at(-1)?.event.case, "result");
    assert.equal(events.filter((e) => e.event.case === "result").length, 1);
    for (const event of events) {
      assert.equal(event.threadId, result.threadId);
      assert.equal(event.runId, result.runId);
    }
    assert.match(String(output(result)), /gRPC is a remote procedure call framework/);

    const candidates = events.flatMap((e, i) => (e.event.case === "checkpointCandidate" ? [{ i, e: e.event.value }] : []));
    // One after each model_request_started and model_request_completed; this run makes two requests.
    assert.equal(candidates.length, 4);
    const resultIndex = events.length - 1;
    for (const { i, e } of candidates) {
      assert.ok(i < resultIndex);
      assert.equal(e.state?.threadId, result.threadId);
      const previous = events[i - 1]?.event;
      assert.ok(previous?.case === "lifecycle" && /^model_request_(started|completed)$/.test(previous.value.type));
    }
    // A candidate is a state a host may continue from.
    const last = candidates.at(-1)!.e.state!;
    assert.equal((await client.validateState(last)).state.threadId, result.threadId);
  });

  test("aborting a stream cancels it with Code.Canceled", async () => {
    const controller = new AbortController();
    const seen: RunEvent[] = [];
    await assert.rejects(
      (async () => {
        for await (const event of client.streamRun({ prompt: "sleep 30" }, { signal: controller.signal })) {
          seen.push(event);
          if (event.event.case === "runStarted") controller.abort();
        }
      })(),
      (err: unknown) => {
        assert.ok(err instanceof ThreadlineError);
        assert.equal(err.code, Code.Canceled);
        return true;
      },
    );
    assert.equal(seen[0]?.event.case, "runStarted");
  });

  test("leaving the loop early cancels the call", async () => {
    const signals: AbortSignal[] = [];
    const observed = createThreadlineClient({
      baseUrl: server.baseUrl,
      token: process.env["THREADLINE_TOKEN"],
      interceptors: [
        (next) => (request) => {
          signals.push(request.signal);
          return next(request);
        },
      ],
    });
    try {
      for await (const event of observed.streamRun({ prompt: "sleep 30" })) {
        assert.equal(event.event.case, "runStarted");
        break;
      }
      assert.equal(signals.length, 1);
      assert.equal(signals[0]?.aborted, true);
      // The connection stays usable.
      assert.equal(output(await observed.run({ prompt: "after the break" })), "You said: after the break");
    } finally {
      observed.close();
    }
  });

  test("a call deadline ends a slow run with Code.DeadlineExceeded", async () => {
    await assert.rejects(client.run({ prompt: "sleep 30" }, { timeoutMs: 300 }), (err: unknown) => {
      assert.ok(err instanceof ThreadlineError);
      assert.equal(err.code, Code.DeadlineExceeded);
      return true;
    });
  });
});

describe("packed events", () => {
  /** The demo agent echoes this as "You said: " + it, in 8-character text deltas: about 2,000 events. */
  const LONG_PROMPT = "x".repeat(16_000);
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  test("every streamRun sends maxEventsPerMessage: DEFAULT_MAX_EVENTS_PER_MESSAGE, else the client's", async () => {
    assert.equal(DEFAULT_MAX_EVENTS_PER_MESSAGE, 64);
    for (const [configured, sent] of [
      [undefined, 64],
      [0, 0],
      [7, 7],
      [1000, 1000],
    ] as const) {
      const { traced, trace } = tracedClient(configured);
      try {
        for (const prompt of ["hello", "lookup grpc"]) {
          assertWholeStream((await collectRun(traced.streamRun({ prompt }))).events);
        }
        assert.deepEqual(trace.requested, [sent, sent], `maxEventsPerMessage: ${configured}`);
        // The server takes at most 256, and 0 means one event per response, in `event`.
        const most = sent === 0 ? 1 : Math.min(sent, 256);
        assert.ok(trace.responses.every((r) => r.count <= most && r.field === (sent > 1 ? "events" : "event")));
      } finally {
        traced.close();
      }
    }
  });

  test("packed responses give the host the same events as one event per response", async () => {
    const runs = [];
    for (const maxEventsPerMessage of [undefined, 0]) {
      const { traced, trace } = tracedClient(maxEventsPerMessage);
      try {
        const { events, result } = await collectRun(traced.streamRun({ prompt: "lookup grpc", checkpoints: true }));
        assertWholeStream(events);
        assert.match(String(output(result)), /gRPC is a remote procedure call framework/);
        runs.push({ events, trace });
      } finally {
        traced.close();
      }
    }
    const [packed, single] = runs;
    assert.ok(packed && single);
    assert.deepEqual(
      packed.events.map((e) => e.event.case),
      single.events.map((e) => e.event.case),
    );
    // Both wire forms were really used: `events` when packing is on, `event` when it is off.
    assert.ok(packed.trace.responses.every((r) => r.field === "events" && r.count >= 1));
    assert.equal(
      packed.trace.responses.reduce((sum, r) => sum + r.count, 0),
      packed.events.length,
    );
    assert.ok(single.trace.responses.every((r) => r.field === "event"));
    assert.equal(single.trace.responses.length, single.events.length);
  });

  test("a paused reader gets every event of a long echo, in order", async (t) => {
    const { traced, trace } = tracedClient();
    try {
      const stream = traced.streamRun({ prompt: LONG_PROMPT })[Symbol.asyncIterator]();
      const events: RunEvent[] = [];
      const first = await stream.next();
      assert.equal(first.done, false);
      events.push(first.value!);
      // Meanwhile the server runs ahead as far as HTTP/2 flow control lets it, and packs the
      // events that wait for the stream.
      await sleep(1_000);
      for (let next = await stream.next(); next.done !== true; next = await stream.next()) {
        events.push(next.value);
      }
      assertWholeStream(events);
      // The text part's first chunk comes in its `partStart`, the rest in `partDelta`s.
      const text = events.map(({ event }) =>
        event.case === "partStart" ? event.value.content : event.case === "partDelta" ? event.value.contentDelta : "",
      );
      assert.equal(text.join(""), `You said: ${LONG_PROMPT}`);
      const last = events.at(-1)?.event;
      assert.ok(last?.case === "result");
      assert.equal(output(last.value), `You said: ${LONG_PROMPT}`);
      assert.ok(trace.responses.every((r) => r.count >= 1 && r.count <= DEFAULT_MAX_EVENTS_PER_MESSAGE));
      // How much was packed depends on how far flow control let the server run ahead.
      const most = Math.max(...trace.responses.map((r) => r.count));
      t.diagnostic(`${events.length} events in ${trace.responses.length} responses, at most ${most} in one`);
    } finally {
      traced.close();
    }
  });

  test("after an abort no more events arrive, packed or not", async () => {
    for (const maxEventsPerMessage of [undefined, 0]) {
      const { traced } = tracedClient(maxEventsPerMessage);
      const controller = new AbortController();
      const seen: RunEvent[] = [];
      try {
        await assert.rejects(
          (async () => {
            for await (const event of traced.streamRun({ prompt: LONG_PROMPT }, { signal: controller.signal })) {
              seen.push(event);
              if (seen.length === 1) {
                await sleep(300); // events pile up: packed on the server, buffered in the client
              } else {
                controller.abort();
              }
            }
          })(),
          (err: unknown) => {
            assert.ok(err instanceof ThreadlineError);
            assert.equal(err.code, Code.Canceled);
            return true;
          },
        );
        assert.equal(seen.length, 2, `maxEventsPerMessage: ${maxEventsPerMessage}`);
      } finally {
        traced.close();
      }
    }
  });
});

describe("errors", () => {
  test("a state with an unsupported schema_version is rejected with SCHEMA_VERSION_UNSUPPORTED", async () => {
    const state = stateOf(await client.run({ prompt: "hello" }));
    const future = { ...state, schemaVersion: "999" };
    const check = (field: string) => (err: unknown) => {
      assert.ok(err instanceof ThreadlineError);
      assert.equal(err.code, Code.FailedPrecondition);
      assert.equal(err.reason, "SCHEMA_VERSION_UNSUPPORTED");
      assert.equal(err.domain, "threadline");
      assert.equal(err.metadata["received"], "999");
      assert.equal(err.metadata["supported"], "1");
      assert.ok(err.fieldViolations.some((v) => v.field === field));
      return true;
    };
    await assert.rejects(client.validateState(future), check("state.schema_version"));
    await assert.rejects(
      client.run({ prompt: "hello", previousState: future }),
      check("spec.previous_state.schema_version"),
    );
    await assert.rejects(
      collectRun(client.streamRun({ prompt: "hello", previousState: future })),
      check("spec.previous_state.schema_version"),
    );
  });

  test("an unknown agent is rejected with AGENT_UNKNOWN", async () => {
    await assert.rejects(client.run({ agent: "no-such-agent", prompt: "hi" }), (err: unknown) => {
      assert.ok(err instanceof ThreadlineError);
      assert.equal(err.code, Code.InvalidArgument);
      assert.equal(err.reason, "AGENT_UNKNOWN");
      return true;
    });
  });

  test("a server with --token needs the client's token", { skip: SERVER_ADDR && "THREADLINE_ADDR names the server" }, async () => {
    const guarded = await startServer(["--token", "s3cret-token"]);
    const clients = ["", "wrong", "s3cret-token"].map((token) => createThreadlineClient({ baseUrl: guarded.baseUrl, token }));
    try {
      const [missing, wrong, right] = clients;
      for (const [c, reason] of [
        [missing!, "TOKEN_MISSING"],
        [wrong!, "TOKEN_INVALID"],
      ] as const) {
        await assert.rejects(c.getServerInfo(), (err: unknown) => {
          assert.ok(err instanceof ThreadlineError);
          assert.equal(err.code, Code.Unauthenticated);
          assert.equal(err.reason, reason);
          return true;
        });
      }
      assert.ok((await right!.getServerInfo()).schemaVersions.includes("1"));
      const events = [];
      for await (const event of right!.streamRun({ prompt: "hello token" })) events.push(event);
      assert.equal(events.at(-1)?.event.case, "result");
    } finally {
      for (const c of clients) c.close();
      await guarded.stop();
    }
  });

  test("validateState returns the state in both stored forms", async () => {
    const created = await client.newState({ threadId: "thr_validated1" });
    assert.equal(created.schemaVersion, "1");
    assert.equal(created.messageHistory?.data, "[]");
    const validated = await client.validateState(created);
    assert.deepEqual(encodeState(validated.state), encodeState(created));
    const again = await client.validateState({ stateJson: validated.stateJson });
    assert.deepEqual(encodeState(again.state), encodeState(created));
    assert.equal(again.stateJson, validated.stateJson);
  });
});

describe("example host", () => {
  const PACKAGE_DIR = new URL("..", import.meta.url);

  /** Run examples/host.ts with `input` on stdin; resolve with its exit code and output. */
  function host(args: string[], input: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ["--import", "tsx", "examples/host.ts", "--addr", server.baseUrl, ...args], {
        cwd: PACKAGE_DIR,
        stdio: ["pipe", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
      child.on("error", reject);
      child.on("close", (code) => resolve({ code, stdout, stderr }));
      child.stdin.end(input);
    });
  }

  test("keeps the thread in a file, asks for approvals and runs its own client tool", async () => {
    const dir = mkdtempSync(join(tmpdir(), "threadline-host-"));
    const file = join(dir, "thread.json");
    try {
      const first = await host(["--state", file, "delete notes.txt"], "y\n");
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stdout, /Allow delete_file/);
      assert.match(first.stdout, /done: Tool results: delete_file: Deleted notes\.txt\./);
      const stored = JSON.parse(readFileSync(file, "utf8")) as { state: { thread_id: string }; pending?: unknown };
      assert.equal(stored.pending, undefined);

      const second = await host(["--state", file, "delete b.txt"], "not this one\n");
      assert.equal(second.code, 0, second.stderr);
      assert.match(second.stdout, /done: Tool results: delete_file: not this one/);

      const third = await host(["--state", file, 'client:local_time {"zone": "UTC"}'], "");
      assert.equal(third.code, 0, third.stderr);
      assert.match(third.stdout, /done: Tool results: local_time: \d{1,2}:\d\d:\d\d UTC/);

      const after = JSON.parse(readFileSync(file, "utf8")) as { state: unknown };
      const state = decodeState(JSON.stringify(after.state));
      assert.equal(state.threadId, stored.state.thread_id);
      assert.equal(state.messageHistory?.messageCount, 12n);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// Skipped only when the folder does not exist.
describe("golden vectors", { skip: existsSync(VECTORS_DIR) ? false : `${VECTORS_DIR} does not exist` }, () => {
  for (const [name, typeName] of existsSync(VECTORS_DIR) ? manifest() : []) {
    test(`${name} (${typeName}) decodes and re-encodes in both forms`, () => {
      checkVector(name, typeName);
    });
  }
  test("the manifest names every vector file", () => {
    assert.ok(manifest().length > 0);
    assert.deepEqual(unlistedFiles(), []);
  });
});
