package threadline

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// ReconnectRetries is how many times in a row a ThreadRunStream or WatchThread reconnects after a
// transport failure without receiving anything in between, 0.2 s apart and doubling.
const ReconnectRetries = 5

// ErrStreamClosed is what errors.Is matches in the error of Collect on a stream closed before
// its result.
var ErrStreamClosed = errors.New("threadline: the stream was closed before its result")

// ThreadRunStream is a streamed thread run (Threads.Stream) or a joined one (Threads.JoinRun),
// read like RunStream:
//
//	s := c.Threads().Stream(ctx, threadID, &threadline.ThreadRun{Text: "lookup grpc"})
//	defer s.Close()
//	for s.Receive() {
//		handle(s.Msg())
//	}
//	outcome, err := s.Collect() // result, revision, replayed
//
// Closing it, its context or a dropped connection ends the call, not the run: the run goes on to
// its terminal commit on the server. The stream reconnects by itself (unless NoReconnect): after
// a transport failure (UNAVAILABLE, a broken connection) it joins the attempt it follows from the
// last sequence it handed out, so no event comes twice and none is lost; see Threads.Stream and
// Threads.JoinRun for what each does when the attempt is lost. Receive, Collect and Close must not
// be called concurrently.
type ThreadRunStream struct {
	ctx       context.Context // the call's, for every reconnect
	cancel    context.CancelFunc
	events    *eventReader
	threads   *Threads
	threadID  string
	requestID string
	msg       *RunEvent
	result    *RunResult
	revision  int64
	replayed  bool
	err       error
	done      bool
	closed    bool // Close ended the stream before its end

	// Reconnecting; reopen is nil when the stream does not reconnect.
	reopen   func(lost *RunAttemptLostError) (*eventReader, bool)
	runID    string // the attempt the last event came from
	last     uint64 // the sequence of the last event handed out, when seen
	seen     bool
	failures int // reconnects since the last event
	lost     int // attempts lost
}

// RequestID returns the request's ID: send it again (same run) to retry without running twice.
func (s *ThreadRunStream) RequestID() string { return s.requestID }

// ThreadID returns the thread the request runs.
func (s *ThreadRunStream) ThreadID() string { return s.threadID }

// RunID returns the attempt the stream follows (the run ID of its last event); empty before the
// first event.
func (s *ThreadRunStream) RunID() string { return s.runID }

// LastSequence returns the sequence of the last event Receive handed out, and false before the
// first: JoinRun with it as AfterSequence continues the stream elsewhere.
func (s *ThreadRunStream) LastSequence() (uint64, bool) { return s.last, s.seen }

// Receive advances to the next event, which Msg then returns. It returns false at the end of the
// stream or on an error; Err tells the two apart.
func (s *ThreadRunStream) Receive() bool {
	if s.done {
		return false
	}
	for {
		ev, err := s.events.next()
		if ev == nil && err == nil && s.result == nil {
			err = noResult()
		}
		if err != nil && s.reconnect(err) {
			continue
		}
		if err != nil || ev == nil {
			s.finish(err)
			return false
		}
		if ev.GetRunId() == s.runID && s.seen && ev.GetSequence() <= s.last {
			continue // already handed out (a server never repeats one; a reconnect must not either)
		}
		if ev.GetRunId() != s.runID { // the first event, or the first of a next attempt
			s.runID, s.seen, s.lost = ev.GetRunId(), false, 0
		}
		s.last, s.seen, s.failures = ev.GetSequence(), true, 0
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
}

// reconnect opens the stream again after err, when err is one a reconnect cures: UNAVAILABLE (the
// connection broke, the server is draining, the store is down) up to ReconnectRetries times in a
// row without an event or RESOURCE_EXHAUSTED LISTENER_TOO_SLOW; or RUN_ATTEMPT_LOST, up to
// ReconnectRetries times per attempt, when reopen follows another attempt. It waits before each try (0.2 s, doubling) and reports whether the
// stream goes on.
func (s *ThreadRunStream) reconnect(err error) bool {
	if s.reopen == nil || s.ctx.Err() != nil {
		return false
	}
	var lost *RunAttemptLostError
	var slow *ListenerTooSlowError
	switch {
	case errors.As(err, &lost):
		if s.lost++; s.lost > ReconnectRetries || !waitFor(s.ctx, runBackoff<<(s.lost-1)) {
			return false
		}
	case CodeOf(err) == codes.Unavailable || errors.As(err, &slow):
		if s.failures++; s.failures > ReconnectRetries || !waitFor(s.ctx, runBackoff<<(s.failures-1)) {
			return false
		}
		lost = nil
	default:
		return false
	}
	events, ok := s.reopen(lost)
	if ok {
		s.events = events
	}
	return ok
}

// join opens JoinThreadRun for req on the stream's context.
func (s *ThreadRunStream) join(req *threadlinev1.JoinThreadRunRequest) *eventReader {
	req.ThreadId, req.MaxEventsPerMessage = s.threadID, s.threads.c.maxEvents
	stream, err := s.threads.svc.JoinThreadRun(s.ctx, req)
	return openedReader(stream, "JoinThreadRunResponse", err)
}

// rejoin opens a join of the attempt the stream follows, after its last event; false before the
// first event.
func (s *ThreadRunStream) rejoin() (*eventReader, bool) {
	if !s.seen {
		return nil, false
	}
	after := s.last
	return s.join(&threadlinev1.JoinThreadRunRequest{RunId: s.runID, AfterSequence: &after}), true
}

// openedReader reads stream, or fails with err when the call did not start.
func openedReader[R any, P interface {
	*R
	packedResponse
}](stream grpc.ServerStreamingClient[R], name string, err error) *eventReader {
	if err != nil {
		return &eventReader{recv: func() (packedResponse, error) { return nil, err }, name: name, wrap: threadErr}
	}
	return newEventReader[R, P](stream, name, threadErr)
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
