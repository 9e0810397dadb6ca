package threadline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	threadline "github.com/threadline-dev/threadline/clients/go"
)

// The host's trace context goes through every call: a server with tracing on (its console
// exporter writes one JSON span per line on stderr) continues the host's trace in the RPC's span
// and logs the run with the host's trace ID; without a span current the SDK sends nothing, so the
// server starts a new trace.

// serverSpan is one span line of the console exporter (ReadableSpan.to_json).
type serverSpan struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Context struct {
		TraceID string `json:"trace_id"`
		SpanID  string `json:"span_id"`
	} `json:"context"`
	ParentID *string `json:"parent_id"`
}

// runStarted is the fields of a `run_started` log line this test reads.
type runStarted struct {
	Event    string `json:"event"`
	ThreadID string `json:"thread_id"`
	TraceID  string `json:"trace_id"`
	SpanID   string `json:"span_id"`
}

// serverTrace is what a tracing server's stderr says so far: its spans and its runs'
// run_started lines by thread ID.
type serverTrace struct {
	spans []serverSpan
	runs  map[string]runStarted
}

func readServerTrace(t *testing.T, logPath string) serverTrace {
	t.Helper()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	out := serverTrace{runs: map[string]runStarted{}}
	for line := range bytes.Lines(data) {
		// A line still being written does not parse; the next read has it whole.
		var span serverSpan
		if json.Unmarshal(line, &span) == nil && span.Name != "" && span.Context.TraceID != "" {
			out.spans = append(out.spans, span)
			continue
		}
		var run runStarted
		if json.Unmarshal(line, &run) == nil && run.Event == "run_started" && run.ThreadID != "" {
			out.runs[run.ThreadID] = run
		}
	}
	return out
}

// span returns the span named name in the trace traceID (32 lowercase hex), if it is there yet.
func (s serverTrace) span(name, traceID string) (serverSpan, bool) {
	for _, sp := range s.spans {
		if sp.Name == name && sp.Context.TraceID == "0x"+traceID {
			return sp, true
		}
	}
	return serverSpan{}, false
}

// tracedCall is one call of the SDK made on a fresh thread, under ctx.
type tracedCall struct {
	name string // the server span's name, "<service>/<method>"
	run  func(t *testing.T, c *threadline.Client, ctx context.Context, threadID string)
}

var tracedCalls = []tracedCall{
	{"threadline.v1.HarnessService/Run", func(t *testing.T, c *threadline.Client, ctx context.Context, threadID string) {
		state, err := c.NewState(t.Context(), threadID)
		if err != nil {
			t.Fatal(err)
		}
		run(t, c, ctx, threadline.Continue(state, "hello"), threadline.StatusCompleted)
	}},
	{"threadline.v1.HarnessService/StreamRun", func(t *testing.T, c *threadline.Client, ctx context.Context, threadID string) {
		state, err := c.NewState(t.Context(), threadID)
		if err != nil {
			t.Fatal(err)
		}
		s := c.StreamRun(ctx, threadline.Continue(state, "hello"))
		defer s.Close()
		for s.Receive() {
		}
		if s.Err() != nil || s.Result().GetStatus() != threadline.StatusCompleted {
			t.Fatalf("StreamRun = %v, %v", s.Result(), s.Err())
		}
	}},
	{"threadline.v1.ThreadService/RunThread", func(t *testing.T, c *threadline.Client, ctx context.Context, threadID string) {
		th := c.Threads()
		if _, err := th.Create(t.Context(), &threadline.CreateThread{ThreadID: threadID}); err != nil {
			t.Fatal(err)
		}
		out, err := th.Run(ctx, threadID, &threadline.ThreadRun{Text: "hello"})
		if err != nil || out.Result.GetStatus() != threadline.StatusCompleted {
			t.Fatalf("Threads.Run = %v, %v", out, err)
		}
	}},
	{"threadline.v1.ThreadService/StreamThreadRun", func(t *testing.T, c *threadline.Client, ctx context.Context, threadID string) {
		th := c.Threads()
		if _, err := th.Create(t.Context(), &threadline.CreateThread{ThreadID: threadID}); err != nil {
			t.Fatal(err)
		}
		s := th.Stream(ctx, threadID, &threadline.ThreadRun{Text: "hello"})
		defer s.Close()
		out, err := s.Collect()
		if err != nil || out.Result.GetStatus() != threadline.StatusCompleted {
			t.Fatalf("Threads.Stream = %v, %v", out, err)
		}
	}},
}

func TestTraceContextReachesServer(t *testing.T) {
	addr, logPath := ownServerEnv(t, []string{"OTEL_TRACES_EXPORTER=console"})
	c, _ := dialAt(t, addr)

	// Each call twice: under a host span, and with none current (a new trace on the server).
	type traced struct {
		call            tracedCall
		threadID        string
		traceID, spanID string // the host's; empty without a span
	}
	var runs []traced
	for _, call := range tracedCalls {
		ctx, tid, sid := hostSpan(t.Context())
		withSpan := traced{call, freshID("traced"), tid, sid}
		call.run(t, c, ctx, withSpan.threadID)
		without := traced{call: call, threadID: freshID("untraced")}
		call.run(t, c, t.Context(), without.threadID)
		runs = append(runs, withSpan, without)
	}

	// Spans are exported in batches (every 5 s by default): wait, bounded, for every run's.
	var got serverTrace
	missing := func() []string {
		var out []string
		for _, r := range runs {
			line, ok := got.runs[r.threadID]
			if !ok {
				out = append(out, "run_started of "+r.threadID)
			} else if line.TraceID == "" {
				out = append(out, "trace_id in run_started of "+r.threadID)
			} else if _, ok := got.span(r.call.name, line.TraceID); !ok {
				out = append(out, fmt.Sprintf("%s span in trace %s", r.call.name, line.TraceID))
			}
		}
		return out
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		got = readServerTrace(t, logPath)
		if len(missing()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's stderr lacks after 30 s: %v", missing())
		}
		time.Sleep(100 * time.Millisecond) // polling a file: there is no event to wait on
	}

	for _, r := range runs {
		line := got.runs[r.threadID]
		span, _ := got.span(r.call.name, line.TraceID)
		if span.Kind != "SpanKind.SERVER" || len(span.Context.SpanID) != 18 {
			t.Errorf("%s span = %+v, want a server span", r.call.name, span)
		}
		if len(line.SpanID) != 16 {
			t.Errorf("%s: run_started line has span_id %q, want 16 hex", r.call.name, line.SpanID)
		}
		if r.traceID == "" {
			if span.ParentID != nil {
				t.Errorf("%s without a host span: the server span has parent %s, want none (a new trace)", r.call.name, *span.ParentID)
			}
			if slices.ContainsFunc(runs, func(o traced) bool { return o.traceID == line.TraceID }) {
				t.Errorf("%s without a host span ran in a host's trace %s", r.call.name, line.TraceID)
			}
			continue
		}
		if line.TraceID != r.traceID {
			t.Errorf("%s: run_started has trace_id %q, want the host's %s", r.call.name, line.TraceID, r.traceID)
		}
		if parent := span.ParentID; parent == nil || *parent != "0x"+r.spanID {
			t.Errorf("%s: server span %+v, want the host's span 0x%s as its parent", r.call.name, span, r.spanID)
		}
	}
}
