package threadline_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	threadline "github.com/threadline-dev/threadline/clients/go"
	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// *ProtocolError: what the SDK returns when the server's answer breaks the contract. Each test
// provokes a real violation in the SDK's own code (the delta rebuilder, a real server's answers
// cut or stripped on the way in) and checks the whole model.

// checkProtocolError checks that err is a *ProtocolError saying message, a kind of *Error with
// codes.Internal and no reason, and that errors.Is matches kind (when not nil).
func checkProtocolError(t *testing.T, err error, kind error, message string) {
	t.Helper()
	var pe *threadline.ProtocolError
	if !errors.As(err, &pe) {
		t.Fatalf("err %v (%T): want a *ProtocolError", err, err)
	}
	if pe.Code() != codes.Internal || pe.Reason() != "" || pe.Message() != message {
		t.Errorf("Code, Reason, Message = %v, %q, %q; want Internal, \"\", %q", pe.Code(), pe.Reason(), pe.Message(), message)
	}
	if want := "internal: " + message; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	var e *threadline.Error
	if !errors.As(err, &e) {
		t.Fatal("errors.As finds no *Error in a *ProtocolError")
	}
	if e.Code() != codes.Internal || e.Reason() != "" || e.Domain() != "" || e.Metadata() != nil ||
		e.FieldViolations() != nil || len(e.Details()) != 0 || e.Message() != message {
		t.Errorf("the *Error it wraps: %v, reason %q, metadata %v, details %v", e, e.Reason(), e.Metadata(), e.Details())
	}
	if threadline.CodeOf(err) != codes.Internal || threadline.ReasonOf(err) != "" || status.Code(err) != codes.Internal {
		t.Errorf("CodeOf, ReasonOf, status.Code = %v, %q, %v", threadline.CodeOf(err), threadline.ReasonOf(err), status.Code(err))
	}
	if kind != nil && !errors.Is(err, kind) {
		t.Errorf("errors.Is(err, %v) is false", kind)
	}
	for _, other := range []error{threadline.ErrNoResult, threadline.ErrNoEvent, threadline.ErrCheckpointDelta} {
		if other != kind && errors.Is(err, other) {
			t.Errorf("errors.Is(err, %v) is true", other)
		}
	}
}

// deltaCandidate is a delta checkpoint candidate at sequence that rebuilds want from base
// (keeping keep bytes), with the SHA-256 of digestOf.
func deltaCandidate(sequence uint64, want, digestOf string, keep int) *threadline.RunEvent {
	sum := sha256.Sum256([]byte(digestOf))
	return &threadline.RunEvent{
		Sequence: sequence,
		Event: &threadlinev1.RunEvent_CheckpointCandidate{CheckpointCandidate: &threadlinev1.CheckpointCandidate{
			State:        &threadline.HarnessState{ThreadId: "thread_x", MessageHistory: &threadlinev1.MessageHistory{Sha256: sum[:]}},
			HistoryDelta: &threadlinev1.HistoryDelta{KeepBytes: uint64(keep), Append: want[keep:]},
		}},
	}
}

func TestDeltaThatDoesNotRebuildIsAProtocolError(t *testing.T) {
	base := `["a"]`
	// The delta rebuilds ["a","c"], but the state's digest is that of ["a","b"].
	_, err := threadline.RebuildHistory(base, deltaCandidate(7, `["a","c"]`, `["a","b"]`, 4))
	checkProtocolError(t, err, threadline.ErrCheckpointDelta,
		"the checkpoint candidate at sequence 7 does not rebuild: its rebuilt history does not match message_history.sha256")

	_, err = threadline.RebuildHistory("[]", deltaCandidate(3, `["a"]`, `["a"]`, 3))
	checkProtocolError(t, err, threadline.ErrCheckpointDelta,
		"the checkpoint candidate at sequence 3 does not rebuild: its history_delta keeps 3 bytes of a base that has 2")

	headless := deltaCandidate(9, "[]", "[]", 2)
	headless.GetCheckpointCandidate().State.MessageHistory = nil
	_, err = threadline.RebuildHistory("[]", headless)
	checkProtocolError(t, err, threadline.ErrCheckpointDelta,
		"the checkpoint candidate at sequence 9 does not rebuild: its history_delta has no state.message_history to rebuild")

	// The same delta with its own digest rebuilds.
	if data, err := threadline.RebuildHistory(base, deltaCandidate(8, `["a","c"]`, `["a","c"]`, 4)); err != nil || data != `["a","c"]` {
		t.Errorf("RebuildHistory = %q, %v", data, err)
	}
}

func TestStreamWithoutItsResultIsAProtocolError(t *testing.T) {
	// The real server's stream, ended cleanly in place of the response that carries the result.
	w := wire{cut: func(resp *threadlinev1.StreamRunResponse) bool { return resp.GetEvent().GetResult() != nil }}
	c := dial(t, w.option(), threadline.WithMaxEventsPerMessage(0))
	s := c.StreamRun(t.Context(), &threadline.RunSpec{Prompt: threadline.Text("lookup grpc")})
	defer s.Close()
	var names []string
	for s.Receive() {
		names = append(names, cases([]*threadline.RunEvent{s.Msg()})[0])
	}
	checkProtocolError(t, s.Err(), threadline.ErrNoResult, "the stream ended without its terminal result")
	if s.Result() != nil || len(names) == 0 || names[0] != "*threadlinev1.RunEvent_RunStarted" {
		t.Errorf("result %v, events %v: want run_started first and no result", s.Result(), names)
	}
	if s.Receive() {
		t.Error("Receive after the error")
	}
}

func TestResponseWithoutARequiredFieldIsAProtocolError(t *testing.T) {
	// The real server's answers, with the field each call must carry removed on the way in.
	strip := grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		switch r := reply.(type) {
		case *threadlinev1.RunResponse:
			r.Result = nil
		case *threadlinev1.NewStateResponse:
			r.State = nil
		case *threadlinev1.ForkStateResponse:
			r.State = nil
		case *threadlinev1.ValidateStateResponse:
			r.State = nil
		}
		return err
	})
	c := dial(t, threadline.WithDialOptions(strip))
	ctx := t.Context()
	_, err := c.Run(ctx, &threadline.RunSpec{Prompt: threadline.Text("hello")})
	checkProtocolError(t, err, nil, "the server's response has no RunResponse.result")
	_, err = c.NewState(ctx, "")
	checkProtocolError(t, err, nil, "the server's response has no NewStateResponse.state")

	state, err := dial(t).NewState(ctx, "") // a client without the interceptor
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ForkState(ctx, state, "")
	checkProtocolError(t, err, nil, "the server's response has no ForkStateResponse.state")
	_, err = c.ValidateState(ctx, state)
	checkProtocolError(t, err, nil, "the server's response has no ValidateStateResponse.state")
}
