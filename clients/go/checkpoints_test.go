package threadline_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	threadline "github.com/threadline-dev/threadline/clients/go"
	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// Checkpoint candidates against the real server: StreamRun asks for CHECKPOINT_FORM_DELTA when
// the spec leaves the form open, and RunStream hands out every candidate with its whole history.

const (
	formUnspecified = threadlinev1.CheckpointForm_CHECKPOINT_FORM_UNSPECIFIED
	formFull        = threadlinev1.CheckpointForm_CHECKPOINT_FORM_FULL
	formDelta       = threadlinev1.CheckpointForm_CHECKPOINT_FORM_DELTA
)

// candidates returns the checkpoint candidate events among events.
func candidates(events []*threadline.RunEvent) []*threadline.RunEvent {
	var out []*threadline.RunEvent
	for _, ev := range events {
		if ev.GetCheckpointCandidate() != nil {
			out = append(out, ev)
		}
	}
	return out
}

// wireCandidates returns the checkpoint candidates of the recorded responses, as the server sent them.
func wireCandidates(w *wire) []*threadline.RunEvent {
	var events []*threadline.RunEvent
	for _, resp := range w.responses {
		if ev := resp.GetEvent(); ev != nil {
			events = append(events, ev)
		}
		events = append(events, resp.GetEvents()...)
	}
	return candidates(events)
}

// messageCount is the number of messages in history data, a JSON array.
func messageCount(t *testing.T, data string) int64 {
	t.Helper()
	var messages []json.RawMessage
	if err := json.Unmarshal([]byte(data), &messages); err != nil {
		t.Fatalf("history data %.80q...: %v", data, err)
	}
	return int64(len(messages))
}

// checkComplete checks that a candidate the host received holds a complete state: data that
// hashes to its sha256 and has message_count messages, which the server accepts back.
func checkComplete(t *testing.T, c *threadline.Client, ev *threadline.RunEvent) {
	t.Helper()
	state := ev.GetCheckpointCandidate().GetState()
	h := state.GetMessageHistory()
	if sum := sha256.Sum256([]byte(h.GetData())); !bytes.Equal(sum[:], h.GetSha256()) {
		t.Errorf("candidate %d: data (%d bytes) hashes to %x, sha256 is %x", ev.GetSequence(), len(h.GetData()), sum, h.GetSha256())
	}
	if n := messageCount(t, h.GetData()); n != h.GetMessageCount() {
		t.Errorf("candidate %d: %d messages in data, message_count %d", ev.GetSequence(), n, h.GetMessageCount())
	}
	valid, err := c.ValidateState(t.Context(), state)
	if err != nil {
		t.Fatalf("candidate %d: ValidateState: %v", ev.GetSequence(), err)
	}
	if valid.State.GetMessageHistory().GetData() != h.GetData() {
		t.Errorf("candidate %d: the server re-encodes its history differently", ev.GetSequence())
	}
}

func TestCheckpointFormSent(t *testing.T) {
	for _, tc := range []struct {
		name        string
		checkpoints bool
		form        threadlinev1.CheckpointForm
		sent        threadlinev1.CheckpointForm
	}{
		{"default", true, formUnspecified, formDelta},
		{"full", true, formFull, formFull},
		{"delta", true, formDelta, formDelta},
		{"no checkpoints", false, formUnspecified, formUnspecified},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w wire
			c := dial(t, w.option())
			spec := &threadline.RunSpec{Prompt: threadline.Text("lookup grpc"), Checkpoints: tc.checkpoints, CheckpointForm: tc.form}
			before := proto.CloneOf(spec)
			events := streamAll(t, c, spec, 0)
			checkSequence(t, events)

			if !proto.Equal(spec, before) {
				t.Errorf("StreamRun changed the host's spec to %v", spec)
			}
			if len(w.requests) != 1 {
				t.Fatalf("%d StreamRun requests recorded", len(w.requests))
			}
			if got := w.requests[0].GetSpec().GetCheckpointForm(); got != tc.sent {
				t.Errorf("checkpoint_form sent = %v, want %v", got, tc.sent)
			}
			sent := wireCandidates(&w)
			got := candidates(events)
			if !tc.checkpoints {
				if len(sent)+len(got) != 0 {
					t.Errorf("%d candidates without checkpoints", len(got))
				}
				return
			}
			// Two model requests (tool call, then text), each started and completed.
			if len(got) < 4 || len(sent) != len(got) {
				t.Fatalf("%d candidates handed out, %d on the wire: want the same, at least 4", len(got), len(sent))
			}
			for i, ev := range sent {
				delta := ev.GetCheckpointCandidate().GetHistoryDelta()
				data := ev.GetCheckpointCandidate().GetState().GetMessageHistory().GetData()
				if tc.sent == formDelta && (delta == nil || data != "") {
					t.Errorf("candidate %d on the wire: history_delta %v and %d bytes of data, want a delta", i, delta, len(data))
				}
				if tc.sent == formFull && (delta != nil || data == "") {
					t.Errorf("candidate %d on the wire: history_delta %v and %d bytes of data, want the full state", i, delta, len(data))
				}
				// The host sees the delta too, and otherwise the same event.
				if !proto.Equal(got[i].GetCheckpointCandidate().GetHistoryDelta(), delta) {
					t.Errorf("candidate %d: history_delta %v handed out, %v sent", i, got[i].GetCheckpointCandidate().GetHistoryDelta(), delta)
				}
			}
			for _, ev := range got {
				checkComplete(t, c, ev)
			}
		})
	}
}

