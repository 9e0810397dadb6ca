package threadline

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// Background runs (LIVE §3): StartThreadRun answers as soon as the run holds the thread, and the
// server drives the request to its end with no client, running its next attempt elsewhere if its
// server is lost. StartedRun follows it (a join), waits for its outcome, or cancels it.

// maxResultPoll caps the wait between two rounds of StartedRun.Result that found the request
// still running without events to follow (its log not recorded).
const maxResultPoll = 5 * time.Second

// StartedRun is a thread run started in the background (Threads.StartRun). Its accessors say
// how the server answered; Events follows the run, Result waits for its end, Cancel stops it. It
// is safe for concurrent use (each Events call returns a stream of its own).
type StartedRun struct {
	threads  *Threads
	threadID string
	spec     *threadlinev1.ThreadRunSpec // sent again when the outcome can only come from a retry
	runID    string
	revision int64
	status   ThreadRunStatus
	position int               // QUEUED: the place in the thread's queue when accepted (1 = next)
	outcome  *ThreadRunOutcome // set when the request had already finished (Replayed)
}

// ThreadID returns the thread the request runs on.
func (r *StartedRun) ThreadID() string { return r.threadID }

// RunID returns the attempt running the request when the server answered (or the one that ran
// it last, when Replayed); for a QUEUED request, the run ID its first attempt will run under.
// Every attempt's run ID names the request for Cancel.
func (r *StartedRun) RunID() string { return r.runID }

// RequestID returns the request's ID: StartRun with the same ThreadRun and this ID answers the
// same again (the running attempt, or the finished request's outcome), never a second run.
func (r *StartedRun) RequestID() string { return r.spec.GetRequestId() }

// Revision returns the head the run began from; when Replayed, its terminal checkpoint; when
// QUEUED, the head when it was accepted (it runs on whatever head its turn finds).
func (r *StartedRun) Revision() int64 { return r.revision }

// Status returns the request's status when the server answered: RUNNING while it goes on;
// QUEUED while it waits in the thread's queue (BusyEnqueue, BusyInterrupt, BusyRollback; QueuePosition says
// where); when
// Replayed, how it ended (COMPLETED, SUSPENDED, FAILED or CANCELLED).
func (r *StartedRun) Status() ThreadRunStatus { return r.status }

// QueuePosition returns the request's place in the thread's queue when the server answered QUEUED
// (1 = next to run); 0 when it was not queued.
func (r *StartedRun) QueuePosition() int { return r.position }

// Replayed reports whether the request had already finished: nothing ran this time, and Outcome
// holds its stored result.
func (r *StartedRun) Replayed() bool { return r.outcome != nil }

// Outcome returns the finished request's outcome when Replayed (Replayed true), else nil; Result
// waits for it.
func (r *StartedRun) Outcome() *ThreadRunOutcome {
	if r.outcome == nil {
		return nil
	}
	outcome := *r.outcome
	return &outcome
}

