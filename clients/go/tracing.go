package threadline

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Trace propagation: every call the client makes carries the host's current OpenTelemetry
// context in its metadata, so the server's span for the RPC continues the host's trace. The SDK
// makes no spans of its own.
//
// The context goes through W3C Trace Context (`traceparent`, `tracestate`) whether or not the
// host set a global propagator, so a host with a tracer but no otel.SetTextMapPropagator still
// passes its span; then through the global propagator, so a host that set one (e.g. with
// propagation.Baggage{}) passes what it carries too. A context without a span or baggage adds
// no header.

// traceInterceptors are the dial options that add the trace context to every unary and
// streaming call. Chained and dialled last, so a host's own interceptors (WithDialOptions)
// still apply and run first: a span one of them makes current is the one sent.
func traceInterceptors() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(withTraceContext(ctx), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(withTraceContext(ctx), desc, cc, method, opts...)
		}),
	}
}

// withTraceContext returns ctx with its trace context in the outgoing metadata, or ctx itself
// when there is nothing to send. A header the propagators set replaces one of the same name.
func withTraceContext(ctx context.Context) context.Context {
	var headers mdCarrier
	// The composite of TraceContext and the global propagator, without building one per call.
	// The global one is looked up each time: a host may set it after Dial.
	propagation.TraceContext{}.Inject(ctx, &headers)
	otel.GetTextMapPropagator().Inject(ctx, &headers)
	if headers.md == nil {
		return ctx
	}
	md, ok := metadata.FromOutgoingContext(ctx) // a copy
	if !ok {
		return metadata.NewOutgoingContext(ctx, headers.md)
	}
	for k, v := range headers.md {
		md[k] = v
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// mdCarrier is a propagation.TextMapCarrier over gRPC metadata, allocated only when a
// propagator sets a header.
type mdCarrier struct{ md metadata.MD }

func (c *mdCarrier) Get(key string) string {
	if v := c.md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c *mdCarrier) Set(key, value string) {
	if c.md == nil {
		c.md = metadata.MD{}
	}
	c.md.Set(key, value)
}

func (c *mdCarrier) Keys() []string {
	keys := make([]string, 0, len(c.md))
	for k := range c.md {
		keys = append(keys, k)
	}
	return keys
}