func TestDeltaCandidatesContinueTheThread(t *testing.T) {
	c := dial(t)
	events := streamAll(t, c, &threadline.RunSpec{Prompt: threadline.Text("lookup grpc"), Checkpoints: true}, 0)
	got := candidates(events)
	if len(got) < 4 {
		t.Fatalf("%d candidates", len(got))
	}
	for _, ev := range got {
		if ev.GetCheckpointCandidate().GetHistoryDelta() == nil {
			t.Fatalf("candidate %d was not sent as a delta", ev.GetSequence())
		}
		checkComplete(t, c, ev)
	}

	// The last candidate continues the thread: the next run's history extends its history.
	last := got[len(got)-1].GetCheckpointCandidate().GetState()
	next, err := c.Run(t.Context(), threadline.Continue(last, "and again"))
	if err != nil {
		t.Fatal(err)
	}
	if next.GetStatus() != threadline.StatusCompleted || next.GetThreadId() != last.GetThreadId() {
		t.Fatalf("continued run: status %v, thread %q, want COMPLETED on %q", next.GetStatus(), next.GetThreadId(), last.GetThreadId())
	}
	data, prev := next.GetState().GetMessageHistory().GetData(), last.GetMessageHistory().GetData()
	if !strings.HasPrefix(data, strings.TrimSuffix(prev, "]")) || next.GetState().GetMessageHistory().GetMessageCount() <= last.GetMessageHistory().GetMessageCount() {
		t.Errorf("continued history (%d messages) does not extend the candidate's (%d)",
			next.GetState().GetMessageHistory().GetMessageCount(), last.GetMessageHistory().GetMessageCount())
	}
}

