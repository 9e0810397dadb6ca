package threadline_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	threadline "github.com/threadline-dev/threadline/clients/go"
	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// The threads client's own logic, without a thread server: typed errors by reason, answers,
// request IDs, and Run's retries against a real listener that drops every connection.

func statusErr(t *testing.T, code codes.Code, reason, domain string, md map[string]string) error {
	t.Helper()
	st, err := status.New(code, "it happened").WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: domain, Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestEachThreadReasonIsItsOwnType(t *testing.T) {
	is := func(target any) func(error) bool {
		return func(err error) bool { return errors.As(err, target) }
	}
	var listed []string
	for _, tc := range []struct {
		reason string
		code   codes.Code
		is     func(error) bool
	}{
		{threadline.ReasonThreadNotFound, codes.NotFound, is(new(*threadline.ThreadNotFoundError))},
		{threadline.ReasonCheckpointNotFound, codes.NotFound, is(new(*threadline.CheckpointNotFoundError))},
		{threadline.ReasonRunNotFound, codes.NotFound, is(new(*threadline.RunNotFoundError))},
		{threadline.ReasonThreadExists, codes.AlreadyExists, is(new(*threadline.ThreadExistsError))},
		{threadline.ReasonRequestIDReused, codes.InvalidArgument, is(new(*threadline.RequestIDReusedError))},
		{threadline.ReasonThreadNotSuspended, codes.FailedPrecondition, is(new(*threadline.ThreadNotSuspendedError))},
		{threadline.ReasonRequestInterrupted, codes.FailedPrecondition, is(new(*threadline.RequestInterruptedError))},
		{threadline.ReasonThreadBusy, codes.Aborted, is(new(*threadline.ThreadBusyError))},
		{threadline.ReasonThreadQueueFull, codes.ResourceExhausted, is(new(*threadline.ThreadQueueFullError))},
		{threadline.ReasonRevisionConflict, codes.Aborted, is(new(*threadline.RevisionConflictError))},
		{threadline.ReasonLeaseLost, codes.Aborted, is(new(*threadline.LeaseLostError))},
		{threadline.ReasonStoreUnavailable, codes.Unavailable, is(new(*threadline.StoreUnavailableError))},
		{threadline.ReasonListenerTooSlow, codes.ResourceExhausted, is(new(*threadline.ListenerTooSlowError))},
		{threadline.ReasonRunAttemptLost, codes.Aborted, is(new(*threadline.RunAttemptLostError))},
		{threadline.ReasonRunEventsExpired, codes.FailedPrecondition, is(new(*threadline.RunEventsExpiredError))},
		// A server reason (not "(threads)" in the catalogue), typed for the live runs' calls.
		{threadline.ReasonFollowerLimitReached, codes.ResourceExhausted, is(new(*threadline.FollowerLimitReachedError))},
	} {
		if tc.reason != threadline.ReasonFollowerLimitReached {
			listed = append(listed, tc.reason+" "+tc.code.String())
		}
		t.Run(tc.reason, func(t *testing.T) {
			err := threadline.ThreadErr(statusErr(t, tc.code, tc.reason, threadline.Domain, map[string]string{"k": "v"}))
			if !tc.is(err) {
				t.Fatalf("%T is not its reason's type", err)
			}
			// Still the *Error it always was.
			var base *threadline.Error
			if !errors.As(err, &base) || base.Reason() != tc.reason || base.Metadata()["k"] != "v" {
				t.Errorf("errors.As *Error: %v", base)
			}
			if threadline.ReasonOf(err) != tc.reason || threadline.CodeOf(err) != tc.code || status.Code(err) != tc.code {
				t.Errorf("ReasonOf %q CodeOf %v status.Code %v", threadline.ReasonOf(err), threadline.CodeOf(err), status.Code(err))
			}
			if threadline.FromError(err) != base {
				t.Error("FromError does not return the wrapped *Error")
			}
			if want := base.Error(); err.Error() != want {
				t.Errorf("text %q, want %q", err.Error(), want)
			}
			// Another reason's type does not match.
			var other *threadline.LeaseLostError
			if tc.reason != threadline.ReasonLeaseLost && errors.As(err, &other) {
				t.Error("matches LeaseLostError too")
			}
		})
	}
	// A reason the server adds to its catalogue fails here until it has its type.
	if catalogue := reasonsOfCatalogue(t, "threads"); !slices.Equal(listed, catalogue) {
		t.Errorf("typed reasons %q, the catalogue's (threads) rows %q", listed, catalogue)
	}
	if want := threadline.ReasonFollowerLimitReached + " ResourceExhausted"; !slices.Contains(reasonsOfCatalogue(t, "server"), want) {
		t.Errorf("the catalogue's (server) rows lack %q", want)
	}
}

// reasonsOfCatalogue returns the rows of the server's error catalogue (docs/errors.md) marked
// "(tag)", e.g. "(threads)" for ThreadService's reasons, as "REASON Code" in the catalogue's order.
func reasonsOfCatalogue(t *testing.T, tag string) []string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(root, "docs", "errors.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z_]+)` \\("+tag+"\\) \\| ([A-Z_]+) \\|").FindAllStringSubmatch(string(text), -1) {
		code := ""
		for _, word := range strings.Split(m[2], "_") {
			code += word[:1] + strings.ToLower(word[1:])
		}
		rows = append(rows, m[1]+" "+code)
	}
	return rows
}

