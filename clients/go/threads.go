package threadline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"iter"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc/codes"

	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// Durable threads the server keeps (threadline.v1.ThreadService, THREADS.md). With Client's
// HarnessService calls the host stores every state and sends it back; with Threads the server
// stores the thread and the host sends only what is new: a prompt, or its answers to
// Thread.Pending by call ID. Three rules shape this file:
//
//   - Every run request carries a request ID, fresh (NewRequestID) unless the caller gives one.
//     The server answers a request ID once: a retry gets the stored outcome (Replayed), never a
//     second run (a retry while it runs attaches to it). So Run retries UNAVAILABLE with the same
//     ID, and Stream reconnects by joining its run from the last sequence it handed out (live.go).
//   - A thread run outlives its RPC: closing a stream early, a deadline or a dropped connection
//     stops the events, not the run, which goes on to commit. Stop a run with Cancel.
//   - A thread run's RunResult has no state; the state is the checkpoint at the outcome's
//     Revision (Checkpoint), so a turn's answer does not grow with the thread.

const (
	// RunRetries is how many times Threads.Run sends a request again after UNAVAILABLE, with the
	// same request ID.
	RunRetries = 3
	// runBackoff is the wait before the first retry; it doubles before each next one.
	runBackoff = 200 * time.Millisecond
	// maxPageSize is the server's largest page (AIP-158).
	maxPageSize = 1000
)

// NewRequestID returns a fresh request ID, "req-<32 lowercase hex>": what Stream and Run send
// unless the ThreadRun names one.
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "req-" + hex.EncodeToString(b[:])
}

// Threads calls ThreadService: threads the server stores, runs one at a time, and answers
// exactly once. Get it from Client.Threads; it shares the client's connection, token, TLS and
// default timeouts (WithTimeout for the thread calls and each page of a listing, WithRunTimeout
// for Stream and Run). It is safe for concurrent use.
//
// Errors are *Error values; the threads' own reasons are typed errors that wrap one
// (*ThreadNotFoundError, *ThreadBusyError, *RevisionConflictError, ...), for errors.As.
type Threads struct {
	c   *Client
	svc threadlinev1.ThreadServiceClient
}

// Threads returns the client's ThreadService calls.
func (c *Client) Threads() *Threads {
	return &Threads{c: c, svc: threadlinev1.NewThreadServiceClient(c.conn)}
}

// Service returns the generated client on the same connection, for calls this type does not
// wrap. Its errors are plain gRPC statuses.
func (t *Threads) Service() threadlinev1.ThreadServiceClient {
	return t.svc
}

// CreateThread is what Threads.Create creates. Every field is optional: the zero value makes an
// empty thread with a server-generated ID and the server's default agent.
type CreateThread struct {
	// ThreadID is the new thread's ID; empty = State's thread ID with a state, else a
	// server-generated "thread_<32 hex>".
	ThreadID string
	// Agent runs every run of the thread; empty = the server's default agent.
	Agent string
	// Labels (at most 32) find the thread in List; set now, never changed.
	Labels map[string]string
	// State is a host-held state to import, validated like a run's previous state.
	State *HarnessState
	// Pending is the batch State is suspended on, exactly as RunResult.Deferred gave it; the
	// thread is then SUSPENDED, and its next run answers it by call ID.
	Pending *DeferredToolRequests
	// Accepted is a resume the host accepted whose run did not finish; the next run recovers
	// what its history lacks. Not together with Pending.
	Accepted *DeferredToolResume
	// ClientTools are the client tools State was made with, for a resume that declares none.
	ClientTools []*ClientTool
}

// Create creates a thread, empty or importing a state the host held (e.g. from HarnessService).
// An ID in use is a *ThreadExistsError; a Pending batch that does not match the state is an
// *Error such as ReasonDeferredRequestMissing.
func (t *Threads) Create(ctx context.Context, spec *CreateThread) (*Thread, error) {
	if spec == nil {
		spec = &CreateThread{}
	}
	ctx, cancel := withDefaultTimeout(ctx, t.c.timeout)
	defer cancel()
	resp, err := t.svc.CreateThread(ctx, &threadlinev1.CreateThreadRequest{
		ThreadId:    spec.ThreadID,
		Agent:       spec.Agent,
		Labels:      maps.Clone(spec.Labels),
		State:       spec.State,
		Pending:     spec.Pending,
		Accepted:    spec.Accepted,
		ClientTools: spec.ClientTools,
	})
	if err != nil {
		return nil, threadErr(err)
	}
	return required(resp.GetThread(), "CreateThreadResponse.thread")
}

