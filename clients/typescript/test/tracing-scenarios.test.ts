// Trace context propagation against a real server of its own, traced to its stderr
// (`OTEL_TRACES_EXPORTER=console`: one JSON span a line, beside the JSON log lines): with a host
// span current, every call's server span continues the host's trace (same trace id, the host's
// span as parent, its tracestate) and the run's `run_started` line carries the trace id; with none,
// the server starts a new trace; and a host whose SDK cannot load `@opentelemetry/api` still runs,
// sending nothing.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";

import { ROOT_CONTEXT, type SpanContext, context, trace } from "@opentelemetry/api";

import { RunStatus, type ThreadlineClient, collectRun, createThreadlineClient } from "../src/index.js";
import { hostSpan, registerHostTracing } from "./otel.js";
import { type TestServer, startServer } from "./server.js";

/** How long a span or log line may take to reach stderr (spans are exported in batches). */
const LINE_TIMEOUT_MS = 20_000;
const PACKAGE_DIR = fileURLToPath(new URL("../", import.meta.url));

/** A span line of the console exporter (`ReadableSpan.to_json(indent=None)`), the fields we read. */
interface SpanLine {
  name: string;
  kind: string;
  parent_id: string | null;
  context: { trace_id: string; span_id: string; trace_state: string };
}

/** A JSON log line of the server. */
interface LogLine {
  event?: string;
  run_id?: string;
  trace_id?: string;
  span_id?: string;
}

let server: TestServer;
let client: ThreadlineClient;

before(async () => {
  registerHostTracing();
  // The batch exporter's delay shortened, so spans reach stderr within the test's wait.
  server = await startServer([], { env: { OTEL_TRACES_EXPORTER: "console", OTEL_BSP_SCHEDULE_DELAY: "200" } });
  client = createThreadlineClient({ baseUrl: server.baseUrl, timeoutMs: 30_000 });
});

after(async () => {
  client?.close();
  await server?.stop();
  context.disable();
});

function parse(line: string): Record<string, unknown> | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The server span of `rpc` (`threadline.v1.HarnessService/Run`, …) in trace `traceId`. */
function serverSpan(rpc: string, traceId: string): Promise<SpanLine> {
  return server.waitForLine(`span ${rpc} of trace ${traceId}`, (line) => {
    const span = parse(line) as Partial<SpanLine> | undefined;
    return span?.name === rpc && span.context?.trace_id === `0x${traceId}` ? (span as SpanLine) : undefined;
  }, LINE_TIMEOUT_MS);
}

/** The `run_started` log line of run `runId`. */
function runStarted(runId: string): Promise<LogLine> {
  assert.match(runId, /^run-[0-9a-f]{32}$/);
  return server.waitForLine(`run_started line of ${runId}`, (line) => {
    const log = parse(line) as LogLine | undefined;
    return log?.event === "run_started" && log.run_id === runId ? log : undefined;
  }, LINE_TIMEOUT_MS);
}

/** Run `body` with `span` current, as a host's instrumented code would. */
function within<T>(span: SpanContext, body: () => Promise<T>): Promise<T> {
  return context.with(trace.setSpanContext(ROOT_CONTEXT, span), body);
}

/**
 * The server span of `rpc` continues `host`: its trace, the host's span as parent, and its
 * tracestate if it has one.
 */
async function assertContinues(rpc: string, host: SpanContext): Promise<void> {
  const span = await serverSpan(rpc, host.traceId);
  assert.equal(span.kind, "SpanKind.SERVER");
  assert.equal(span.parent_id, `0x${host.spanId}`);
  assert.notEqual(span.context.span_id, `0x${host.spanId}`);
  if (host.traceState !== undefined) {
    const [key, value] = host.traceState.serialize().split("=");
    assert.ok(span.context.trace_state.includes(`key=${key}, value=${value}`), span.context.trace_state);
  }
}

/** The run's `run_started` line carries the host's trace id and a span id of that trace. */
async function assertRunTraced(runId: string, host: SpanContext): Promise<void> {
  const log = await runStarted(runId);
  assert.equal(log.trace_id, host.traceId);
  assert.match(log.span_id ?? "", /^[0-9a-f]{16}$/);
}

/** A run with no host span: its server span has no parent, in a trace the run's log line names. */
async function assertNewTrace(rpc: string, runId: string): Promise<void> {
  const log = await runStarted(runId);
  assert.match(log.trace_id ?? "", /^[0-9a-f]{32}$/);
  const span = await serverSpan(rpc, log.trace_id!);
  assert.equal(span.parent_id, null);
}

