package threadline

import (
	"context"
	"errors"
)

// ErrStreamClosed is what errors.Is matches in the error of Collect on a stream closed before
// its result.
var ErrStreamClosed = errors.New("threadline: the stream was closed before its result")

// ThreadRunStream is a streamed thread run (Threads.Stream), read like RunStream:
//
//	s := c.Threads().Stream(ctx, threadID, &threadline.ThreadRun{Text: "lookup grpc"})
//	defer s.Close()
//	for s.Receive() {
//		handle(s.Msg())
//	}
//	outcome, err := s.Collect() // result, revision, replayed
//
// Closing it, its context or a dropped connection ends the call, not the run: the run goes on to
// its terminal commit on the server. To learn its outcome, send the same run again with
// RequestID set to the stream's RequestID; to stop it, Threads.Cancel. Receive, Collect and
// Close must not be called concurrently.
type ThreadRunStream struct {
	cancel    context.CancelFunc
	events    *eventReader
	threadID  string
	requestID string
	msg       *RunEvent
	result    *RunResult
	revision  int64
	replayed  bool
	err       error
	done      bool
	closed    bool // Close ended the stream before its end
}

// RequestID returns the request's ID: send it again (same run) to retry without running twice.
func (s *ThreadRunStream) RequestID() string { return s.requestID }

// ThreadID returns the thread the request runs.
func (s *ThreadRunStream) ThreadID() string { return s.threadID }

// Receive advances to the next event, which Msg then returns. It returns false at the end of the
// stream or on an error; Err tells the two apart.
func (s *ThreadRunStream) Receive() bool {
	if s.done {
		return false
	}
	ev, err := s.events.next()
	if ev == nil && err == nil && s.result == nil {
		err = noResult()
	}
	if err != nil || ev == nil {
		s.finish(err)
		return false
	}
	s.msg = ev
	if c := ev.GetThreadCommitted(); c != nil {
		s.revision = c.GetRevision()
		s.replayed = s.replayed || c.GetReplayed()
	}
	if r := ev.GetResult(); r != nil {
		s.result = r
	}
	return true
}

// Msg returns the event the last successful Receive read.
func (s *ThreadRunStream) Msg() *RunEvent { return s.msg }

// Result returns the run's terminal result once its event was received, else nil.
func (s *ThreadRunStream) Result() *RunResult { return s.result }

// Outcome returns the run's outcome once its result was received, else nil.
func (s *ThreadRunStream) Outcome() *ThreadRunOutcome {
	if s.result == nil {
		return nil
	}
	return &ThreadRunOutcome{Result: s.result, Revision: s.revision, Replayed: s.replayed}
}

// Collect reads the remaining events and returns the run's outcome. Its error is Err, or one
// matching ErrStreamClosed when Close ended the stream before its result.
func (s *ThreadRunStream) Collect() (*ThreadRunOutcome, error) {
	for s.Receive() {
	}
	if s.err != nil {
		return nil, s.err
	}
	if s.result == nil && s.closed {
		return nil, ErrStreamClosed
	}
	return s.Outcome(), nil
}

// Err returns the error that ended the stream, or nil when it ended with its result (or Close
// ended it).
func (s *ThreadRunStream) Err() error { return s.err }

// Close stops reading and ends the call; the run itself goes on on the server. It is safe to
// call more than once, and after the stream ended.
func (s *ThreadRunStream) Close() error {
	if !s.done {
		s.closed = true
		s.finish(nil)
	}
	return nil
}

func (s *ThreadRunStream) finish(err error) {
	s.done = true
	s.err = err
	if s.events != nil {
		s.events.pending = nil
	}
	s.cancel()
}