func TestThreadErrorMetadataBecomesFields(t *testing.T) {
	var busy *threadline.ThreadBusyError
	err := threadline.ThreadErr(statusErr(t, codes.Aborted, threadline.ReasonThreadBusy, threadline.Domain, map[string]string{
		"run_id": "run-1", "request_id": "req-1", "lease_expires_at": "2030-01-02T03:04:05.250Z", "queue_length": "0",
	}))
	if !errors.As(err, &busy) {
		t.Fatalf("%T", err)
	}
	if want := time.Date(2030, 1, 2, 3, 4, 5, 250e6, time.UTC); busy.RunID != "run-1" || busy.RequestID != "req-1" || !busy.LeaseExpiresAt.Equal(want) || busy.QueueLength != 0 {
		t.Errorf("busy %q %q %v queue %d", busy.RunID, busy.RequestID, busy.LeaseExpiresAt, busy.QueueLength)
	}
	if busy.Code() != codes.Aborted || busy.Reason() != threadline.ReasonThreadBusy || busy.Message() != "it happened" {
		t.Errorf("busy %v %q %q", busy.Code(), busy.Reason(), busy.Message())
	}

	// The queue, not a lease, holds the thread: its head's IDs, no expiry.
	err = threadline.ThreadErr(statusErr(t, codes.Aborted, threadline.ReasonThreadBusy, threadline.Domain, map[string]string{
		"run_id": "run-q", "request_id": "q00", "lease_expires_at": "", "queue_length": "3",
	}))
	if !errors.As(err, &busy) || busy.RunID != "run-q" || busy.RequestID != "q00" || !busy.LeaseExpiresAt.IsZero() || busy.QueueLength != 3 {
		t.Errorf("busy by the queue %+v", busy)
	}

	var queueFull *threadline.ThreadQueueFullError
	err = threadline.ThreadErr(statusErr(t, codes.ResourceExhausted, threadline.ReasonThreadQueueFull, threadline.Domain, map[string]string{
		"thread_id": "t-1", "limit": "16", "queue_length": "16",
	}))
	if !errors.As(err, &queueFull) || queueFull.ThreadID != "t-1" || queueFull.Limit != 16 || queueFull.QueueLength != 16 {
		t.Errorf("queue full %+v", queueFull)
	}
	if queueFull.Code() != codes.ResourceExhausted || queueFull.Reason() != threadline.ReasonThreadQueueFull || status.Code(err) != codes.ResourceExhausted {
		t.Errorf("queue full %v %q", queueFull.Code(), queueFull.Reason())
	}

	var conflict *threadline.RevisionConflictError
	err = threadline.ThreadErr(statusErr(t, codes.Aborted, threadline.ReasonRevisionConflict, threadline.Domain, map[string]string{"current_revision": "7"}))
	if !errors.As(err, &conflict) || conflict.CurrentRevision != 7 {
		t.Errorf("conflict %v", err)
	}

	var interrupted *threadline.RequestInterruptedError
	err = threadline.ThreadErr(statusErr(t, codes.FailedPrecondition, threadline.ReasonRequestInterrupted, threadline.Domain, map[string]string{"run_id": "run-2", "revision": "4"}))
	if !errors.As(err, &interrupted) || interrupted.RunID != "run-2" || interrupted.Revision != 4 || interrupted.Attempts != 0 {
		t.Errorf("interrupted %v", err)
	}
	// A background request closed by the attempt cap says how many attempts a lost server ended.
	err = threadline.ThreadErr(statusErr(t, codes.FailedPrecondition, threadline.ReasonRequestInterrupted, threadline.Domain, map[string]string{"run_id": "run-5", "revision": "6", "attempts": "3"}))
	if !errors.As(err, &interrupted) || interrupted.RunID != "run-5" || interrupted.Revision != 6 || interrupted.Attempts != 3 {
		t.Errorf("interrupted %+v", interrupted)
	}

	var slow *threadline.ListenerTooSlowError
	err = threadline.ThreadErr(statusErr(t, codes.ResourceExhausted, threadline.ReasonListenerTooSlow, threadline.Domain, map[string]string{
		"thread_id": "t-1", "run_id": "run-3", "request_id": "req-3", "backlog": "8192",
	}))
	if !errors.As(err, &slow) || slow.ThreadID != "t-1" || slow.RunID != "run-3" || slow.RequestID != "req-3" || slow.Backlog != 8192 {
		t.Errorf("slow %v", err)
	}
}

