package threadline

import (
	"context"
	"errors"
	"io"
	"iter"

	"google.golang.org/grpc/codes"

	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// Live runs (LIVE §2): every event a thread run streams is recorded under its attempt with the
// sequence it carries, so a host can follow a run it did not start, or continue one whose stream
// broke, from any replica (JoinRun), and watch a thread change (WatchThread).

// JoinRun names the attempt Threads.JoinRun follows and where it starts. The zero value follows
// the run holding the thread's lease, else the thread's latest run, from its first event.
type JoinRun struct {
	// RunID is the attempt to follow (RunEvent.RunId, Thread.Lease.RunId); any attempt's.
	RunID string
	// RequestID follows that request's latest attempt, and its next one when that attempt is
	// lost. With RunID, both must name one request.
	RequestID string
	// AfterSequence sends only the events with a greater sequence (a stream that broke after
	// sequence k continues with k); nil = from the first event (sequence 0).
	AfterSequence *uint64
	// NoReconnect keeps the join from reconnecting: the first error ends it.
	NoReconnect bool
}

// JoinRun follows one attempt of a thread run (JoinThreadRun): the events it already wrote, then
// each new one as it is written, no gap and no repeat, ending as the run does (its result, or the
// run's own error status). A finished run in retention is replayed the same way. The events are
// those Stream hands out, with the same sequences and contents, and the stream is read the same
// way (Receive, Msg, Collect); WithRunTimeout bounds it.
//
// It reconnects by itself unless join.NoReconnect: after a transport failure (UNAVAILABLE, a
// broken connection) it joins again from the last sequence it handed out. Joined by RequestID,
// when the attempt is lost (RUN_ATTEMPT_LOST) it follows the request's next attempt once one runs,
// from that attempt's first event (a new RunID); it waits for one up to ReconnectRetries times
// (0.2 s, doubling), then ends with the *RunAttemptLostError, at once when its RequestStatus says
// the request was closed with no next attempt (cancelled after its server was gone, interrupted:
// a retry of the request answers its outcome). Joined by RunID only, a lost attempt ends the
// stream with it.
//
// Other ends: *RunEventsExpiredError (the log is past its retention or was never recorded: a
// retry of its request replays the result), *RunNotFoundError, *ThreadNotFoundError,
// *FollowerLimitReachedError, and codes.Unimplemented from a server started with --event-log off.
func (t *Threads) JoinRun(ctx context.Context, threadID string, join JoinRun) *ThreadRunStream {
	ctx, cancel := withDefaultTimeout(ctx, t.c.runTimeout)
	s := &ThreadRunStream{ctx: ctx, cancel: cancel, threads: t, threadID: threadID, requestID: join.RequestID}
	first := func() *threadlinev1.JoinThreadRunRequest {
		req := &threadlinev1.JoinThreadRunRequest{RunId: join.RunID, RequestId: join.RequestID}
		if join.AfterSequence != nil {
			after := *join.AfterSequence
			req.AfterSequence = &after
		}
		return req
	}
	if !join.NoReconnect {
		s.reopen = func(lost *RunAttemptLostError) (*eventReader, bool) {
			switch {
			case lost == nil:
				if events, ok := s.rejoin(); ok {
					return events, true
				}
				return s.join(first()), true
			case join.RequestID == "":
				return nil, false
			case lost.NextRunID != "":
				return s.join(&threadlinev1.JoinThreadRunRequest{RunId: lost.NextRunID, RequestId: join.RequestID}), true
			case requestClosed(lost.RequestStatus):
				return nil, false // no next attempt will run
			default:
				// The request's latest attempt: the lost one again (its events are not handed out
				// twice) until a next one runs.
				return s.join(&threadlinev1.JoinThreadRunRequest{RequestId: join.RequestID}), true
			}
		}
	}
	s.events = s.join(first())
	return s
}

// requestClosed reports whether a request with this status has ended: no next attempt will run.
func requestClosed(status ThreadRunStatus) bool {
	switch status {
	case threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_COMPLETED,
		threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_SUSPENDED,
		threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_FAILED,
		threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_CANCELLED,
		threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_ERROR,
		threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_INTERRUPTED:
		return true
	}
	return false
}

// ThreadUpdate is one message of WatchThread: the thread (BASIC view) as it is now, its
// ChangeSequence, and the Changes since the previous message.
type ThreadUpdate = threadlinev1.WatchThreadResponse

// ThreadChange is what changed in a thread (ThreadUpdate.Changes).
type ThreadChange = threadlinev1.ThreadChange

// The ThreadChange values.
const (
	// ChangeSnapshot is the first message of a watch (and of each reconnect): the thread as it is.
	ChangeSnapshot = threadlinev1.ThreadChange_THREAD_CHANGE_SNAPSHOT
	// ChangeCommitted: a checkpoint was committed, the head revision grew.
	ChangeCommitted = threadlinev1.ThreadChange_THREAD_CHANGE_COMMITTED
	// ChangeRunStarted: a run took the thread's lease.
	ChangeRunStarted = threadlinev1.ThreadChange_THREAD_CHANGE_RUN_STARTED
	// ChangeRunEnded: the run holding the lease released it.
	ChangeRunEnded = threadlinev1.ThreadChange_THREAD_CHANGE_RUN_ENDED
	// ChangeRolledBack: the new head is a ROLLED_BACK checkpoint.
	ChangeRolledBack = threadlinev1.ThreadChange_THREAD_CHANGE_ROLLED_BACK
	// ChangeQueue: the thread's queue of waiting requests changed.
	ChangeQueue = threadlinev1.ThreadChange_THREAD_CHANGE_QUEUE
	// ChangeLeaseExpired: the lease expired without a release (its server is gone).
	ChangeLeaseExpired = threadlinev1.ThreadChange_THREAD_CHANGE_LEASE_EXPIRED
)

// WatchThread watches a thread (WatchThread): first a snapshot (Changes = [ChangeSnapshot]), then
// one update per change of what Thread shows: a commit, a run starting or ending, a rollback, the
// queue, a lease expiring. A slow reader gets fewer, newer updates (changes merged, several kinds
// in one), never a backlog.
//
//	for u, err := range c.Threads().WatchThread(ctx, threadID) {
//		if err != nil { ... }
//		fmt.Println(u.GetChangeSequence(), u.GetChanges(), u.GetThread().GetStatus())
//	}
//
// After a transport failure (UNAVAILABLE, a broken connection) it reconnects, up to
// ReconnectRetries times in a row, and yields the new snapshot. It ends when ctx ends or the loop
// stops (no error), or with an error yielded once, last: *ThreadNotFoundError when the thread is
// deleted, *FollowerLimitReachedError, or the transport's error after the last retry. No default
// timeout applies.
func (t *Threads) WatchThread(ctx context.Context, threadID string) iter.Seq2[*ThreadUpdate, error] {
	return func(yield func(*ThreadUpdate, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		failures := 0
		for {
			err := t.watchOnce(ctx, threadID, func(u *ThreadUpdate) bool {
				failures = 0
				return yield(u, nil)
			})
			if errors.Is(err, errStopped) || ctx.Err() != nil {
				return
			}
			if err == nil { // the server ended the watch (not a conforming server's way)
				return
			}
			if CodeOf(err) == codes.Unavailable {
				if failures++; failures <= ReconnectRetries && waitFor(ctx, runBackoff<<(failures-1)) {
					continue
				}
				if ctx.Err() != nil {
					return
				}
			}
			yield(nil, err)
			return
		}
	}
}

// errStopped is watchOnce's error when the reader stopped the loop.
var errStopped = errors.New("threadline: watch stopped")

// watchOnce reads one WatchThread call, handing each update to yield; nil when the server ended it.
func (t *Threads) watchOnce(ctx context.Context, threadID string, yield func(*ThreadUpdate) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := t.svc.WatchThread(ctx, &threadlinev1.WatchThreadRequest{ThreadId: threadID})
	if err != nil {
		return threadErr(err)
	}
	for {
		u, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return threadErr(err)
		}
		if !yield(u) {
			return errStopped
		}
	}
}