// Get returns a thread as it is now; full adds its head checkpoint's state. Its Queue (GetQueue)
// lists the requests waiting for their turn (BusyEnqueue), in the order they will run; List
// leaves it empty. No such thread is a *ThreadNotFoundError.
func (t *Threads) Get(ctx context.Context, threadID string, full bool) (*Thread, error) {
	view := threadlinev1.ThreadView_THREAD_VIEW_BASIC
	if full {
		view = threadlinev1.ThreadView_THREAD_VIEW_FULL
	}
	ctx, cancel := withDefaultTimeout(ctx, t.c.timeout)
	defer cancel()
	resp, err := t.svc.GetThread(ctx, &threadlinev1.GetThreadRequest{ThreadId: threadID, View: view})
	if err != nil {
		return nil, threadErr(err)
	}
	return required(resp.GetThread(), "GetThreadResponse.thread")
}

// ListThreads filters List and ListPage. The zero value lists every thread.
type ListThreads struct {
	// Labels keeps the threads that have every one of these labels.
	Labels map[string]string
	// Status keeps the threads with this status; unspecified = any.
	Status ThreadStatus
	// PageSize is the threads per request; 0 = the server's default (100), at most 1000.
	PageSize int
}

// List returns every matching thread, newest update first, walking every page (each page's
// call bounded by the default timeout). An error is yielded once, last.
//
//	for th, err := range c.Threads().List(ctx, threadline.ListThreads{Labels: labels}) {
//		if err != nil { ... }
//		...
//	}
func (t *Threads) List(ctx context.Context, filter ListThreads) iter.Seq2[*Thread, error] {
	return pages(func(token string) ([]*Thread, string, error) {
		page, err := t.ListPage(ctx, filter, token)
		return page.GetThreads(), page.GetNextPageToken(), err
	})
}

// ListPage returns one page of List: its threads and the next page's token (empty on the last
// page). An empty token asks for the first page; pass the same filter with every token.
func (t *Threads) ListPage(ctx context.Context, filter ListThreads, pageToken string) (*threadlinev1.ListThreadsResponse, error) {
	labels := make([]string, 0, len(filter.Labels))
	for _, k := range slices.Sorted(maps.Keys(filter.Labels)) {
		labels = append(labels, k+"="+filter.Labels[k])
	}
	ctx, cancel := withDefaultTimeout(ctx, t.c.timeout)
	defer cancel()
	resp, err := t.svc.ListThreads(ctx, &threadlinev1.ListThreadsRequest{
		PageSize:  pageSize(filter.PageSize),
		PageToken: pageToken,
		Labels:    labels,
		Status:    filter.Status,
	})
	if err != nil {
		return nil, threadErr(err)
	}
	return resp, nil
}

// Delete deletes a thread with its checkpoints and run records. expectedRevision 0 deletes
// whatever the head is; another revision that is not the head is a *RevisionConflictError. A
// running thread is a *ThreadBusyError.
func (t *Threads) Delete(ctx context.Context, threadID string, expectedRevision int64) error {
	ctx, cancel := withDefaultTimeout(ctx, t.c.timeout)
	defer cancel()
	_, err := t.svc.DeleteThread(ctx, &threadlinev1.DeleteThreadRequest{ThreadId: threadID, ExpectedRevision: expectedRevision})
	return threadErr(err)
}

// Checkpoints returns every checkpoint of a thread, newest first, without its state, walking
// every page of size checkpoints (0 = the server's default, 100). An error is yielded once, last; no
// such thread is a *ThreadNotFoundError.
func (t *Threads) Checkpoints(ctx context.Context, threadID string, size int) iter.Seq2[*Checkpoint, error] {
	return pages(func(token string) ([]*Checkpoint, string, error) {
		ctx, cancel := withDefaultTimeout(ctx, t.c.timeout)
		defer cancel()
		page, err := t.svc.ListCheckpoints(ctx, &threadlinev1.ListCheckpointsRequest{
			ThreadId: threadID, PageSize: pageSize(size), PageToken: token,
		})
		return page.GetCheckpoints(), page.GetNextPageToken(), threadErr(err)
	})
}