func TestLiveRunErrorMetadataBecomesFields(t *testing.T) {
	var lost *threadline.RunAttemptLostError
	err := threadline.ThreadErr(statusErr(t, codes.Aborted, threadline.ReasonRunAttemptLost, threadline.Domain, map[string]string{
		"run_id": "run-1", "request_id": "req-1", "last_sequence": "41", "request_status": "THREAD_RUN_STATUS_RUNNING", "next_run_id": "run-2",
	}))
	if !errors.As(err, &lost) || lost.RunID != "run-1" || lost.RequestID != "req-1" || lost.LastSequence != 41 ||
		lost.RequestStatus != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_RUNNING || lost.NextRunID != "run-2" {
		t.Errorf("lost %+v", lost)
	}
	var expired *threadline.RunEventsExpiredError
	err = threadline.ThreadErr(statusErr(t, codes.FailedPrecondition, threadline.ReasonRunEventsExpired, threadline.Domain, map[string]string{
		"run_id": "run-3", "request_id": "req-3", "request_status": "completed", "revision": "9", "why": "retention",
	}))
	if !errors.As(err, &expired) || expired.RunID != "run-3" || expired.RequestID != "req-3" || expired.Revision != 9 ||
		expired.RequestStatus != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_COMPLETED || expired.Why != "retention" {
		t.Errorf("expired %+v", expired)
	}
	var full *threadline.FollowerLimitReachedError
	err = threadline.ThreadErr(statusErr(t, codes.ResourceExhausted, threadline.ReasonFollowerLimitReached, threadline.Domain, map[string]string{"limit": "1024"}))
	if !errors.As(err, &full) || full.Limit != 1024 {
		t.Errorf("full %+v", full)
	}
	// Missing or malformed metadata reads as zero.
	err = threadline.ThreadErr(statusErr(t, codes.Aborted, threadline.ReasonRunAttemptLost, threadline.Domain, map[string]string{"last_sequence": "-1", "request_status": "later"}))
	if !errors.As(err, &lost) || lost.LastSequence != 0 || lost.RequestStatus != 0 || lost.NextRunID != "" {
		t.Errorf("lost %+v", lost)
	}
}