func TestFirstDeltaCandidateEditsThePreviousState(t *testing.T) {
	c := dial(t)
	first, err := c.Run(t.Context(), &threadline.RunSpec{Prompt: threadline.Text("lookup grpc")})
	if err != nil || first.GetStatus() != threadline.StatusCompleted {
		t.Fatalf("first run: %v, %v", first.GetStatus(), err)
	}
	prev := first.GetState()

	// The history of the previous state as the server wrote it, and the same history re-indented
	// without its digest: the base is the data the host sent, whatever its bytes.
	var indented bytes.Buffer
	if err := json.Indent(&indented, []byte(prev.GetMessageHistory().GetData()), "", "  "); err != nil {
		t.Fatal(err)
	}
	reformatted := proto.CloneOf(prev)
	reformatted.MessageHistory.Data = indented.String()
	reformatted.MessageHistory.Sha256 = nil

	for name, state := range map[string]*threadline.HarnessState{"as written": prev, "re-indented": reformatted} {
		t.Run(name, func(t *testing.T) {
			var w wire
			c := dial(t, w.option())
			spec := threadline.Continue(state, "lookup again")
			spec.Checkpoints = true
			events := streamAll(t, c, spec, 0)
			got, sent := candidates(events), wireCandidates(&w)
			if len(got) < 4 || len(sent) != len(got) {
				t.Fatalf("%d candidates handed out, %d on the wire", len(got), len(sent))
			}
			base := state.GetMessageHistory().GetData()
			delta := sent[0].GetCheckpointCandidate().GetHistoryDelta()
			if delta.GetKeepBytes() == 0 || delta.GetKeepBytes() > uint64(len(base)) {
				t.Fatalf("first candidate keeps %d bytes of a %d-byte previous history: want a non-empty prefix", delta.GetKeepBytes(), len(base))
			}
			h := got[0].GetCheckpointCandidate().GetState().GetMessageHistory()
			if want := base[:delta.GetKeepBytes()] + delta.GetAppend(); h.GetData() != want {
				t.Errorf("first candidate's data is not the previous state's cut to keep_bytes plus append")
			}
			if h.GetMessageCount() < prev.GetMessageHistory().GetMessageCount() {
				t.Errorf("first candidate has %d messages, the previous state %d", h.GetMessageCount(), prev.GetMessageHistory().GetMessageCount())
			}
			for _, ev := range got {
				checkComplete(t, c, ev)
			}
			if last := got[len(got)-1].GetCheckpointCandidate().GetState(); last.GetThreadId() != prev.GetThreadId() {
				t.Errorf("candidate thread %q, want %q", last.GetThreadId(), prev.GetThreadId())
			}
		})
	}
}

func TestBrokenDeltaEndsTheStream(t *testing.T) {
	// The server never sends a delta that does not rebuild; the interceptor breaks the second
	// candidate.
	for name, tc := range map[string]struct {
		breakDelta func(d *threadlinev1.HistoryDelta)
		why        func(keep uint64, base int) string // the end of the error's message
	}{
		"keep_bytes beyond the base": {
			func(d *threadlinev1.HistoryDelta) { d.KeepBytes += 1 << 20 },
			func(keep uint64, base int) string {
				return fmt.Sprintf("its history_delta keeps %d bytes of a base that has %d", keep, base)
			},
		},
		"digest mismatch": {
			func(d *threadlinev1.HistoryDelta) { d.Append += " " },
			func(uint64, int) string { return "its rebuilt history does not match message_history.sha256" },
		},
	} {
		for _, n := range []uint32{0, threadline.DefaultMaxEventsPerMessage} {
			t.Run(fmt.Sprint(name, "/", n), func(t *testing.T) {
				var broken *threadline.RunEvent
				var keep uint64 // the broken delta's keep_bytes
				seen := 0
				w := wire{edit: func(resp *threadlinev1.StreamRunResponse) {
					for _, ev := range append([]*threadline.RunEvent{resp.GetEvent()}, resp.GetEvents()...) {
						if d := ev.GetCheckpointCandidate().GetHistoryDelta(); d != nil {
							if seen++; seen == 2 {
								tc.breakDelta(d)
								broken, keep = ev, d.GetKeepBytes()
							}
						}
					}
				}}
				c := dial(t, w.option(), threadline.WithMaxEventsPerMessage(n))
				s := c.StreamRun(t.Context(), &threadline.RunSpec{Prompt: threadline.Text("lookup grpc"), Checkpoints: true})
				defer s.Close()
				var events []*threadline.RunEvent
				for s.Receive() {
					events = append(events, s.Msg())
				}
				if broken == nil {
					t.Fatal("no second delta candidate arrived")
				}
				// The base is the first candidate's history.
				base := candidates(events)[0].GetCheckpointCandidate().GetState().GetMessageHistory().GetData()
				checkProtocolError(t, s.Err(), threadline.ErrCheckpointDelta, fmt.Sprintf(
					"the checkpoint candidate at sequence %d does not rebuild: %s", broken.GetSequence(), tc.why(keep, len(base))))
				if s.Result() != nil {
					t.Errorf("result %v after the error", s.Result())
				}
				// Every event before the broken candidate was handed out, the first candidate complete.
				if uint64(len(events)) != broken.GetSequence() || s.Msg() != events[len(events)-1] {
					t.Errorf("%d events handed out before the candidate at sequence %d", len(events), broken.GetSequence())
				}
				checkComplete(t, c, candidates(events)[0])
				if s.Receive() {
					t.Error("Receive after the error")
				}
			})
		}
	}
}
