package threadline_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	threadline "github.com/threadline-dev/threadline/clients/go"
	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// StreamRunRequest.max_events_per_message, against the real server: the server packs events that
// are ready at once into one response, and RunStream hands them out one at a time.

// wire records the StreamRun messages a client sends and receives, through a stream interceptor
// (WithDialOptions), so a test can see the requests and responses themselves, as they were on
// the wire.
type wire struct {
	requests  []*threadlinev1.StreamRunRequest
	responses []*threadlinev1.StreamRunResponse
	// drop, when set, empties every response it returns true for after it arrived.
	drop func(n int) bool
	// edit, when set, may change every response after it arrived (and after drop).
	edit func(resp *threadlinev1.StreamRunResponse)
	// cut, when set, ends the stream cleanly (io.EOF) in place of every response it returns
	// true for, as a proxy that cut the call would; the call itself goes on until RunStream
	// cancels it.
	cut func(resp *threadlinev1.StreamRunResponse) bool
}

func (w *wire) option() threadline.Option {
	return threadline.WithDialOptions(grpc.WithStreamInterceptor(
		func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return &recordedStream{ClientStream: s, wire: w}, nil
		}))
}

type recordedStream struct {
	grpc.ClientStream
	wire *wire
}

func (s *recordedStream) SendMsg(m any) error {
	if req, ok := m.(*threadlinev1.StreamRunRequest); ok {
		s.wire.requests = append(s.wire.requests, proto.CloneOf(req))
	}
	return s.ClientStream.SendMsg(m)
}

func (s *recordedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if resp, ok := m.(*threadlinev1.StreamRunResponse); ok && err == nil && s.wire.cut != nil && s.wire.cut(resp) {
		proto.Reset(resp)
		return io.EOF
	}
	if resp, ok := m.(*threadlinev1.StreamRunResponse); ok && err == nil {
		if s.wire.drop != nil && s.wire.drop(len(s.wire.responses)) {
			proto.Reset(resp)
		}
		if s.wire.edit != nil {
			s.wire.edit(resp)
		}
		// A copy: RunStream completes delta checkpoint candidates in place.
		s.wire.responses = append(s.wire.responses, proto.CloneOf(resp))
	}
	return err
}

func dial(t *testing.T, opts ...threadline.Option) *threadline.Client {
	t.Helper()
	c, _ := dialAt(t, serverAddr, opts...)
	return c
}