// Checkpoint returns one checkpoint with its state and pending batch, e.g. the state a run's
// outcome points at. No such revision is a *CheckpointNotFoundError.
func (t *Threads) Checkpoint(ctx context.Context, threadID string, revision int64) (*Checkpoint, error) {
	ctx, cancel := withDefaultTimeout(ctx, t.c.timeout)
	defer cancel()
	resp, err := t.svc.GetCheckpoint(ctx, &threadlinev1.GetCheckpointRequest{ThreadId: threadID, Revision: revision})
	if err != nil {
		return nil, threadErr(err)
	}
	return required(resp.GetCheckpoint(), "GetCheckpointResponse.checkpoint")
}

// ForkOptions says where Fork branches from and what the new thread is called.
type ForkOptions struct {
	// Revision is the checkpoint to branch from; 0 = the head.
	Revision int64
	// NewThreadID is the new thread's ID; empty = server-generated. The source's own ID fails
	// with ReasonForkThreadIDConflict, one in use with a *ThreadExistsError.
	NewThreadID string
	// Labels are the new thread's labels.
	Labels map[string]string
}

// Fork branches a new thread, with the same agent, from a committed checkpoint (the source may
// be running). The new thread's first checkpoint (FORKED, revision 1) keeps the source
// checkpoint's pending batch, retained answers and client tools: a fork of a SUSPENDED
// checkpoint is SUSPENDED on the same calls. Environment states are cleared.
func (t *Threads) Fork(ctx context.Context, threadID string, opts ForkOptions) (*Thread, error) {
	ctx, cancel := withDefaultTimeout(ctx, t.c.timeout)
	defer cancel()
	resp, err := t.svc.ForkThread(ctx, &threadlinev1.ForkThreadRequest{
		ThreadId:    threadID,
		Revision:    opts.Revision,
		NewThreadId: opts.NewThreadID,
		Labels:      maps.Clone(opts.Labels),
	})
	if err != nil {
		return nil, threadErr(err)
	}
	return required(resp.GetThread(), "ForkThreadResponse.thread")
}

// Rollback makes an earlier checkpoint current again as a new head (ROLLED_BACK); nothing is
// deleted. The thread's status follows the copied checkpoint: SUSPENDED again on its calls if it
// was, and answering them again runs them again. expectedRevision 0 rolls back whatever the head
// is; another revision that is not the head is a *RevisionConflictError.
func (t *Threads) Rollback(ctx context.Context, threadID string, revision, expectedRevision int64) (*Thread, error) {
	ctx, cancel := withDefaultTimeout(ctx, t.c.timeout)
	defer cancel()
	resp, err := t.svc.RollbackThread(ctx, &threadlinev1.RollbackThreadRequest{
		ThreadId: threadID, Revision: revision, ExpectedRevision: expectedRevision,
	})
	if err != nil {
		return nil, threadErr(err)
	}
	return required(resp.GetThread(), "RollbackThreadResponse.thread")
}

// ThreadRun is one turn of a thread: what Stream and Run send. The zero value sends no new input
// (it continues a thread, e.g. one whose pending calls are to be settled by ToolRecovery).
type ThreadRun struct {
	// Text is a text prompt. Not together with Parts.
	Text string
	// Parts is a prompt of several parts.
	Parts *PromptParts
	// Answers answers every item of Thread.Pending, by call ID (Answers.Results).
	Answers *DeferredToolResults
	// RequestID is this request's ID, unique per thread; empty = a fresh one (NewRequestID).
	// Send the same request again with the same ID to retry without running it twice.
	RequestID string
	// ExpectedRevision runs only if it is still the head; 0 = whatever the head is.
	ExpectedRevision int64
	// ToolRecovery settles calls the head left unanswered; unspecified = DECLARED.
	ToolRecovery ToolRecovery
	// ClientTools are the host's tools for this run; none on a resume or recovery = the head
	// checkpoint's.
	ClientTools []*ClientTool
	// UsageLimits limits the run's model usage; nil = the agent's own.
	UsageLimits *UsageLimits
	// BusyStrategy is what the request does when the thread is busy (a run holds it, or requests
	// wait in its queue): BusyReject (the zero value) fails with a *ThreadBusyError, BusyEnqueue
	// waits in the thread's queue for its turn, BusyInterrupt stops the running turn (it ends
	// CANCELLED) and waits first in the queue, BusyRollback does the same and discards the stopped
	// turn's commits before it runs (StartRun answers QUEUED at once; Run and Stream
	// wait, without events, until it starts, within WithRunTimeout). It is part of the request: a
	// retry with the same RequestID must send the same strategy, or it is a *RequestIDReusedError.
	BusyStrategy BusyStrategy
	// NoReconnect keeps Stream from reconnecting (joining its run again after a transport failure,
	// sending its request again after RUN_ATTEMPT_LOST): the first error ends it. Run ignores it.
	NoReconnect bool
}