func TestThreadErrorMissingOrMalformedMetadataReadsAsZero(t *testing.T) {
	var busy *threadline.ThreadBusyError
	err := threadline.ThreadErr(statusErr(t, codes.Aborted, threadline.ReasonThreadBusy, threadline.Domain, map[string]string{"lease_expires_at": "soon"}))
	if !errors.As(err, &busy) || busy.RunID != "" || busy.RequestID != "" || !busy.LeaseExpiresAt.IsZero() || busy.QueueLength != 0 {
		t.Errorf("busy %v", busy)
	}
	var queueFull *threadline.ThreadQueueFullError
	err = threadline.ThreadErr(statusErr(t, codes.ResourceExhausted, threadline.ReasonThreadQueueFull, threadline.Domain, map[string]string{"limit": "lots"}))
	if !errors.As(err, &queueFull) || queueFull.ThreadID != "" || queueFull.Limit != 0 || queueFull.QueueLength != 0 {
		t.Errorf("queue full %+v", queueFull)
	}
	var conflict *threadline.RevisionConflictError
	err = threadline.ThreadErr(statusErr(t, codes.Aborted, threadline.ReasonRevisionConflict, threadline.Domain, map[string]string{"current_revision": "x"}))
	if !errors.As(err, &conflict) || conflict.CurrentRevision != 0 {
		t.Errorf("conflict %v", conflict)
	}
	var slow *threadline.ListenerTooSlowError
	err = threadline.ThreadErr(statusErr(t, codes.ResourceExhausted, threadline.ReasonListenerTooSlow, threadline.Domain, map[string]string{"backlog": "many"}))
	if !errors.As(err, &slow) || slow.ThreadID != "" || slow.RunID != "" || slow.RequestID != "" || slow.Backlog != 0 {
		t.Errorf("slow %v", slow)
	}
}

func TestThreadNotSuspendedNamesWhoAnsweredTheBatch(t *testing.T) {
	var notSuspended *threadline.ThreadNotSuspendedError
	err := threadline.ThreadErr(statusErr(t, codes.FailedPrecondition, threadline.ReasonThreadNotSuspended, threadline.Domain, map[string]string{
		"thread_id": "thread_1", "status": "THREAD_STATUS_IDLE", "request_id": "req-7", "revision": "3",
		"answered": "prompt", "run_revision": "5", "matches": "true",
	}))
	if !errors.As(err, &notSuspended) {
		t.Fatalf("%T", err)
	}
	if notSuspended.ThreadID != "thread_1" || notSuspended.Status != threadline.ThreadIdle || notSuspended.BeganAt != 0 {
		t.Errorf("thread %q status %v began at %d", notSuspended.ThreadID, notSuspended.Status, notSuspended.BeganAt)
	}
	by, ok := notSuspended.AnsweredBy()
	if want := (threadline.AnsweredBy{RequestID: "req-7", Revision: 3, How: "prompt", RunRevision: 5, Matches: true}); !ok || by != want {
		t.Errorf("AnsweredBy %+v, %v; want %+v", by, ok, want)
	}

	// Answers took it, these answers name other calls, and its request committed nothing (yet).
	err = threadline.ThreadErr(statusErr(t, codes.FailedPrecondition, threadline.ReasonThreadNotSuspended, threadline.Domain, map[string]string{
		"thread_id": "thread_1", "status": "THREAD_STATUS_RUNNING", "request_id": "req-8", "revision": "9",
		"answered": "answers", "run_revision": "0", "matches": "false",
	}))
	if !errors.As(err, &notSuspended) {
		t.Fatalf("%T", err)
	}
	by, ok = notSuspended.AnsweredBy()
	if want := (threadline.AnsweredBy{RequestID: "req-8", Revision: 9, How: "answers"}); !ok || by != want || notSuspended.Status != threadline.ThreadRunning {
		t.Errorf("AnsweredBy %+v, %v (status %v); want %+v", by, ok, notSuspended.Status, want)
	}

	for name, md := range map[string]map[string]string{
		// No request consumed a batch since a rollback restored one.
		"nothing consumed": {"thread_id": "thread_1", "status": "THREAD_STATUS_IDLE", "request_id": "", "revision": "0",
			"answered": "", "run_revision": "0", "matches": "false"},
		// An older server: the thread's ID and status only.
		"older server": {"thread_id": "thread_1", "status": "THREAD_STATUS_IDLE"},
		"no metadata":  nil,
	} {
		err := threadline.ThreadErr(statusErr(t, codes.FailedPrecondition, threadline.ReasonThreadNotSuspended, threadline.Domain, md))
		if !errors.As(err, &notSuspended) {
			t.Fatalf("%s: %T", name, err)
		}
		if by, ok := notSuspended.AnsweredBy(); ok || by != (threadline.AnsweredBy{}) {
			t.Errorf("%s: AnsweredBy %+v, %v; want zero, false", name, by, ok)
		}
	}

	// A BusyRollback refusal names the revision the running request began from instead.
	err = threadline.ThreadErr(statusErr(t, codes.FailedPrecondition, threadline.ReasonThreadNotSuspended, threadline.Domain, map[string]string{
		"thread_id": "thread_1", "status": "THREAD_STATUS_RUNNING", "began_at": "4",
	}))
	if !errors.As(err, &notSuspended) {
		t.Fatalf("%T", err)
	}
	if by, ok := notSuspended.AnsweredBy(); ok || notSuspended.BeganAt != 4 || notSuspended.Status != threadline.ThreadRunning {
		t.Errorf("rollback: AnsweredBy %+v, %v, began at %d, status %v", by, ok, notSuspended.BeganAt, notSuspended.Status)
	}
}

