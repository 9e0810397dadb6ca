// Trace context propagation at the wire, with no Threadline server: an HTTP/2 server of the test
// records each call's headers. (tracing-scenarios.test.ts checks the real server continues them.)

import assert from "node:assert/strict";
import { once } from "node:events";
import { type IncomingHttpHeaders, createServer } from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";

import { ROOT_CONTEXT, context, propagation, trace } from "@opentelemetry/api";
import type { Interceptor } from "@connectrpc/connect";

import { Code, ThreadlineError, collectRun, createThreadlineClient } from "../src/index.js";
import { hostSpan, registerHostTracing } from "./otel.js";

before(registerHostTracing);
after(() => context.disable());

test("every call carries the current context's traceparent, tracestate and baggage, and none without a span", async () => {
  // An HTTP/2 server that records each call's headers and answers UNIMPLEMENTED.
  const seen: IncomingHttpHeaders[] = [];
  const recorder = createServer();
  recorder.on("stream", (stream, headers) => {
    seen.push(headers);
    stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-status": String(Code.Unimplemented) }, { endStream: true });
  });
  recorder.listen(0, "127.0.0.1");
  await once(recorder, "listening");
  // The host's own interceptor runs after the SDK's, so it sees the header too.
  const hostSaw: (string | null)[] = [];
  const hostInterceptor: Interceptor = (next) => (request) => {
    hostSaw.push(request.header.get("traceparent"));
    return next(request);
  };
  const recorded = createThreadlineClient({
    baseUrl: `127.0.0.1:${(recorder.address() as AddressInfo).port}`,
    interceptors: [hostInterceptor],
  });
  const calls: [string, () => Promise<unknown>][] = [
    ["/threadline.v1.HarnessService/NewState", () => recorded.newState()],
    ["/threadline.v1.HarnessService/StreamRun", () => collectRun(recorded.streamRun({ prompt: "hello" }))],
    ["/threadline.v1.ThreadService/CreateThread", () => recorded.threads.create()],
    ["/threadline.v1.ThreadService/RunThread", () => recorded.threads.run("thread_x", { text: "hello" })],
    ["/threadline.v1.ThreadService/StreamThreadRun", () => recorded.threads.stream("thread_x", { text: "hello" }).collect()],
  ];
  const unimplemented = (err: unknown) => err instanceof ThreadlineError && err.code === Code.Unimplemented;
  try {
    const host = hostSpan();
    const baggage = propagation.createBaggage({ tenant: { value: "ada" } });
    const current = propagation.setBaggage(trace.setSpanContext(ROOT_CONTEXT, host), baggage);
    await context.with(current, async () => {
      for (const [, call] of calls) await assert.rejects(call(), unimplemented);
    });
    for (const [, call] of calls) await assert.rejects(call(), unimplemented);

    assert.deepEqual(
      seen.map((headers) => headers[":path"]),
      [...calls, ...calls].map(([path]) => path),
    );
    const traceparent = `00-${host.traceId}-${host.spanId}-01`;
    for (const headers of seen.slice(0, calls.length)) {
      assert.equal(headers["traceparent"], traceparent);
      assert.equal(headers["tracestate"], host.traceState!.serialize());
      assert.equal(headers["baggage"], "tenant=ada");
    }
    for (const headers of seen.slice(calls.length)) {
      assert.deepEqual([headers["traceparent"], headers["tracestate"], headers["baggage"]], [undefined, undefined, undefined]);
    }
    assert.deepEqual(hostSaw, [...calls.map(() => traceparent), ...calls.map(() => null)]);
  } finally {
    recorded.close();
    recorder.close();
  }
});