// StartRun starts the thread's next turn in the background (StartThreadRun) and returns once the
// run holds the thread, with RUNNING, its RunID and the Revision it began from; the server runs
// it to its end with no client, the next attempt on another replica (or the restarted server)
// if its server is lost, at most ServerInfo's max_run_attempts times. run is what Run takes
// (prompt or answers, RequestID, ExpectedRevision, ToolRecovery, ClientTools, UsageLimits,
// BusyStrategy; NoReconnect is ignored). UNAVAILABLE is retried as Run retries it, with the same
// request ID; the same request already running answers its current attempt, one still queued
// QUEUED again, one that finished answers Replayed with its Outcome. WithTimeout bounds each
// call, retries included.
//
// With BusyEnqueue on a busy thread it returns at once with QUEUED, its QueuePosition and the
// RunID its first attempt will run under; the request starts when its turn comes, and Events
// and Result wait for that. BusyInterrupt answers QUEUED too, first in the queue after earlier
// interrupting requests, and the running turn is stopped (it ends CANCELLED) so it runs next;
// BusyRollback likewise, and the stopped turn's commits are discarded before it runs.
// On a thread no run holds it starts at once.
//
//	started, err := c.Threads().StartRun(ctx, threadID, &threadline.ThreadRun{Text: "summarise the logs"})
//	...
//	outcome, err := started.Result(ctx) // later, from this process: how it ended
//
// The checks before the run are Run's, with the same errors (*ThreadBusyError,
// *RevisionConflictError, *ThreadNotSuspendedError, *RequestIDReusedError,
// *ThreadQueueFullError, ...); a retry of a request that ended with an error status gets that
// error again, e.g. *RequestInterruptedError (Attempts set when the server gave up after that
// many lost attempts).
func (t *Threads) StartRun(ctx context.Context, threadID string, run *ThreadRun) (*StartedRun, error) {
	spec, err := run.spec(threadID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := withDefaultTimeout(ctx, t.c.timeout)
	defer cancel()
	resp, err := t.startThreadRun(ctx, spec)
	if err != nil {
		return nil, err
	}
	started := &StartedRun{
		threads: t, threadID: threadID, spec: spec,
		runID: resp.GetRunId(), revision: resp.GetRevision(), status: resp.GetStatus(), position: int(resp.GetQueuePosition()),
	}
	if resp.GetReplayed() {
		if started.outcome, err = replayedOutcome(resp); err != nil {
			return nil, err
		}
	} else if started.runID == "" {
		return nil, missing("StartThreadRunResponse.run_id")
	}
	return started, nil
}

// startThreadRun sends StartThreadRun, retrying UNAVAILABLE up to RunRetries times (0.2 s,
// doubling) with the same spec.
func (t *Threads) startThreadRun(ctx context.Context, spec *threadlinev1.ThreadRunSpec) (*threadlinev1.StartThreadRunResponse, error) {
	req := &threadlinev1.StartThreadRunRequest{Spec: spec}
	backoff := runBackoff
	for attempt := 0; ; attempt++ {
		resp, err := t.svc.StartThreadRun(ctx, req)
		if err == nil {
			return resp, nil
		}
		err = threadErr(err)
		if CodeOf(err) != codes.Unavailable || attempt == RunRetries || !waitFor(ctx, backoff) {
			return nil, err
		}
		backoff *= 2
	}
}

// replayedOutcome is the outcome a replayed StartThreadRunResponse carries.
func replayedOutcome(resp *threadlinev1.StartThreadRunResponse) (*ThreadRunOutcome, error) {
	result, err := required(resp.GetResult(), "StartThreadRunResponse.result")
	if err != nil {
		return nil, err
	}
	return &ThreadRunOutcome{Result: result, Revision: resp.GetRevision(), Replayed: true}, nil
}

// Events follows the run (Threads.JoinRun), read like any ThreadRunStream; a QUEUED request's
// stream hands out nothing until it starts. With afterSequence nil it joins the request
// (JoinRun{RequestID}) from its latest attempt's first event, and follows its next attempt, from
// that attempt's run_started, when one is lost. With afterSequence k it joins the attempt RunID
// after its event k (JoinRun{RunID, AfterSequence}: a stream of it that broke after k continues
// so), which ends with *RunAttemptLostError if that attempt is lost. A finished request's events are replayed while its log is kept (else
// *RunEventsExpiredError; Result still reads the outcome). WithRunTimeout bounds the stream;
// closing it stops the events, not the run.
func (r *StartedRun) Events(ctx context.Context, afterSequence *uint64) *ThreadRunStream {
	if afterSequence == nil {
		return r.threads.JoinRun(ctx, r.threadID, JoinRun{RequestID: r.RequestID()})
	}
	after := *afterSequence
	return r.threads.JoinRun(ctx, r.threadID, JoinRun{RunID: r.runID, AfterSequence: &after})
}

// Result waits for the request's end, following its next attempts, and returns its outcome, the
// one Run returns: the result, the terminal Revision, and Replayed false when it was read from the
// run's own events, true when it came from a retry of the request. It joins the request to its
// end; when the join cannot give the outcome (the attempt was lost and the request was closed
// without its result: cancelled after its server was gone, interrupted, or ended with an error
// status; or the log is past its retention) it sends the same StartThreadRun again and returns
// its replayed outcome, or the error status it answers: e.g. *RequestInterruptedError (its
// Attempts say how many attempts a lost server ended). While the request still runs without a
// log to follow, it asks again, up to 5 s apart. A QUEUED request is waited for until it
// starts, then followed; one cancelled before its turn returns its CANCELLED result (Replayed).
// WithRunTimeout (or ctx's deadline) bounds the wait, the queue's included. A Replayed
// StartedRun returns its Outcome at once.
func (r *StartedRun) Result(ctx context.Context) (*ThreadRunOutcome, error) {
	if r.outcome != nil {
		return r.Outcome(), nil
	}
	ctx, cancel := withDefaultTimeout(ctx, r.threads.c.runTimeout)
	defer cancel()
	backoff := runBackoff
	for {
		s := r.threads.JoinRun(ctx, r.threadID, JoinRun{RequestID: r.RequestID()})
		outcome, err := s.Collect()
		_ = s.Close()
		if err == nil {
			return outcome, nil
		}
		var lost *RunAttemptLostError
		var expired *RunEventsExpiredError
		if !errors.As(err, &lost) && !errors.As(err, &expired) {
			return nil, err
		}
		resp, retryErr := r.threads.startThreadRun(ctx, r.spec)
		switch {
		case retryErr != nil:
			return nil, retryErr
		case resp.GetReplayed():
			return replayedOutcome(resp)
		}
		// Still running (its next attempt started, or it runs without a log): follow it again.
		if !waitFor(ctx, backoff) {
			if ctx.Err() != nil {
				return nil, FromError(status.FromContextError(ctx.Err()).Err())
			}
			return nil, err
		}
		backoff = min(backoff*2, maxResultPoll)
	}
}

// Cancel asks the request's run to stop (Threads.Cancel with RunID: any of its attempts' run
// IDs names the request); it ends CANCELLED with its progress committed, which Result then
// returns. It returns once the server recorded the cancellation, with the record's status:
// RUNNING while the run stops, CANCELLED when its server was gone and the record was closed at
// once, or how a request that had already ended ended. A request still waiting in the thread's
// queue is removed at once, CANCELLED: it never runs.
func (r *StartedRun) Cancel(ctx context.Context) (ThreadRunStatus, error) {
	return r.threads.Cancel(ctx, r.threadID, r.runID)
}