func TestRequestIDReusedNamesWhatTheOriginalDidAndHowThisDiffers(t *testing.T) {
	reused := func(md map[string]string) *threadline.RequestIDReusedError {
		t.Helper()
		var e *threadline.RequestIDReusedError
		if err := threadline.ThreadErr(statusErr(t, codes.InvalidArgument, threadline.ReasonRequestIDReused, threadline.Domain, md)); !errors.As(err, &e) {
			t.Fatalf("%T", err)
		}
		return e
	}
	e := reused(map[string]string{"request_id": "req-1", "run_id": "run-1", "revision": "6", "status": "completed", "differs": "prompt,expected_revision"})
	if e.RunID != "run-1" || e.Revision != 6 || e.Status != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_COMPLETED {
		t.Errorf("run %q revision %d status %v", e.RunID, e.Revision, e.Status)
	}
	if differs, ok := e.Differs(); !ok || !slices.Equal(differs, []string{"prompt", "expected_revision"}) {
		t.Errorf("Differs %q, %v", differs, ok)
	}
	e = reused(map[string]string{"request_id": "req-1", "run_id": "run-2", "revision": "0", "status": "queued", "differs": "busy_strategy"})
	if differs, ok := e.Differs(); !ok || !slices.Equal(differs, []string{"busy_strategy"}) || e.Revision != 0 ||
		e.Status != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_QUEUED {
		t.Errorf("queued: Differs %q, %v; revision %d status %v", differs, ok, e.Revision, e.Status)
	}
	e = reused(map[string]string{"request_id": "req-1", "run_id": "run-3", "revision": "2", "status": "running", "differs": "unknown"})
	if differs, ok := e.Differs(); ok || differs != nil || e.Status != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_RUNNING || e.RunID != "run-3" {
		t.Errorf("unknown: Differs %q, %v; status %v run %q", differs, ok, e.Status, e.RunID)
	}
	// An older server sent the request ID only.
	e = reused(map[string]string{"request_id": "req-1"})
	if differs, ok := e.Differs(); ok || differs != nil || e.RunID != "" || e.Revision != 0 || e.Status != 0 {
		t.Errorf("older server: Differs %q, %v; run %q revision %d status %v", differs, ok, e.RunID, e.Revision, e.Status)
	}
}