// ErrPromptAmbiguous is what errors.Is matches when a ThreadRun has both Text and Parts.
var ErrPromptAmbiguous = errors.New("threadline: give the prompt as Text or as Parts, not both")

// spec returns the ThreadRunSpec of run on threadID, with a fresh request ID unless run names one.
func (run *ThreadRun) spec(threadID string) (*threadlinev1.ThreadRunSpec, error) {
	if run == nil {
		run = &ThreadRun{}
	}
	if run.Text != "" && run.Parts != nil {
		return nil, ErrPromptAmbiguous
	}
	spec := &threadlinev1.ThreadRunSpec{
		ThreadId:         threadID,
		RequestId:        run.RequestID,
		ExpectedRevision: run.ExpectedRevision,
		Answers:          run.Answers,
		ToolRecovery:     run.ToolRecovery,
		ClientTools:      run.ClientTools,
		UsageLimits:      run.UsageLimits,
		BusyStrategy:     run.BusyStrategy,
	}
	if spec.RequestId == "" {
		spec.RequestId = NewRequestID()
	}
	switch {
	case run.Text != "":
		spec.Prompt = &threadlinev1.ThreadRunSpec_Text{Text: run.Text}
	case run.Parts != nil:
		spec.Prompt = &threadlinev1.ThreadRunSpec_Parts{Parts: run.Parts}
	}
	return spec, nil
}

// ThreadRunOutcome is how a thread run ended: Threads.Run, or ThreadRunStream.Collect.
type ThreadRunOutcome struct {
	// Result is the terminal result; its state is unset (it is the checkpoint at Revision).
	Result *RunResult
	// Revision is the run's terminal checkpoint, the thread's head after it; 0 when the run
	// committed nothing (a run Cancel closed after its server was gone).
	Revision int64
	// Replayed is true when the server answered an already finished request again: nothing ran
	// this time.
	Replayed bool
}

// Stream runs the thread's next turn and returns its events: those of Client.StreamRun without
// checkpoint candidates, plus a thread_committed event after each checkpoint the run commits;
// the terminal commit's comes right before the result. WithRunTimeout bounds the call (not the
// run), reconnects included.
//
// The stream reconnects by itself unless run.NoReconnect: after a transport failure (UNAVAILABLE,
// a broken connection) it joins its run (JoinThreadRun with the run ID and the last sequence it
// handed out), so the host sees every event of the attempt once, in order; before the first event
// it sends the request again with the same RequestID, which attaches to a run that started. When
// the attempt is lost (its server crashed or was stopped past its lease; RUN_ATTEMPT_LOST) it
// sends its request again (same RequestID): the next attempt's events follow, from its
// run_started. Giving up, it ends with the last error, such as a *RunAttemptLostError.
//
// With NoReconnect nothing is retried: after a transport error, send the same run again with
// RequestID set to the stream's RequestID (a finished run is replayed, a running one attached to
// from its first event), or JoinRun its RunID from its LastSequence. Errors, e.g.
// *ThreadBusyError, *RevisionConflictError, *ThreadNotSuspendedError, *RequestIDReusedError or
// ReasonDeferredResultsIncomplete, end the stream and are its Err.
//
// With run.BusyStrategy BusyEnqueue (or BusyInterrupt, which also stops the running turn, or
// BusyRollback, which also discards it) on a busy thread the request waits in the thread's queue:
// the stream hands out nothing until it starts, then its attempt from sequence 0 (a full queue is
// a *ThreadQueueFullError).
func (t *Threads) Stream(ctx context.Context, threadID string, run *ThreadRun) *ThreadRunStream {
	spec, err := run.spec(threadID)
	if err != nil {
		s := &ThreadRunStream{cancel: func() {}}
		s.finish(err)
		return s
	}
	ctx, cancel := withDefaultTimeout(ctx, t.c.runTimeout)
	s := &ThreadRunStream{ctx: ctx, cancel: cancel, threads: t, threadID: threadID, requestID: spec.GetRequestId()}
	send := func() *eventReader {
		stream, err := t.svc.StreamThreadRun(ctx, &threadlinev1.StreamThreadRunRequest{Spec: spec, MaxEventsPerMessage: t.c.maxEvents})
		return openedReader(stream, "StreamThreadRunResponse", err)
	}
	if run == nil || !run.NoReconnect {
		s.reopen = func(lost *RunAttemptLostError) (*eventReader, bool) {
			if lost == nil {
				if events, ok := s.rejoin(); ok {
					return events, true
				}
			}
			return send(), true
		}
	}
	s.events = send()
	return s
}

