package threadline

import (
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// The threads' reasons (THREADS §3) each have an error type of their own, carrying the reason's
// metadata as fields. Every one wraps the *Error it came from, so errors.As with an *Error,
// ReasonOf, CodeOf and status.Code see it like any other server error; errors.As with, say, a
// *ThreadBusyError picks the reason out and reads its fields:
//
//	var busy *threadline.ThreadBusyError
//	if errors.As(err, &busy) {
//		_, err = c.Threads().Cancel(ctx, threadID, busy.RunID)
//	}
//
// Every other reason stays a plain *Error: branch on ReasonOf for those.

// threadError is the part every typed thread error shares: the *Error behind it.
type threadError struct{ err *Error }

// Error returns the *Error's text: "<code>: <REASON>: <message>".
func (e threadError) Error() string { return e.err.Error() }

// Unwrap returns the *Error, so errors.As, ReasonOf and CodeOf look through the typed error.
func (e threadError) Unwrap() error { return e.err }

// Code returns the gRPC status code.
func (e threadError) Code() codes.Code { return e.err.Code() }

// Reason returns the ErrorInfo reason, e.g. ReasonThreadBusy.
func (e threadError) Reason() string { return e.err.Reason() }

// Message returns the status message (for people; branch on the type or Reason instead).
func (e threadError) Message() string { return e.err.Message() }

// Metadata returns a copy of the ErrorInfo metadata.
func (e threadError) Metadata() map[string]string { return e.err.Metadata() }

// GRPCStatus returns the underlying status, so status.Code works on the typed error.
func (e threadError) GRPCStatus() *status.Status { return e.err.GRPCStatus() }

// ThreadNotFoundError is NOT_FOUND THREAD_NOT_FOUND: no thread has this ID.
type ThreadNotFoundError struct{ threadError }

// CheckpointNotFoundError is NOT_FOUND CHECKPOINT_NOT_FOUND: the thread has no checkpoint with
// this revision.
type CheckpointNotFoundError struct{ threadError }

// RunNotFoundError is NOT_FOUND RUN_NOT_FOUND: Cancel named a run this thread never had.
type RunNotFoundError struct{ threadError }

// ThreadExistsError is ALREADY_EXISTS THREAD_EXISTS: Create or Fork with a thread ID in use.
type ThreadExistsError struct{ threadError }

// RequestIDReusedError is INVALID_ARGUMENT REQUEST_ID_REUSED: the thread already used this
// request ID for a different request. A retry must repeat its request exactly (prompt, answers,
// expected revision, busy strategy); a new request needs a new ID. Its fields say what the
// original request did (LIVE §5.5), and Differs in which parts this one differs from it.
type RequestIDReusedError struct {
	threadError
	// RunID is the original request's last attempt; empty when not sent.
	RunID string
	// Revision is the last checkpoint the original request committed; 0 when it committed none
	// (or not sent).
	Revision int64
	// Status is the status of the original request's record (e.g. COMPLETED, RUNNING, QUEUED);
	// unspecified when not sent.
	Status ThreadRunStatus

	differs string // the "differs" metadata, as sent
	hasDiff bool   // whether "differs" was sent
}

// Differs returns the parts in which this request differs from the original, in this order: a
// subset of "prompt", "answers", "expected_revision", "busy_strategy". It is false when the server
// cannot tell ("unknown": the original's record was made by an older server, which kept no part
// digests) or sent no "differs" (an older server).
func (e *RequestIDReusedError) Differs() ([]string, bool) {
	if !e.hasDiff || e.differs == "unknown" {
		return nil, false
	}
	if e.differs == "" {
		return []string{}, true
	}
	return strings.Split(e.differs, ","), true
}

// ThreadNotSuspendedError is FAILED_PRECONDITION THREAD_NOT_SUSPENDED: answers for a thread that
// is not SUSPENDED (with BusyEnqueue or BusyInterrupt too: answers are never queued), or, with
// BusyRollback, answers when the checkpoint the running request began from waits on no batch
// (BeganAt then). AnsweredBy names who consumed the batch these answers were probably for.
type ThreadNotSuspendedError struct {
	threadError
	// ThreadID is the thread; empty when not sent.
	ThreadID string
	// Status is the thread's status when the server checked; unspecified when not sent.
	Status ThreadStatus
	// BeganAt is, for a BusyRollback refusal, the revision the running request began from; 0
	// otherwise.
	BeganAt    int64
	answeredBy AnsweredBy
}

// AnsweredBy is the request that last consumed a thread's pending batch (LIVE §5.5), as a
// *ThreadNotSuspendedError names it.
type AnsweredBy struct {
	// RequestID is the request that consumed the batch.
	RequestID string
	// Revision is the SUSPENDED checkpoint whose batch it consumed.
	Revision int64
	// How is "answers" (it answered the batch) or "prompt" (a prompt without answers continued
	// the thread, the batch left unanswered: see UnansweredApprovalMessage).
	How string
	// RunRevision is the last checkpoint that request committed; 0 when none.
	RunRevision int64
	// Matches is true when the refused answers name exactly that batch's call IDs: they were for
	// that batch, already consumed (e.g. a retry under a new request ID whose first try went through).
	Matches bool
}

// AnsweredBy returns the request that last consumed a pending batch of the thread, and the
// batch's SUSPENDED revision. It is false when none did since a rollback restored one, when the
// refusal is a BusyRollback one (BeganAt), or when the server is older and does not say.
func (e *ThreadNotSuspendedError) AnsweredBy() (AnsweredBy, bool) {
	return e.answeredBy, e.answeredBy.RequestID != ""
}

// RequestInterruptedError is FAILED_PRECONDITION REQUEST_INTERRUPTED: a retry of a request whose
// run another request superseded (its holder was gone), or a background request (StartRun) the
// server gave up on after its attempts' servers were lost --max-run-attempts times, so this
// request never finishes. Revision tells the host whether its input reached the thread.
type RequestInterruptedError struct {
	threadError
	// RunID is the interrupted run (its last attempt).
	RunID string
	// Revision is the last checkpoint the interrupted run committed; 0 when it committed none.
	Revision int64
	// Attempts is how many attempts of a background request ended by a lost server when the
	// server closed it; 0 for a request another one superseded (not sent).
	Attempts int64
}

// ThreadBusyError is ABORTED THREAD_BUSY: another run holds the thread's lease, or requests wait
// in its queue (their turn comes first; BusyEnqueue would wait with them). When RequestID is the
// request just sent, that request's own run is still going (e.g. a retry after a dropped
// connection): retry later with the same ID to get its outcome.
type ThreadBusyError struct {
	threadError
	// RunID is the run holding the thread (Cancel takes it); when the queue holds the thread (no
	// lease), the queue head's run ID.
	RunID string
	// RequestID is the request that run serves; when the queue holds the thread, the queue head's.
	RequestID string
	// LeaseExpiresAt is when the holder's lease expires unless renewed, by the store's clock;
	// the zero time when the server sent none (the queue, not a lease, holds the thread).
	LeaseExpiresAt time.Time
	// QueueLength is how many requests wait in the thread's queue; 0 when none (or not sent).
	QueueLength int64
}

// IsOwn reports whether the request holding the thread (or, when the queue holds it, the queue's
// head) is requestID: that request's own run is still going, so a retry later with the same ID
// gets its outcome, while any other request waits its turn. False for an empty requestID.
func (e *ThreadBusyError) IsOwn(requestID string) bool {
	return requestID != "" && e.RequestID == requestID
}

// ThreadQueueFullError is RESOURCE_EXHAUSTED THREAD_QUEUE_FULL: a BusyEnqueue, BusyInterrupt or
// BusyRollback request found the thread's queue full (Limit requests waiting, the server's --max-queued-runs). Nothing was
// written: try again once the queue moved (Thread.Queue).
type ThreadQueueFullError struct {
	threadError
	// ThreadID is the thread whose queue is full.
	ThreadID string
	// Limit is the server's --max-queued-runs (ThreadStoreInfo.max_queued_runs); 0 when not sent.
	Limit int64
	// QueueLength is how many requests wait in the thread's queue; 0 when not sent.
	QueueLength int64
}

// RevisionConflictError is ABORTED REVISION_CONFLICT: the expected revision is not the head.
type RevisionConflictError struct {
	threadError
	// CurrentRevision is the head's revision when the server checked; 0 when not sent.
	CurrentRevision int64
}

// LeaseLostError is ABORTED LEASE_LOST: the server lost the thread's lease before or during the
// run. The call ended with no result; nothing after the run's last commit reached the thread,
// and the next run recovers it.
type LeaseLostError struct{ threadError }

// StoreUnavailableError is UNAVAILABLE STORE_UNAVAILABLE: the thread store cannot be reached or
// written. Threads.Run retries it like any UNAVAILABLE.
type StoreUnavailableError struct{ threadError }

// ListenerTooSlowError is RESOURCE_EXHAUSTED LISTENER_TOO_SLOW: a stream fell more than Backlog
// events behind its thread run and was dropped. The events before it arrived in order, and the
// run goes on and commits: send the same request again (RequestID) for its outcome once the run
// ended, which the server replays.
type ListenerTooSlowError struct {
	threadError
	// ThreadID is the thread of the run.
	ThreadID string
	// RunID is the run that goes on (Cancel takes it).
	RunID string
	// RequestID is the request that run serves: send it again for the outcome.
	RequestID string
	// Backlog is how many events the server keeps for a caller that has not taken them; 0 when
	// not sent.
	Backlog int64
}

// RunAttemptLostError is ABORTED RUN_ATTEMPT_LOST: the attempt a join (or an attached retry)
// followed was lost (its server crashed, was stopped past its lease, or a later request superseded
// it) after the events it had written, which the stream delivered. It is final for that attempt:
// Threads.Stream retries its request and a JoinRun by request ID follows the next attempt, unless
// reconnecting is turned off.
type RunAttemptLostError struct {
	threadError
	// RunID is the lost attempt.
	RunID string
	// RequestID is the request it served.
	RequestID string
	// LastSequence is the sequence of the attempt's last written event.
	LastSequence uint64
	// RequestStatus is the request's status now (RUNNING when a next attempt runs it); unspecified
	// when not sent.
	RequestStatus ThreadRunStatus
	// NextRunID is the request's next attempt, once one runs; empty until then.
	NextRunID string
}

// RunEventsExpiredError is FAILED_PRECONDITION RUN_EVENTS_EXPIRED: the attempt's event log is past
// its retention, or was never recorded (its server had the log off). The result stays readable:
// a retry of RequestID replays it, and Threads.Checkpoint(Revision) has its state.
type RunEventsExpiredError struct {
	threadError
	// RunID is the attempt joined.
	RunID string
	// RequestID is the request it served.
	RequestID string
	// RequestStatus is the request's status; unspecified when not sent.
	RequestStatus ThreadRunStatus
	// Revision is the last checkpoint the request committed; 0 when none.
	Revision int64
	// Why is "retention" (the log expired) or "not_recorded" (it was never kept).
	Why string
}

// FollowerLimitReachedError is RESOURCE_EXHAUSTED FOLLOWER_LIMIT_REACHED: the replica already
// serves its --max-followers joins, attached retries and watches. Nothing was started: try again
// later or on another replica.
type FollowerLimitReachedError struct {
	threadError
	// Limit is the replica's --max-followers; 0 when not sent.
	Limit int64
}

// threadErr returns err as the typed error of its reason when it is one of the threads' reasons
// (domain Domain), else as an *Error; nil stays nil.
func threadErr(err error) error {
	if err == nil {
		return nil
	}
	e := FromError(err)
	if e.Domain() != Domain {
		return e
	}
	base := threadError{err: e}
	md := e.info.GetMetadata()
	switch e.Reason() {
	case ReasonThreadNotFound:
		return &ThreadNotFoundError{base}
	case ReasonCheckpointNotFound:
		return &CheckpointNotFoundError{base}
	case ReasonRunNotFound:
		return &RunNotFoundError{base}
	case ReasonThreadExists:
		return &ThreadExistsError{base}
	case ReasonRequestIDReused:
		differs, hasDiff := md["differs"]
		return &RequestIDReusedError{
			threadError: base,
			RunID:       md["run_id"],
			Revision:    metaInt(md["revision"]),
			Status:      metaRunStatus(md["status"]),
			differs:     differs,
			hasDiff:     hasDiff,
		}
	case ReasonThreadNotSuspended:
		e := &ThreadNotSuspendedError{
			threadError: base,
			ThreadID:    md["thread_id"],
			Status:      metaThreadStatus(md["status"]),
			BeganAt:     metaInt(md["began_at"]),
		}
		if by := md["request_id"]; by != "" {
			e.answeredBy = AnsweredBy{
				RequestID:   by,
				Revision:    metaInt(md["revision"]),
				How:         md["answered"],
				RunRevision: metaInt(md["run_revision"]),
				Matches:     md["matches"] == "true",
			}
		}
		return e
	case ReasonRequestInterrupted:
		return &RequestInterruptedError{
			threadError: base,
			RunID:       md["run_id"],
			Revision:    metaInt(md["revision"]),
			Attempts:    metaInt(md["attempts"]),
		}
	case ReasonThreadBusy:
		return &ThreadBusyError{
			threadError:    base,
			RunID:          md["run_id"],
			RequestID:      md["request_id"],
			LeaseExpiresAt: metaTime(md["lease_expires_at"]),
			QueueLength:    metaInt(md["queue_length"]),
		}
	case ReasonThreadQueueFull:
		return &ThreadQueueFullError{
			threadError: base,
			ThreadID:    md["thread_id"],
			Limit:       metaInt(md["limit"]),
			QueueLength: metaInt(md["queue_length"]),
		}
	case ReasonRevisionConflict:
		return &RevisionConflictError{threadError: base, CurrentRevision: metaInt(md["current_revision"])}
	case ReasonLeaseLost:
		return &LeaseLostError{base}
	case ReasonStoreUnavailable:
		return &StoreUnavailableError{base}
	case ReasonListenerTooSlow:
		return &ListenerTooSlowError{
			threadError: base,
			ThreadID:    md["thread_id"],
			RunID:       md["run_id"],
			RequestID:   md["request_id"],
			Backlog:     metaInt(md["backlog"]),
		}
	case ReasonRunAttemptLost:
		return &RunAttemptLostError{
			threadError:   base,
			RunID:         md["run_id"],
			RequestID:     md["request_id"],
			LastSequence:  metaUint(md["last_sequence"]),
			RequestStatus: metaRunStatus(md["request_status"]),
			NextRunID:     md["next_run_id"],
		}
	case ReasonRunEventsExpired:
		return &RunEventsExpiredError{
			threadError:   base,
			RunID:         md["run_id"],
			RequestID:     md["request_id"],
			RequestStatus: metaRunStatus(md["request_status"]),
			Revision:      metaInt(md["revision"]),
			Why:           md["why"],
		}
	case ReasonFollowerLimitReached:
		return &FollowerLimitReachedError{threadError: base, Limit: metaInt(md["limit"])}
	}
	return e
}

// metaUint reads an unsigned metadata value; 0 when missing or not a number.
func metaUint(s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// metaRunStatus reads a ThreadRunStatus named as the enum names it ("THREAD_RUN_STATUS_RUNNING",
// or without the prefix); unspecified when missing or unknown.
func metaRunStatus(s string) ThreadRunStatus {
	if v, ok := threadlinev1.ThreadRunStatus_value[s]; ok {
		return ThreadRunStatus(v)
	}
	if v, ok := threadlinev1.ThreadRunStatus_value["THREAD_RUN_STATUS_"+strings.ToUpper(s)]; ok {
		return ThreadRunStatus(v)
	}
	return 0
}

// metaThreadStatus reads a ThreadStatus named as the enum names it ("THREAD_STATUS_IDLE", or
// without the prefix); unspecified when missing or unknown.
func metaThreadStatus(s string) ThreadStatus {
	if v, ok := threadlinev1.ThreadStatus_value[s]; ok {
		return ThreadStatus(v)
	}
	if v, ok := threadlinev1.ThreadStatus_value["THREAD_STATUS_"+strings.ToUpper(s)]; ok {
		return ThreadStatus(v)
	}
	return 0
}

// metaInt reads a numeric metadata value; 0 when missing or not a number.
func metaInt(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// metaTime reads an RFC 3339 metadata value; the zero time when missing or malformed.
func metaTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}