func TestThreadBusyIsOwnWhenItNamesTheRequest(t *testing.T) {
	var busy *threadline.ThreadBusyError
	err := threadline.ThreadErr(statusErr(t, codes.Aborted, threadline.ReasonThreadBusy, threadline.Domain, map[string]string{
		"run_id": "run-1", "request_id": "req-1", "lease_expires_at": "", "queue_length": "2",
	}))
	if !errors.As(err, &busy) {
		t.Fatalf("%T", err)
	}
	if !busy.IsOwn("req-1") || busy.IsOwn("req-2") || busy.IsOwn("") || busy.QueueLength != 2 {
		t.Errorf("IsOwn req-1 %v, req-2 %v, empty %v; queue %d", busy.IsOwn("req-1"), busy.IsOwn("req-2"), busy.IsOwn(""), busy.QueueLength)
	}
	err = threadline.ThreadErr(statusErr(t, codes.Aborted, threadline.ReasonThreadBusy, threadline.Domain, nil))
	if !errors.As(err, &busy) || busy.IsOwn("") || busy.IsOwn("req-1") {
		t.Errorf("no metadata: IsOwn is true")
	}
}

func TestOtherReasonsAndDomainsStayPlainErrors(t *testing.T) {
	for _, err := range []error{
		statusErr(t, codes.InvalidArgument, threadline.ReasonStateInvalid, threadline.Domain, nil),
		statusErr(t, codes.NotFound, threadline.ReasonThreadNotFound, "elsewhere", nil),
		status.Error(codes.Unavailable, "down"),
	} {
		got := threadline.ThreadErr(err)
		if _, ok := got.(*threadline.Error); !ok {
			t.Errorf("%v became %T, want *Error", err, got)
		}
	}
	if threadline.ThreadErr(nil) != nil {
		t.Error("nil did not stay nil")
	}
}

func TestAnswersResultsAreACopyByCallID(t *testing.T) {
	batch := &threadline.DeferredToolRequests{
		Approvals: []*threadline.DeferredToolCall{{ToolCallId: "a1", ToolName: "delete_file"}},
		Calls:     []*threadline.DeferredToolCall{{ToolCallId: "c1", ToolName: "get_time"}},
	}
	answers := threadline.NewAnswers(batch).AnsweredBy("ada").Deny("a1", "no")
	answers.ReturnJSON("c1", `"noon"`)
	results := answers.Results()
	if len(results.GetApprovals()) != 1 || results.GetApprovals()[0].GetDenied().GetMessage() != "no" || results.GetApprovals()[0].GetAnsweredBy() != "ada" {
		t.Errorf("approvals %v", results.GetApprovals())
	}
	if len(results.GetCalls()) != 1 || results.GetCalls()[0].GetValueJson() != `"noon"` {
		t.Errorf("calls %v", results.GetCalls())
	}
	if !proto.Equal(results, answers.Resume().GetResults()) {
		t.Error("Results and Resume disagree")
	}
	answers.Fail("c1", "later")
	if len(results.GetCalls()) != 1 {
		t.Error("Results shares its slices with the Answers")
	}
}

func TestNewRequestIDIsFreshEveryTime(t *testing.T) {
	seen := map[string]bool{}
	pattern := regexp.MustCompile(`^req-[0-9a-f]{32}$`)
	for range 50 {
		id := threadline.NewRequestID()
		if !pattern.MatchString(id) || seen[id] {
			t.Fatalf("request ID %q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
	}
}

// calls records every RunThread and StreamThreadRun attempt the client makes, and when.
type calls struct {
	mu    sync.Mutex
	times []time.Time
	ids   []string
}

func (c *calls) record(req any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.times = append(c.times, time.Now())
	if r, ok := req.(*threadlinev1.RunThreadRequest); ok {
		c.ids = append(c.ids, r.GetSpec().GetRequestId())
	}
}

func (c *calls) options() threadline.Option {
	return threadline.WithDialOptions(
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.record(req)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			c.record(nil)
			return streamer(ctx, desc, cc, method, opts...)
		}),
	)
}

// droppingListener accepts each connection and closes it at once: a transport failure.
func droppingListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
		}
	}()
	return ln.Addr().String()
}

