package threadline

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"

	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// ErrNoResult is what errors.Is matches in the *ProtocolError of a stream that ended cleanly
// without its terminal RunResult event, which a conforming server never does.
var ErrNoResult = errors.New("threadline: run stream ended without a result")

// ErrNoEvent is what errors.Is matches in the *ProtocolError of a StreamRun response that carried
// no event, which a conforming server never sends. It ends the stream and cancels the run.
var ErrNoEvent = errors.New("threadline: run stream response carried no event")

// RunStream is a streamed run, read like a bufio.Scanner:
//
//	s := c.StreamRun(ctx, spec)
//	defer s.Close()
//	for s.Receive() {
//		ev := s.Msg()
//		...
//	}
//	if err := s.Err(); err != nil { ... }
//
// The end of the stream is not an error: Err is nil after the terminal result arrived. Receive
// and Close must not be called concurrently.
//
// Receive hands out one event at a time, also when the server packed several into one response
// (WithMaxEventsPerMessage). A checkpoint candidate sent as a delta (CHECKPOINT_FORM_DELTA)
// arrives with its state's history data rebuilt and checked against the state's SHA-256, its
// history_delta left in place; a delta that does not rebuild ends the stream with a
// *ProtocolError (errors.Is ErrCheckpointDelta).
type RunStream struct {
	cancel  context.CancelFunc
	events  *eventReader
	msg     *RunEvent
	result  *RunResult
	err     error
	done    bool
	history candidateHistory // the base of the next delta checkpoint candidate
}

// StreamRun starts spec and returns its event stream. An error starting the call is reported by
// the stream's Err, after the first Receive returns false.
//
// When spec asks for checkpoints and leaves CheckpointForm unspecified, StreamRun sends
// CHECKPOINT_FORM_DELTA (spec itself is not changed), so each candidate carries only what the run
// added to the history. RunStream rebuilds every such candidate's history before handing it out:
// hosts see complete states either way. An explicit CheckpointForm is sent as given.
func (c *Client) StreamRun(ctx context.Context, spec *RunSpec) *RunStream {
	ctx, cancel := withDefaultTimeout(ctx, c.runTimeout)
	spec = withDeltaCheckpoints(spec)
	stream, err := c.svc.StreamRun(ctx, &threadlinev1.StreamRunRequest{Spec: spec, MaxEventsPerMessage: c.maxEvents})
	s := &RunStream{
		cancel:  cancel,
		events:  newEventReader(stream, "StreamRunResponse", wrap),
		history: candidateHistory{base: firstHistoryBase(spec)},
	}
	if err != nil {
		s.finish(wrap(err))
	}
	return s
}

// Receive advances to the next event, which Msg then returns. It returns false at the end of the
// stream or on an error; Err tells the two apart.
func (s *RunStream) Receive() bool {
	if s.done {
		return false
	}
	ev, err := s.next()
	if ev != nil {
		err = s.history.complete(ev)
	}
	if err != nil || ev == nil {
		s.finish(err)
		return false
	}
	s.msg = ev
	if r := s.msg.GetResult(); r != nil {
		s.result = r
	}
	return true
}

// next returns the next event. At the end of the stream it returns nil, with a *ProtocolError
// (ErrNoResult) when no result came.
func (s *RunStream) next() (*RunEvent, error) {
	ev, err := s.events.next()
	if ev == nil && err == nil && s.result == nil {
		return nil, noResult()
	}
	return ev, err
}

// noResult is the *ProtocolError of a stream that ended cleanly without its result.
func noResult() *ProtocolError {
	return protocolError(ErrNoResult, "the stream ended without its terminal result")
}

// packedResponse is a streamed response that carries one event in `event` (packing off), else
// one or more in `events`: StreamRunResponse and StreamThreadRunResponse.
type packedResponse interface {
	GetEvent() *RunEvent
	GetEvents() []*RunEvent
}

// eventReader hands out a stream's events one at a time, unpacking packed responses.
type eventReader struct {
	recv    func() (packedResponse, error)
	name    string            // the response message, for the *ProtocolError of an empty one
	wrap    func(error) error // turns a status error into the SDK's error
	pending []*RunEvent       // the events of the last response not handed out yet
}

// newEventReader reads the events of stream, whose responses are the message name; wrap turns
// its status errors into the SDK's.
func newEventReader[R any, P interface {
	*R
	packedResponse
}](stream grpc.ServerStreamingClient[R], name string, wrap func(error) error) *eventReader {
	recv := func() (packedResponse, error) {
		if stream == nil { // the call failed to start; nothing is read
			return nil, io.EOF
		}
		resp, err := stream.Recv()
		return P(resp), err
	}
	return &eventReader{recv: recv, name: name, wrap: wrap}
}

// next returns the rest of the last packed response first, then the first event of the next
// response; nil, nil at the end of the stream.
func (r *eventReader) next() (*RunEvent, error) {
	if len(r.pending) > 0 {
		ev := r.pending[0]
		r.pending = r.pending[1:]
		return ev, nil
	}
	resp, err := r.recv()
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	if err != nil {
		return nil, r.wrap(err)
	}
	if ev := resp.GetEvent(); ev != nil {
		return ev, nil
	}
	events := resp.GetEvents()
	if len(events) == 0 {
		return nil, protocolError(ErrNoEvent, "the server's response has no %s.event or .events", r.name)
	}
	r.pending = events[1:]
	return events[0], nil
}

// Msg returns the event the last successful Receive read.
func (s *RunStream) Msg() *RunEvent {
	return s.msg
}

// Result returns the run's terminal result once its event was received, else nil.
func (s *RunStream) Result() *RunResult {
	return s.result
}

// Err returns the error that ended the stream, or nil when it ended with its result. If the run
// failed after it started, the server may end the stream with an error status instead of a
// result; that is an *Error here. A *ProtocolError means the server's answer broke the contract.
func (s *RunStream) Err() error {
	return s.err
}

// Close ends the stream. Closing a stream before its result cancels the run on the server. It is
// safe to call more than once, and after the stream ended.
func (s *RunStream) Close() error {
	if !s.done {
		s.finish(nil)
	}
	return nil
}

func (s *RunStream) finish(err error) {
	s.done = true
	s.err = err
	s.events.pending = nil
	s.cancel()
}