describe("trace context", () => {
  test("HarnessService calls and runs continue the host's trace", async () => {
    const unary = hostSpan();
    const state = await within(unary, () => client.newState());
    await assertContinues("threadline.v1.HarnessService/NewState", unary);

    const run = hostSpan();
    const result = await within(run, () => client.run({ prompt: "hello", previousState: state }));
    assert.equal(result.status, RunStatus.COMPLETED);
    await assertContinues("threadline.v1.HarnessService/Run", run);
    await assertRunTraced(result.runId, run);

    const streamed = hostSpan();
    const { result: streamedResult } = await within(streamed, () => collectRun(client.streamRun({ prompt: "hello" })));
    assert.equal(streamedResult.status, RunStatus.COMPLETED);
    await assertContinues("threadline.v1.HarnessService/StreamRun", streamed);
    await assertRunTraced(streamedResult.runId, streamed);
  });

  test("ThreadService calls and runs continue the host's trace", async () => {
    const created = hostSpan();
    const thread = await within(created, () => client.threads.create());
    await assertContinues("threadline.v1.ThreadService/CreateThread", created);

    const run = hostSpan();
    const outcome = await within(run, () => client.threads.run(thread.threadId, { text: "hello" }));
    assert.equal(outcome.result.status, RunStatus.COMPLETED);
    await assertContinues("threadline.v1.ThreadService/RunThread", run);
    await assertRunTraced(outcome.result.runId, run);

    const streamed = hostSpan();
    const collected = await within(streamed, () => client.threads.stream(thread.threadId, { text: "hello" }).collect());
    assert.equal(collected.result.status, RunStatus.COMPLETED);
    await assertContinues("threadline.v1.ThreadService/StreamThreadRun", streamed);
    await assertRunTraced(collected.result.runId, streamed);
  });

  test("with no span current the SDK sends no trace context: the server starts a new trace", async () => {
    // After the runs above, in a context with no span: nothing of theirs is left behind.
    assert.equal(trace.getSpanContext(context.active()), undefined);
    const result = await client.run({ prompt: "hello" });
    await assertNewTrace("threadline.v1.HarnessService/Run", result.runId);
    const { result: streamed } = await collectRun(client.streamRun({ prompt: "hello" }));
    await assertNewTrace("threadline.v1.HarnessService/StreamRun", streamed.runId);
    const thread = await client.threads.create();
    const outcome = await client.threads.run(thread.threadId, { text: "hello" });
    await assertNewTrace("threadline.v1.ThreadService/RunThread", outcome.result.runId);
  });

  test("a host whose SDK cannot load @opentelemetry/api runs as usual and sends nothing", async () => {
    // The same host twice, with a span current: as it is, and with the SDK's import hidden.
    const traced = { ...hostSpan(), traceState: undefined }; // the host sets none
    const shown = await tracedHost(traced, []);
    await assertContinues("threadline.v1.HarnessService/Run", traced);
    for (const runId of shown.runIds) await assertRunTraced(runId, traced);

    const untraced = hostSpan();
    const hidden = await tracedHost(untraced, ["--import", "./test/fixtures/hide-otel.mjs"]);
    assert.equal(hidden.activeTraceId, untraced.traceId, "the host's own OpenTelemetry had the span current");
    assert.equal(hidden.runIds.length, 2);
    await assertNewTrace("threadline.v1.HarnessService/Run", hidden.runIds[0]!);
    await assertNewTrace("threadline.v1.ThreadService/RunThread", hidden.runIds[1]!);
    for (const runId of hidden.runIds) {
      assert.notEqual((await runStarted(runId)).trace_id, untraced.traceId);
    }
  });
});

/** Run test/fixtures/traced-host.ts with `span` against the server; its report. */
async function tracedHost(span: SpanContext, nodeFlags: string[]): Promise<{ runIds: string[]; activeTraceId?: string }> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", ...nodeFlags, "./test/fixtures/traced-host.ts", server.baseUrl, span.traceId, span.spanId],
    { cwd: PACKAGE_DIR, stdio: ["ignore", "pipe", "pipe"] },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, "close")) as [number | null];
  assert.equal(code, 0, `traced-host.ts failed:\n${stderr}`);
  return JSON.parse(stdout) as { runIds: string[]; activeTraceId?: string };
}