func TestRunRetriesATransportFailureThreeTimesThenReturnsUnavailable(t *testing.T) {
	var seen calls
	c, err := threadline.Dial(droppingListener(t), seen.options())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	started := time.Now()
	_, err = c.Threads().Run(ctx, "thread_t", &threadline.ThreadRun{Text: "hi"})

	if threadline.CodeOf(err) != codes.Unavailable {
		t.Fatalf("error %v, want unavailable", err)
	}
	if len(seen.times) != 1+threadline.RunRetries {
		t.Fatalf("%d attempts, want %d", len(seen.times), 1+threadline.RunRetries)
	}
	// 0.2, 0.4, 0.8 s of backoff: a lower bound that holds on any machine.
	prev := started
	for i, backoff := range []time.Duration{0, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond} {
		if gap := seen.times[i].Sub(prev); gap < backoff {
			t.Errorf("attempt %d came %v after the previous, want at least %v", i, gap, backoff)
		}
		prev = seen.times[i]
	}
	for _, id := range seen.ids {
		if id != seen.ids[0] || id == "" {
			t.Errorf("request IDs %v: want one, the same on every attempt", seen.ids)
			break
		}
	}
}

func TestRunRetriesOnlyWithinItsDeadline(t *testing.T) {
	var seen calls
	c, err := threadline.Dial(droppingListener(t), seen.options())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 1200*time.Millisecond)
	defer cancel()

	_, err = c.Threads().Run(ctx, "thread_t", &threadline.ThreadRun{Text: "hi"})

	// Retries at 0.2 s and 0.6 s; the next backoff (0.8 s) no longer fits, so it is not waited
	// for (the call does not end with the deadline's DEADLINE_EXCEEDED).
	if threadline.CodeOf(err) != codes.Unavailable || len(seen.times) != 3 {
		t.Errorf("error %v after %d attempts, want unavailable after 3", err, len(seen.times))
	}
}

func TestStreamSendsItsRequestAgainBeforeItsFirstEventUnlessNoReconnect(t *testing.T) {
	var seen calls
	c, err := threadline.Dial(droppingListener(t), seen.options())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	s := c.Threads().Stream(t.Context(), "thread_t", &threadline.ThreadRun{Text: "hi", NoReconnect: true})
	_, err = s.Collect()
	if threadline.CodeOf(err) != codes.Unavailable || len(seen.times) != 1 {
		t.Errorf("NoReconnect: error %v after %d attempts, want unavailable after 1", err, len(seen.times))
	}
	if s.RequestID() == "" {
		t.Error("the stream has no request ID to retry with")
	}

	seen = calls{}
	started := time.Now()
	_, err = c.Threads().Stream(t.Context(), "thread_t", &threadline.ThreadRun{Text: "hi"}).Collect()
	if threadline.CodeOf(err) != codes.Unavailable || len(seen.times) != 1+threadline.ReconnectRetries {
		t.Errorf("error %v after %d attempts, want unavailable after %d", err, len(seen.times), 1+threadline.ReconnectRetries)
	}
	if waited := time.Since(started); waited < (200+400+800+1600+3200)*time.Millisecond {
		t.Errorf("%d attempts in %v: want 0.2 s before the first retry, doubling", len(seen.times), waited)
	}
}