// Run runs the thread's next turn and returns its outcome (RunThread). UNAVAILABLE (the server
// unreachable, the connection lost, a *StoreUnavailableError) is retried up to RunRetries times,
// 0.2 s apart and doubling, with the same request ID, so the run happens at most once;
// Replayed says the server answered it from its record. WithRunTimeout (or ctx's deadline)
// bounds the whole call, retries included. With run.BusyStrategy BusyEnqueue on a busy thread it
// (with BusyInterrupt, after stopping the running turn; with BusyRollback, also discarding it)
// waits for the request's turn in the thread's queue, then for its result (a full queue is a
// *ThreadQueueFullError); the timeout bounds the wait in the queue too, and the request stays
// queued when the call gives up (CancelRequest removes it).
func (t *Threads) Run(ctx context.Context, threadID string, run *ThreadRun) (*ThreadRunOutcome, error) {
	spec, err := run.spec(threadID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := withDefaultTimeout(ctx, t.c.runTimeout)
	defer cancel()
	req := &threadlinev1.RunThreadRequest{Spec: spec}
	backoff := runBackoff
	for attempt := 0; ; attempt++ {
		resp, err := t.svc.RunThread(ctx, req)
		if err == nil {
			result, err := required(resp.GetResult(), "RunThreadResponse.result")
			if err != nil {
				return nil, err
			}
			return &ThreadRunOutcome{Result: result, Revision: resp.GetRevision(), Replayed: resp.GetReplayed()}, nil
		}
		err = threadErr(err)
		if CodeOf(err) != codes.Unavailable || attempt == RunRetries || !waitFor(ctx, backoff) {
			return nil, err
		}
		backoff *= 2
	}
}

// waitFor waits d, or less when ctx ends first; it reports whether ctx has time left after d.
func waitFor(ctx context.Context, d time.Duration) bool {
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= d {
		return false
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Cancel asks a thread's run to stop; it ends CANCELLED with its progress committed. It returns
// as soon as the server recorded the request, before the run ends, with the run record's
// status: RUNNING while the run stops, CANCELLED when its server was gone and the record was
// closed at once, or the status of a run that had ended. A run the thread never had is a
// *RunNotFoundError. runID is RunEvent.RunId, Thread.Lease.RunId or ThreadBusyError.RunID. A
// request waiting in the thread's queue (its run ID is StartedRun.RunID or QueuedRun.RunId) is
// removed at once and never runs: CANCELLED, which a retry of it replays.
func (t *Threads) Cancel(ctx context.Context, threadID, runID string) (ThreadRunStatus, error) {
	ctx, cancel := withDefaultTimeout(ctx, t.c.timeout)
	defer cancel()
	resp, err := t.svc.CancelThreadRun(ctx, &threadlinev1.CancelThreadRunRequest{ThreadId: threadID, RunId: runID})
	if err != nil {
		return 0, threadErr(err)
	}
	return resp.GetStatus(), nil
}

// CancelRequest asks the run of a request to stop, named by the request's ID (its latest attempt),
// for a host that knows only the RequestID it sent (its stream broke before run_started). It
// answers as Cancel does; a request the thread never had is a *RunNotFoundError.
func (t *Threads) CancelRequest(ctx context.Context, threadID, requestID string) (ThreadRunStatus, error) {
	ctx, cancel := withDefaultTimeout(ctx, t.c.timeout)
	defer cancel()
	resp, err := t.svc.CancelThreadRun(ctx, &threadlinev1.CancelThreadRunRequest{ThreadId: threadID, RequestId: requestID})
	if err != nil {
		return 0, threadErr(err)
	}
	return resp.GetStatus(), nil
}

// pages walks a paged listing: fetch returns one page's items and the next page's token.
func pages[T any](fetch func(token string) ([]T, string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		token := ""
		for {
			items, next, err := fetch(token)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, item := range items {
				if !yield(item, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			token = next
		}
	}
}

// pageSize is a page size for the wire: negative means the server's default, and sizes beyond
// the server's largest page are capped instead of refused.
func pageSize(n int) int32 {
	return int32(min(max(n, 0), maxPageSize))
}

// required returns v, or a *ProtocolError when the server left the field what unset.
func required[T comparable](v T, what string) (T, error) {
	var zero T
	if v == zero {
		return zero, missing(what)
	}
	return v, nil
}
