package threadline_test

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	threadline "github.com/threadline-dev/threadline/clients/go"
)

// What the SDK puts on the wire for the host's trace context, seen by a gRPC server of the
// test's own (the Threadline server does not echo headers; tracing_scenario_test.go has what it
// makes of them).

// hostSpan returns ctx with a sampled span of random IDs current, as a host's tracer would
// make it, and those IDs in hex.
func hostSpan(ctx context.Context) (context.Context, string, string) {
	tid, sid := randomHex(), randomHex()[:16]
	traceID, _ := trace.TraceIDFromHex(tid)
	spanID, _ := trace.SpanIDFromHex(sid)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(ctx, sc), tid, sid
}

// headerServer is an in-process gRPC server that answers every call UNIMPLEMENTED and keeps the
// metadata each one arrived with: what the SDK put on the wire.
type headerServer struct {
	mu   sync.Mutex
	seen map[string]metadata.MD // by full method name
}

func startHeaderServer(t *testing.T) (*headerServer, string) {
	t.Helper()
	hs := &headerServer{seen: map[string]metadata.MD{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		md, _ := metadata.FromIncomingContext(stream.Context())
		hs.mu.Lock()
		hs.seen[method] = md
		hs.mu.Unlock()
		return status.Error(codes.Unimplemented, "headers recorded")
	}))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return hs, lis.Addr().String()
}

// call makes one unary and one streaming call of each service under ctx and returns the
// metadata each arrived with, by method.
func (hs *headerServer) call(t *testing.T, c *threadline.Client, ctx context.Context) map[string]metadata.MD {
	t.Helper()
	hs.mu.Lock()
	clear(hs.seen)
	hs.mu.Unlock()
	spec := &threadline.RunSpec{Prompt: threadline.Text("hello")}
	_, _ = c.Run(ctx, spec)
	s := c.StreamRun(ctx, spec)
	for s.Receive() {
	}
	_ = s.Close()
	_, _ = c.Threads().Run(ctx, "thread_x", &threadline.ThreadRun{Text: "hello"})
	ts := c.Threads().Stream(ctx, "thread_x", &threadline.ThreadRun{Text: "hello"})
	_, _ = ts.Collect()
	_ = ts.Close()
	hs.mu.Lock()
	defer hs.mu.Unlock()
	want := []string{
		"/threadline.v1.HarnessService/Run", "/threadline.v1.HarnessService/StreamRun",
		"/threadline.v1.ThreadService/RunThread", "/threadline.v1.ThreadService/StreamThreadRun",
	}
	for _, m := range want {
		if _, ok := hs.seen[m]; !ok {
			t.Fatalf("no call of %s arrived (got %v)", m, hs.seen)
		}
	}
	out := make(map[string]metadata.MD, len(hs.seen))
	for m, md := range hs.seen {
		out[m] = md.Copy()
	}
	return out
}

func TestTraceHeaders(t *testing.T) {
	hs, addr := startHeaderServer(t)
	c, err := threadline.Dial(addr, threadline.WithTimeout(10*time.Second), threadline.WithRunTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// The global propagator can be set once per process for real; leave a no-op one behind,
	// which is what an unset one does.
	t.Cleanup(func() { otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) })

	member, _ := baggage.NewMemberRaw("tenant", "ada")
	bag, _ := baggage.New(member)
	withBaggage := baggage.ContextWithBaggage(t.Context(), bag)
	ctx, tid, sid := hostSpan(withBaggage)
	state, _ := trace.ParseTraceState("vendor=v1")
	ctx = trace.ContextWithSpanContext(ctx, trace.SpanContextFromContext(ctx).WithTraceState(state))
	traceparent := "00-" + tid + "-" + sid + "-01"

	t.Run("no span: no header", func(t *testing.T) {
		for m, md := range hs.call(t, c, withBaggage) {
			for _, h := range []string{"traceparent", "tracestate", "baggage"} {
				if v := md.Get(h); len(v) > 0 {
					t.Errorf("%s carried %s %v without a span or a global propagator", m, h, v)
				}
			}
		}
	})
	t.Run("span without a global propagator", func(t *testing.T) {
		for m, md := range hs.call(t, c, metadata.AppendToOutgoingContext(ctx, "x-host", "kept")) {
			if got := md.Get("traceparent"); !slices.Equal(got, []string{traceparent}) {
				t.Errorf("%s traceparent = %v, want [%s]", m, got, traceparent)
			}
			if got := md.Get("tracestate"); !slices.Equal(got, []string{"vendor=v1"}) {
				t.Errorf("%s tracestate = %v", m, got)
			}
			if got := md.Get("baggage"); len(got) > 0 {
				t.Errorf("%s baggage = %v without a baggage propagator", m, got)
			}
			if got := md.Get("x-host"); !slices.Equal(got, []string{"kept"}) {
				t.Errorf("%s lost the host's own metadata: x-host = %v", m, got)
			}
		}
	})
	t.Run("global propagator set after Dial", func(t *testing.T) {
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
		for m, md := range hs.call(t, c, ctx) {
			if got := md.Get("traceparent"); !slices.Equal(got, []string{traceparent}) {
				t.Errorf("%s traceparent = %v, want it once: [%s]", m, got, traceparent)
			}
			if got := md.Get("baggage"); !slices.Equal(got, []string{"tenant=ada"}) {
				t.Errorf("%s baggage = %v, want [tenant=ada]", m, got)
			}
		}
		for m, md := range hs.call(t, c, withBaggage) {
			if got := md.Get("traceparent"); len(got) > 0 || !slices.Equal(md.Get("baggage"), []string{"tenant=ada"}) {
				t.Errorf("%s without a span: traceparent %v, baggage %v; want only the baggage", m, got, md.Get("baggage"))
			}
		}
	})
}