// streamAll reads every event of one StreamRun; after the first event it pauses for pause.
func streamAll(t *testing.T, c *threadline.Client, spec *threadline.RunSpec, pause time.Duration) []*threadline.RunEvent {
	t.Helper()
	s := c.StreamRun(t.Context(), spec)
	defer s.Close()
	var events []*threadline.RunEvent
	for s.Receive() {
		events = append(events, s.Msg())
		if len(events) == 1 {
			time.Sleep(pause)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 || s.Result() != events[len(events)-1].GetResult() {
		t.Fatalf("%d events, result %v: want the result last", len(events), s.Result())
	}
	return events
}

// checkSequence checks the events are numbered 0, 1, 2, ... and only the last is the result.
func checkSequence(t *testing.T, events []*threadline.RunEvent) {
	t.Helper()
	for i, ev := range events {
		if ev.GetSequence() != uint64(i) {
			t.Fatalf("event %d has sequence %d", i, ev.GetSequence())
		}
		if (ev.GetResult() != nil) != (i == len(events)-1) {
			t.Fatalf("event %d of %d: %v", i, len(events), ev)
		}
	}
}

// cases names each event's case (`*threadlinev1.RunEvent_ToolCall`, ...).
func cases(events []*threadline.RunEvent) []string {
	names := make([]string, len(events))
	for i, ev := range events {
		names[i] = fmt.Sprintf("%T", ev.GetEvent())
	}
	return names
}

func TestPackedEventsMatchOneEventPerMessage(t *testing.T) {
	spec := &threadline.RunSpec{Prompt: threadline.Text("lookup grpc"), Checkpoints: true}
	packed := streamAll(t, dial(t), spec, 0)
	single := streamAll(t, dial(t, threadline.WithMaxEventsPerMessage(0)), spec, 0)

	checkSequence(t, packed)
	checkSequence(t, single)
	if got, want := strings.Join(cases(packed), " "), strings.Join(cases(single), " "); got != want {
		t.Errorf("events with the default:\n%s\nwith WithMaxEventsPerMessage(0):\n%s", got, want)
	}
	if packed[0].GetRunStarted() == nil {
		t.Errorf("first event %v, want run_started", packed[0])
	}
	if a, b := packed[len(packed)-1].GetResult(), single[len(single)-1].GetResult(); a.GetOutputJson() != b.GetOutputJson() {
		t.Errorf("outputs %q and %q", a.GetOutputJson(), b.GetOutputJson())
	}
}

func TestPausedReaderGetsEveryPackedEvent(t *testing.T) {
	// The demo agent echoes the prompt in 8-character deltas: about 2 000 events. A small HTTP/2
	// receive window (which also turns off BDP probing) makes a paused reader hold the server
	// back, so the events that pile up on the server arrive packed.
	var w wire
	c := dial(t, w.option(), threadline.WithDialOptions(grpc.WithInitialWindowSize(65535), grpc.WithInitialConnWindowSize(65535)))
	prompt := strings.Repeat("x", 16_000)
	events := streamAll(t, c, &threadline.RunSpec{Prompt: threadline.Text(prompt)}, time.Second)

	checkSequence(t, events)
	var text strings.Builder
	for _, ev := range events {
		text.WriteString(ev.GetPartStart().GetContent())
		text.WriteString(ev.GetPartDelta().GetContentDelta())
	}
	if got, want := text.String(), "You said: "+prompt; got != want {
		t.Errorf("rebuilt text has %d characters, want %d (%q...)", len(got), len(want), got[:min(len(got), 40)])
	}

	largest, total := 0, 0
	for _, resp := range w.responses {
		if resp.GetEvent() != nil {
			t.Fatalf("a response carries `event` while packing is on: %v", resp)
		}
		largest = max(largest, len(resp.GetEvents()))
		total += len(resp.GetEvents())
	}
	if total != len(events) {
		t.Errorf("%d events in %d responses, but the stream handed out %d", total, len(w.responses), len(events))
	}
	if largest != threadline.DefaultMaxEventsPerMessage {
		t.Errorf("%d events in %d responses, at most %d in one: want responses packed to the limit %d",
			total, len(w.responses), largest, threadline.DefaultMaxEventsPerMessage)
	}
}

func TestMaxEventsPerMessageIsSent(t *testing.T) {
	spec := &threadline.RunSpec{Prompt: threadline.Text("hello")}
	for _, tc := range []struct {
		name   string
		opts   []threadline.Option
		want   uint32
		packed bool // responses carry `events`, not `event`
	}{
		{"default", nil, threadline.DefaultMaxEventsPerMessage, true},
		{"off", []threadline.Option{threadline.WithMaxEventsPerMessage(0)}, 0, false},
		{"one", []threadline.Option{threadline.WithMaxEventsPerMessage(1)}, 1, false},
		{"above the server's limit", []threadline.Option{threadline.WithMaxEventsPerMessage(1000)}, 1000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w wire
			c := dial(t, append(tc.opts, w.option())...)
			events := streamAll(t, c, spec, 0)
			checkSequence(t, events)
			streamAll(t, c, spec, 0) // every StreamRun sends it

			if len(w.requests) != 2 {
				t.Fatalf("%d StreamRun requests recorded, want 2", len(w.requests))
			}
			for _, req := range w.requests {
				if req.GetMaxEventsPerMessage() != tc.want {
					t.Errorf("max_events_per_message = %d, want %d", req.GetMaxEventsPerMessage(), tc.want)
				}
			}
			for _, resp := range w.responses {
				if (resp.GetEvent() == nil) != tc.packed || (len(resp.GetEvents()) > 0) != tc.packed {
					t.Fatalf("response %v: want packed = %v", resp, tc.packed)
				}
			}
		})
	}
}

func TestResponseWithoutEventEndsTheStream(t *testing.T) {
	// The server never sends a response without events; the interceptor empties the second one.
	for _, n := range []uint32{0, threadline.DefaultMaxEventsPerMessage} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			w := wire{drop: func(i int) bool { return i == 1 }}
			c := dial(t, w.option(), threadline.WithMaxEventsPerMessage(n))
			s := c.StreamRun(t.Context(), &threadline.RunSpec{Prompt: threadline.Text("lookup grpc")})
			defer s.Close()
			received := 0
			for s.Receive() {
				received++
			}
			checkProtocolError(t, s.Err(), threadline.ErrNoEvent, "the server's response has no StreamRunResponse.event or .events")
			if s.Result() != nil {
				t.Errorf("result %v after the error", s.Result())
			}
			first := max(len(w.responses[0].GetEvents()), 1)
			if len(w.responses) != 2 || received != first {
				t.Errorf("%d events handed out from %d responses, want the %d of the first", received, len(w.responses), first)
			}
			if s.Receive() {
				t.Error("Receive after the error")
			}
		})
	}
}
