/**
 * Trace context propagation: every call carries the host's current OpenTelemetry context (W3C
 * `traceparent` / `tracestate`, and baggage, as the host's global propagator writes them), so the
 * server's span of the RPC continues the host's trace.
 *
 * `@opentelemetry/api` is an optional peer dependency: it is imported dynamically, once, on the
 * first call, and when it cannot be loaded calls carry nothing. Its types are not imported either
 * (the `OtelApi` shape below), so the SDK also typechecks without it. The SDK makes no spans of its
 * own; with no span current the host's propagator writes nothing, so this costs one lookup a call.
 *
 * Not public: `client.ts` puts `traceContextInterceptor` on every client's transport.
 *
 * @module
 */

import type { Interceptor } from "@connectrpc/connect";

/** The package name, in a variable so that the compiler does not resolve the optional import. */
const OTEL_API: string = "@opentelemetry/api";

/** The part of `@opentelemetry/api` used here. */
interface OtelApi {
  context: { active(): unknown };
  propagation: {
    inject(context: unknown, carrier: Headers, setter: { set(carrier: Headers, key: string, value: string): void }): void;
  };
}

/** Writes the propagator's fields as request headers (gRPC metadata). */
const HEADER_SETTER = {
  set(carrier: Headers, key: string, value: string): void {
    carrier.set(key, value);
  },
};

/** The loaded API, `null` when it cannot be loaded, `undefined` until the first call has tried. */
let api: OtelApi | null | undefined;
let loading: Promise<void> | undefined;

function load(): Promise<void> {
  loading ??= import(OTEL_API).then(
    (module: Partial<OtelApi> & { default?: Partial<OtelApi> }) => {
      // A CommonJS build may expose its exports on `default` only.
      const found = typeof module.propagation?.inject === "function" ? module : module.default;
      api = typeof found?.propagation?.inject === "function" && found.context !== undefined ? (found as OtelApi) : null;
    },
    () => {
      api = null;
    },
  );
  return loading;
}

/** Inject the active OpenTelemetry context into each request's headers, when the API is there. */
export const traceContextInterceptor: Interceptor = (next) => async (request) => {
  if (api === undefined) {
    await load();
  }
  api?.propagation.inject(api.context.active(), request.header, HEADER_SETTER);
  return next(request);
};