func TestTheBusyStrategyIsSentInTheSpec(t *testing.T) {
	for _, tc := range []struct {
		run  *threadline.ThreadRun
		want threadlinev1.BusyStrategy
	}{
		{&threadline.ThreadRun{Text: "hi"}, threadlinev1.BusyStrategy_BUSY_STRATEGY_UNSPECIFIED}, // the server's default, REJECT
		{&threadline.ThreadRun{Text: "hi", BusyStrategy: threadline.BusyReject}, threadlinev1.BusyStrategy_BUSY_STRATEGY_REJECT},
		{&threadline.ThreadRun{Text: "hi", BusyStrategy: threadline.BusyEnqueue}, threadlinev1.BusyStrategy_BUSY_STRATEGY_ENQUEUE},
		{&threadline.ThreadRun{Text: "hi", BusyStrategy: threadline.BusyInterrupt}, threadlinev1.BusyStrategy_BUSY_STRATEGY_INTERRUPT},
		{&threadline.ThreadRun{Text: "hi", BusyStrategy: threadline.BusyRollback}, threadlinev1.BusyStrategy_BUSY_STRATEGY_ROLLBACK},
	} {
		spec, err := threadline.RunSpecOf(tc.run, "thread_t")
		if err != nil || spec.GetBusyStrategy() != tc.want || spec.GetThreadId() != "thread_t" {
			t.Errorf("%v: spec %v, %v; want busy_strategy %v", tc.run.BusyStrategy, spec, err, tc.want)
		}
	}

	// StartRun and Run send it (seen by an interceptor that fails each call itself: no retries).
	var sent []threadlinev1.BusyStrategy
	var mu sync.Mutex
	c, err := threadline.Dial(droppingListener(t), threadline.WithDialOptions(grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if r, ok := req.(interface {
				GetSpec() *threadlinev1.ThreadRunSpec
			}); ok {
				mu.Lock()
				sent = append(sent, r.GetSpec().GetBusyStrategy())
				mu.Unlock()
			}
			return status.Error(codes.PermissionDenied, "not sent") // not retried
		})))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	enqueue := &threadline.ThreadRun{Text: "hi", BusyStrategy: threadline.BusyEnqueue}
	if _, err := c.Threads().StartRun(t.Context(), "thread_t", enqueue); threadline.CodeOf(err) != codes.PermissionDenied {
		t.Errorf("StartRun: %v", err)
	}
	if _, err := c.Threads().Run(t.Context(), "thread_t", enqueue); threadline.CodeOf(err) != codes.PermissionDenied {
		t.Errorf("Run: %v", err)
	}
	interrupt := &threadline.ThreadRun{Text: "hi", BusyStrategy: threadline.BusyInterrupt}
	if _, err := c.Threads().StartRun(t.Context(), "thread_t", interrupt); threadline.CodeOf(err) != codes.PermissionDenied {
		t.Errorf("StartRun interrupt: %v", err)
	}
	if _, err := c.Threads().Run(t.Context(), "thread_t", interrupt); threadline.CodeOf(err) != codes.PermissionDenied {
		t.Errorf("Run interrupt: %v", err)
	}
	rollback := &threadline.ThreadRun{Text: "hi", BusyStrategy: threadline.BusyRollback}
	if _, err := c.Threads().StartRun(t.Context(), "thread_t", rollback); threadline.CodeOf(err) != codes.PermissionDenied {
		t.Errorf("StartRun rollback: %v", err)
	}
	if _, err := c.Threads().Run(t.Context(), "thread_t", rollback); threadline.CodeOf(err) != codes.PermissionDenied {
		t.Errorf("Run rollback: %v", err)
	}
	if want := []threadlinev1.BusyStrategy{threadline.BusyEnqueue, threadline.BusyEnqueue, threadline.BusyInterrupt, threadline.BusyInterrupt,
		threadline.BusyRollback, threadline.BusyRollback}; !slices.Equal(sent, want) {
		t.Errorf("sent %v, want %v", sent, want)
	}
}

func TestAPromptIsTextOrPartsNotBoth(t *testing.T) {
	c, err := threadline.Dial("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	both := &threadline.ThreadRun{Text: "hi", Parts: &threadline.PromptParts{}}
	if _, err := c.Threads().Run(t.Context(), "thread_t", both); !errors.Is(err, threadline.ErrPromptAmbiguous) {
		t.Errorf("Run: %v", err)
	}
	if _, err := c.Threads().Stream(t.Context(), "thread_t", both).Collect(); !errors.Is(err, threadline.ErrPromptAmbiguous) {
		t.Errorf("Stream: %v", err)
	}
}

func TestCollectAfterCloseSaysTheStreamWasClosed(t *testing.T) {
	c, ctx := newClient(t)
	made, err := c.Threads().Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Threads().Stream(ctx, made.GetThreadId(), &threadline.ThreadRun{Text: "hi"})
	_ = s.Close()
	if _, err := s.Collect(); !errors.Is(err, threadline.ErrStreamClosed) {
		t.Errorf("Collect after Close: %v", err)
	}
	if s.Err() != nil {
		t.Errorf("Err after Close: %v", s.Err())
	}
}
