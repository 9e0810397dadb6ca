// The host side of OpenTelemetry for the tracing tests: what a host's OpenTelemetry Node SDK
// registers, and host spans with fresh ids.

import { randomBytes } from "node:crypto";

import { type SpanContext, TraceFlags, context, createTraceState, propagation } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from "@opentelemetry/core";

/** Register the AsyncLocalStorage context manager and the W3C trace context and baggage propagators. */
export function registerHostTracing(): void {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(
    new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  );
}

/** A sampled host span with fresh random ids and a tracestate entry of its own. */
export function hostSpan(): SpanContext {
  return {
    traceId: randomBytes(16).toString("hex"),
    spanId: randomBytes(8).toString("hex"),
    traceFlags: TraceFlags.SAMPLED,
    traceState: createTraceState(`threadline=${randomBytes(4).toString("hex")}`),
  };
}
