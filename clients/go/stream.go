package threadline

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"

	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// ErrNoResult reports a stream that ended cleanly without its terminal RunResult event, which a
// conforming server never does.
var ErrNoResult = errors.New("threadline: run stream ended without a result")

// ErrNoEvent reports a StreamRun response that carried no event, which a conforming server never
// sends. It ends the stream and cancels the run.
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
// (WithMaxEventsPerMessage).
type RunStream struct {
	cancel  context.CancelFunc
	stream  grpc.ServerStreamingClient[threadlinev1.StreamRunResponse]
	pending []*RunEvent // the events of the last response that Receive has not handed out yet
	msg     *RunEvent
	result  *RunResult
	err     error
	done    bool
}

// StreamRun starts spec and returns its event stream. An error starting the call is reported by
// the stream's Err, after the first Receive returns false.
func (c *Client) StreamRun(ctx context.Context, spec *RunSpec) *RunStream {
	ctx, cancel := withDefaultTimeout(ctx, c.runTimeout)
	stream, err := c.svc.StreamRun(ctx, &threadlinev1.StreamRunRequest{Spec: spec, MaxEventsPerMessage: c.maxEvents})
	s := &RunStream{cancel: cancel, stream: stream}
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
	if len(s.pending) > 0 {
		s.msg, s.pending = s.pending[0], s.pending[1:]
	} else {
		resp, err := s.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if s.result == nil {
					s.finish(ErrNoResult)
				} else {
					s.finish(nil)
				}
			} else {
				s.finish(wrap(err))
			}
			return false
		}
		// One event in `event` (packing off), else one or more in `events`.
		if ev := resp.GetEvent(); ev != nil {
			s.msg = ev
		} else if events := resp.GetEvents(); len(events) > 0 {
			s.msg, s.pending = events[0], events[1:]
		} else {
			s.finish(ErrNoEvent)
			return false
		}
	}
	if r := s.msg.GetResult(); r != nil {
		s.result = r
	}
	return true
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
// result; that is an *Error here.
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
	s.pending = nil
	s.cancel()
}
