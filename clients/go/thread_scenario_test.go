package threadline_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	threadline "github.com/threadline-dev/threadline/clients/go"
	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// The shared threads scenarios (clients/python/tests/test_thread_scenarios.py), driven through
// Client.Threads against the suite's server, which keeps its threads in memory. Its "default"
// agent is the scripted demo (server/demo.py): "delete <path>" asks for approval, "lookup" calls
// a plain tool, "count" bumps a counter in capability state, "sleep <s>" sleeps,
// `client:<name> {json}` calls a client tool the host declared, anything else is echoed.

var getWeather = &threadline.ClientTool{
	Name:                 "get_weather",
	Description:          "The weather in a city.",
	ParametersJsonSchema: `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`,
}

func freshID(what string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "thread_" + what + hex.EncodeToString(b[:])
}

func randomHex() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// caseOf names the case of an event's oneof, e.g. "run_started", "thread_committed".
func caseOf(ev *threadline.RunEvent) string {
	m := ev.ProtoReflect()
	fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("event"))
	if fd == nil {
		return ""
	}
	return string(fd.Name())
}

func caseNames(events []*threadline.RunEvent) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = caseOf(ev)
	}
	return out
}

func callArgs(t *testing.T, call *threadline.DeferredToolCall) map[string]any {
	t.Helper()
	var args map[string]any
	if err := json.Unmarshal([]byte(call.GetArgsJson()), &args); err != nil {
		t.Fatalf("args_json %q: %v", call.GetArgsJson(), err)
	}
	return args
}

// collectAll reads a whole iterator, failing the test on its error.
func collectAll[T any](t *testing.T, seq func(func(T, error) bool)) []T {
	t.Helper()
	var out []T
	for v, err := range seq {
		if err != nil {
			t.Fatalf("listing: %v", err)
		}
		out = append(out, v)
	}
	return out
}

func threadIDs(threads []*threadline.Thread) []string {
	ids := make([]string, len(threads))
	for i, th := range threads {
		ids[i] = th.GetThreadId()
	}
	return ids
}

// asErr asserts that err is (or wraps) a *T with the given code and reason, and returns it.
func asErr[T error](t *testing.T, err error, code codes.Code, reason string) T {
	t.Helper()
	var typed T
	if !errors.As(err, &typed) {
		t.Fatalf("error %v (%T): want a %T", err, err, typed)
	}
	if threadline.CodeOf(err) != code || threadline.ReasonOf(err) != reason {
		t.Fatalf("error %v: want %v %s", err, code, reason)
	}
	var base *threadline.Error
	if !errors.As(err, &base) || base.Reason() != reason {
		t.Fatalf("error %v: not an *Error with reason %s", err, reason)
	}
	return typed
}

func mustCreate(t *testing.T, th *threadline.Threads, ctx context.Context, spec *threadline.CreateThread) *threadline.Thread {
	t.Helper()
	made, err := th.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return made
}

func mustGet(t *testing.T, th *threadline.Threads, ctx context.Context, id string) *threadline.Thread {
	t.Helper()
	got, err := th.Get(ctx, id, false)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return got
}

func mustRun(t *testing.T, th *threadline.Threads, ctx context.Context, id string, run *threadline.ThreadRun) *threadline.ThreadRunOutcome {
	t.Helper()
	outcome, err := th.Run(ctx, id, run)
	if err != nil {
		t.Fatalf("Run %+v: %v", run, err)
	}
	return outcome
}

// suspendedOnDelete returns a new thread suspended on the approval of delete_file(path), and that call.
func suspendedOnDelete(t *testing.T, th *threadline.Threads, ctx context.Context, path string) (*threadline.Thread, *threadline.DeferredToolCall) {
	t.Helper()
	made := mustCreate(t, th, ctx, nil)
	outcome := mustRun(t, th, ctx, made.GetThreadId(), &threadline.ThreadRun{Text: "delete " + path})
	if outcome.Result.GetStatus() != threadline.StatusSuspended {
		t.Fatalf("status %v, want suspended", outcome.Result.GetStatus())
	}
	got := mustGet(t, th, ctx, made.GetThreadId())
	if got.GetStatus() != threadline.ThreadSuspended || got.GetPending() == nil {
		t.Fatalf("thread %v pending %v: want suspended with a batch", got.GetStatus(), got.GetPending())
	}
	approvals := got.GetPending().GetApprovals()
	if len(approvals) != 1 {
		t.Fatalf("approvals %v: want one", approvals)
	}
	call := approvals[0]
	if call.GetToolName() != "delete_file" || !maps.Equal(callArgs(t, call), map[string]any{"path": path}) {
		t.Fatalf("call %s(%s): want delete_file(path=%s)", call.GetToolName(), call.GetArgsJson(), path)
	}
	return got, call
}

// sleeping starts a run that sleeps 30 s and reads it until the sleep tool is called, so a
// cancel lands inside the tool, clear of its checkpoint boundaries. It returns the stream and the
// run's ID.
func sleeping(t *testing.T, th *threadline.Threads, ctx context.Context, id string) (*threadline.ThreadRunStream, string) {
	t.Helper()
	s := th.Stream(ctx, id, &threadline.ThreadRun{Text: "sleep 30"})
	t.Cleanup(func() { _ = s.Close() })
	if !s.Receive() {
		t.Fatalf("no first event: %v", s.Err())
	}
	first := s.Msg()
	if caseOf(first) != "run_started" || !strings.HasPrefix(first.GetRunId(), "run-") {
		t.Fatalf("first event %v: want run_started with a run-… ID", first)
	}
	for s.Receive() {
		if call := s.Msg().GetToolCall(); call != nil {
			if call.GetToolName() != "sleep" {
				t.Fatalf("tool %q, want sleep", call.GetToolName())
			}
			return s, first.GetRunId()
		}
	}
	t.Fatalf("the stream ended before the sleep call: %v", s.Err())
	return nil, ""
}

// --- create, get, list, delete -------------------------------------------------------------------

func TestThreadCreateGetListAndDelete(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	label := randomHex()
	made := mustCreate(t, th, ctx, &threadline.CreateThread{Labels: map[string]string{"suite": label, "n": "1"}})

	if !strings.HasPrefix(made.GetThreadId(), "thread_") || made.GetAgent() != "default" {
		t.Errorf("thread %q agent %q", made.GetThreadId(), made.GetAgent())
	}
	if made.GetStatus() != threadline.ThreadIdle || made.GetRevision() != 1 ||
		!maps.Equal(made.GetLabels(), map[string]string{"suite": label, "n": "1"}) {
		t.Errorf("made %v rev %d labels %v", made.GetStatus(), made.GetRevision(), made.GetLabels())
	}
	if made.GetHead() == nil || made.GetHead().GetKind() != threadlinev1.CheckpointKind_CHECKPOINT_KIND_CREATED || made.GetHead().GetState() != nil {
		t.Errorf("head %v: want CREATED without state", made.GetHead())
	}
	if made.GetPending() != nil || made.GetLease() != nil || made.GetRecoveryPending() {
		t.Errorf("pending %v lease %v recovery %v", made.GetPending(), made.GetLease(), made.GetRecoveryPending())
	}
	full, err := th.Get(ctx, made.GetThreadId(), true)
	if err != nil {
		t.Fatal(err)
	}
	if full.GetHead().GetState() == nil || full.GetHead().GetState().GetThreadId() != made.GetThreadId() {
		t.Errorf("full view head state %v", full.GetHead().GetState())
	}
	if mustGet(t, th, ctx, made.GetThreadId()).GetHead().GetState() != nil {
		t.Error("basic view carries the state")
	}

	chosen := freshID("sdk")
	if got := mustCreate(t, th, ctx, &threadline.CreateThread{ThreadID: chosen, Labels: map[string]string{"suite": label}}); got.GetThreadId() != chosen {
		t.Errorf("chosen ID %q, want %q", got.GetThreadId(), chosen)
	}
	_, err = th.Create(ctx, &threadline.CreateThread{ThreadID: chosen})
	asErr[*threadline.ThreadExistsError](t, err, codes.AlreadyExists, threadline.ReasonThreadExists)
	third := mustCreate(t, th, ctx, &threadline.CreateThread{Labels: map[string]string{"suite": label}})

	every := []string{made.GetThreadId(), chosen, third.GetThreadId()}
	slices.Sort(every)
	bySuite := threadline.ListThreads{Labels: map[string]string{"suite": label}}
	if got := threadIDs(collectAll(t, th.List(ctx, bySuite))); !slices.Equal(slices.Sorted(slices.Values(got)), every) {
		t.Errorf("list %v, want %v", got, every)
	}
	onePerPage := bySuite
	onePerPage.PageSize = 1
	if got := threadIDs(collectAll(t, th.List(ctx, onePerPage))); !slices.Equal(slices.Sorted(slices.Values(got)), every) {
		t.Errorf("list page by page %v, want every page, each thread once: %v", got, every)
	}
	twoPerPage := bySuite
	twoPerPage.PageSize = 2
	page, err := th.ListPage(ctx, twoPerPage, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.GetThreads()) != 2 || page.GetNextPageToken() == "" {
		t.Errorf("page of %d, next %q", len(page.GetThreads()), page.GetNextPageToken())
	}
	both := threadline.ListThreads{Labels: map[string]string{"suite": label, "n": "1"}}
	if got := threadIDs(collectAll(t, th.List(ctx, both))); !slices.Equal(got, []string{made.GetThreadId()}) {
		t.Errorf("list by both labels %v", got)
	}
	suspended := bySuite
	suspended.Status = threadline.ThreadSuspended
	if got := collectAll(t, th.List(ctx, suspended)); len(got) != 0 {
		t.Errorf("suspended threads %v, want none", threadIDs(got))
	}

	conflict := asErr[*threadline.RevisionConflictError](t, th.Delete(ctx, chosen, 5), codes.Aborted, threadline.ReasonRevisionConflict)
	if conflict.CurrentRevision != 1 {
		t.Errorf("current revision %d, want 1", conflict.CurrentRevision)
	}
	if err := th.Delete(ctx, chosen, 1); err != nil {
		t.Fatal(err)
	}
	if err := th.Delete(ctx, third.GetThreadId(), 0); err != nil {
		t.Fatal(err)
	}
	_, err = th.Get(ctx, chosen, false)
	asErr[*threadline.ThreadNotFoundError](t, err, codes.NotFound, threadline.ReasonThreadNotFound)
	if got := threadIDs(collectAll(t, th.List(ctx, bySuite))); !slices.Equal(got, []string{made.GetThreadId()}) {
		t.Errorf("after delete %v", got)
	}
}

func TestThreadMissingCheckpointsRunsAndThreadsAreTyped(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	made := mustCreate(t, th, ctx, nil)

	_, err := th.Checkpoint(ctx, made.GetThreadId(), 99)
	asErr[*threadline.CheckpointNotFoundError](t, err, codes.NotFound, threadline.ReasonCheckpointNotFound)
	_, err = th.Cancel(ctx, made.GetThreadId(), "run-"+randomHex())
	asErr[*threadline.RunNotFoundError](t, err, codes.NotFound, threadline.ReasonRunNotFound)
	_, err = th.Run(ctx, freshID("missing"), &threadline.ThreadRun{Text: "hello"})
	asErr[*threadline.ThreadNotFoundError](t, err, codes.NotFound, threadline.ReasonThreadNotFound)
	var listed []*threadline.Checkpoint
	var listErr error
	for cp, err := range th.Checkpoints(ctx, freshID("missing"), 0) {
		if err != nil {
			listErr = err
			break
		}
		listed = append(listed, cp)
	}
	if listed != nil {
		t.Errorf("checkpoints of a missing thread: %v", listed)
	}
	asErr[*threadline.ThreadNotFoundError](t, listErr, codes.NotFound, threadline.ReasonThreadNotFound)
}

func TestThreadServerInfoNamesTheThreadStore(t *testing.T) {
	c, ctx := newClient(t)
	info, err := c.ServerInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.GetThreadStore() == nil || info.GetThreadStore().GetKind() != threadlinev1.ThreadStoreKind_THREAD_STORE_KIND_MEMORY {
		t.Errorf("thread store %v, want MEMORY", info.GetThreadStore())
	}
}

// --- import --------------------------------------------------------------------------------------

func TestThreadImportASuspendedStateAndAnswerItByCallID(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	held := run(t, c, ctx, &threadline.RunSpec{Prompt: threadline.Text("delete notes.txt")}, threadline.StatusSuspended)

	made := mustCreate(t, th, ctx, &threadline.CreateThread{State: held.GetState(), Pending: held.GetDeferred()})

	if made.GetThreadId() != held.GetState().GetThreadId() || made.GetStatus() != threadline.ThreadSuspended {
		t.Errorf("imported %q %v", made.GetThreadId(), made.GetStatus())
	}
	if made.GetHead().GetKind() != threadlinev1.CheckpointKind_CHECKPOINT_KIND_IMPORTED {
		t.Errorf("head kind %v", made.GetHead().GetKind())
	}
	approvals := made.GetPending().GetApprovals() // answered from what the thread says, not from held
	if len(approvals) != 1 || approvals[0].GetToolCallId() != held.GetDeferred().GetApprovals()[0].GetToolCallId() {
		t.Fatalf("pending %v", made.GetPending())
	}
	answers := threadline.NewAnswers(made.GetPending()).Approve(approvals[0].GetToolCallId())

	outcome := mustRun(t, th, ctx, made.GetThreadId(), &threadline.ThreadRun{Answers: answers.Results()})

	if outcome.Result.GetStatus() != threadline.StatusCompleted || output(t, outcome.Result) != "Tool results: delete_file: Deleted notes.txt." {
		t.Errorf("outcome %v %q", outcome.Result.GetStatus(), outcome.Result.GetOutputJson())
	}
	after := mustGet(t, th, ctx, made.GetThreadId())
	if after.GetStatus() != threadline.ThreadIdle || after.GetPending() != nil || after.GetRevision() != outcome.Revision {
		t.Errorf("after: %v pending %v rev %d, want IDLE, none, %d", after.GetStatus(), after.GetPending(), after.GetRevision(), outcome.Revision)
	}
}

func TestThreadAnImportWhoseBatchDoesNotMatchItsStateIsRefused(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	held := run(t, c, ctx, &threadline.RunSpec{Prompt: threadline.Text("delete notes.txt")}, threadline.StatusSuspended)
	empty, err := c.NewState(ctx, "")
	if err != nil {
		t.Fatal(err)
	}

	_, err = th.Create(ctx, &threadline.CreateThread{State: empty, Pending: held.GetDeferred()})

	if threadline.CodeOf(err) != codes.FailedPrecondition || threadline.ReasonOf(err) != threadline.ReasonDeferredRequestMissing {
		t.Errorf("error %v: want failed_precondition DEFERRED_REQUEST_MISSING", err)
	}
	_, err = th.Get(ctx, empty.GetThreadId(), false)
	asErr[*threadline.ThreadNotFoundError](t, err, codes.NotFound, threadline.ReasonThreadNotFound)
}

// --- streaming a turn ----------------------------------------------------------------------------

func TestThreadStreamATurn(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	made := mustCreate(t, th, ctx, nil)

	s := th.Stream(ctx, made.GetThreadId(), &threadline.ThreadRun{Text: "lookup threadline"})
	defer s.Close()
	var events []*threadline.RunEvent
	for s.Receive() {
		events = append(events, s.Msg())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}

	kinds := caseNames(events)
	for i, ev := range events {
		if ev.GetSequence() != uint64(i) {
			t.Fatalf("sequences %v", events)
		}
		if ev.GetThreadId() != made.GetThreadId() {
			t.Errorf("event %d thread %q", i, ev.GetThreadId())
		}
	}
	n := len(kinds)
	if n < 3 || kinds[0] != "run_started" || kinds[n-2] != "thread_committed" || kinds[n-1] != "result" {
		t.Fatalf("events %v: want run_started first, thread_committed then result last", kinds)
	}
	count := map[string]int{}
	for _, k := range kinds {
		count[k]++
	}
	if count["result"] != 1 || count["checkpoint_candidate"] != 0 || count["tool_call"] == 0 || count["tool_result"] == 0 || count["part_delta"] == 0 {
		t.Errorf("events %v", kinds)
	}
	var commits []*threadlinev1.ThreadCommitted
	for _, ev := range events {
		if c := ev.GetThreadCommitted(); c != nil {
			commits = append(commits, c)
		}
	}
	for i, cm := range commits {
		if i > 0 && cm.GetRevision() <= commits[i-1].GetRevision() {
			t.Errorf("revisions do not grow: %v", commits)
		}
		want := threadlinev1.CheckpointKind_CHECKPOINT_KIND_MID_RUN
		if i == len(commits)-1 {
			want = threadlinev1.CheckpointKind_CHECKPOINT_KIND_COMPLETED
		}
		if cm.GetKind() != want || cm.GetReplayed() {
			t.Errorf("commit %d: %v replayed %v, want %v", i, cm.GetKind(), cm.GetReplayed(), want)
		}
	}
	if commits[0].GetRevision() <= made.GetRevision() {
		t.Errorf("first commit %d, thread was at %d", commits[0].GetRevision(), made.GetRevision())
	}
	last := commits[len(commits)-1].GetRevision()

	outcome := s.Outcome()
	collected, err := s.Collect()
	if err != nil || outcome == nil || *collected != *outcome {
		t.Fatalf("outcome %v, collected %v, %v", outcome, collected, err)
	}
	result := outcome.Result
	if result.GetStatus() != threadline.StatusCompleted || result.GetState() != nil {
		t.Errorf("result %v with state %v: the state is the checkpoint", result.GetStatus(), result.GetState() != nil)
	}
	if result.GetRequestId() != s.RequestID() || result.GetThreadId() != made.GetThreadId() {
		t.Errorf("result request %q thread %q, stream %q", result.GetRequestId(), result.GetThreadId(), s.RequestID())
	}
	if outcome.Revision != last || outcome.Replayed {
		t.Errorf("outcome revision %d replayed %v, want %d false", outcome.Revision, outcome.Replayed, last)
	}
	if got := mustGet(t, th, ctx, made.GetThreadId()).GetRevision(); got != outcome.Revision {
		t.Errorf("thread revision %d, want %d", got, outcome.Revision)
	}
	head, err := th.Checkpoint(ctx, made.GetThreadId(), outcome.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if head.GetKind() != threadlinev1.CheckpointKind_CHECKPOINT_KIND_COMPLETED || head.GetRequestId() != s.RequestID() {
		t.Errorf("head %v request %q", head.GetKind(), head.GetRequestId())
	}
	if data := head.GetState().GetMessageHistory().GetData(); !json.Valid([]byte(data)) || !strings.Contains(data, "lookup") {
		t.Errorf("head history %q", data)
	}

	listed := collectAll(t, th.Checkpoints(ctx, made.GetThreadId(), 2))
	for i, cp := range listed {
		if cp.GetRevision() != outcome.Revision-int64(i) || cp.GetState() != nil {
			t.Errorf("checkpoint %d: revision %d state %v", i, cp.GetRevision(), cp.GetState() != nil)
		}
	}
	if int64(len(listed)) != outcome.Revision {
		t.Errorf("%d checkpoints, want %d: newest first, every page", len(listed), outcome.Revision)
	}

	second, err := th.Stream(ctx, made.GetThreadId(), &threadline.ThreadRun{Text: "hello"}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	if second.Revision <= outcome.Revision || output(t, second.Result) != "You said: hello" {
		t.Errorf("second %d %q", second.Revision, second.Result.GetOutputJson())
	}
}

// --- deferred calls ------------------------------------------------------------------------------

func TestThreadApproveAndDenyByAnswers(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	made, call := suspendedOnDelete(t, th, ctx, "notes.txt")

	approve := threadline.NewAnswers(made.GetPending()).Approve(call.GetToolCallId())
	approved, err := th.Stream(ctx, made.GetThreadId(), &threadline.ThreadRun{Answers: approve.Results()}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	if got := output(t, approved.Result); got != "Tool results: delete_file: Deleted notes.txt." {
		t.Errorf("approved: %q", got)
	}

	deniedOn := mustRun(t, th, ctx, made.GetThreadId(), &threadline.ThreadRun{Text: "delete b.txt"})
	others := deniedOn.Result.GetDeferred().GetApprovals()
	if len(others) != 1 {
		t.Fatalf("deferred %v", deniedOn.Result.GetDeferred())
	}
	deny := threadline.NewAnswers(deniedOn.Result.GetDeferred()).Deny(others[0].GetToolCallId(), "keep it")
	denied := mustRun(t, th, ctx, made.GetThreadId(), &threadline.ThreadRun{Answers: deny.Results()})
	if got := output(t, denied.Result); got != "Tool results: delete_file: keep it" {
		t.Errorf("denied: %q", got)
	}

	again := threadline.NewAnswers(deniedOn.Result.GetDeferred()).Approve(others[0].GetToolCallId())
	_, err = th.Run(ctx, made.GetThreadId(), &threadline.ThreadRun{Answers: again.Results()})
	asErr[*threadline.ThreadNotSuspendedError](t, err, codes.FailedPrecondition, threadline.ReasonThreadNotSuspended)
}

func TestThreadAnIncompleteAnswerIsRefusedAndTheThreadStaysSuspended(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	made, _ := suspendedOnDelete(t, th, ctx, "notes.txt")

	_, err := th.Run(ctx, made.GetThreadId(), &threadline.ThreadRun{Answers: threadline.NewAnswers(made.GetPending()).Results()})

	if threadline.ReasonOf(err) != threadline.ReasonDeferredResultsIncomplete {
		t.Errorf("error %v: want DEFERRED_RESULTS_INCOMPLETE", err)
	}
	if got := mustGet(t, th, ctx, made.GetThreadId()).GetStatus(); got != threadline.ThreadSuspended {
		t.Errorf("status %v, want suspended", got)
	}
}

func TestThreadAClientToolAnsweredWithoutDeclaringItAgain(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	made := mustCreate(t, th, ctx, nil)
	first := mustRun(t, th, ctx, made.GetThreadId(), &threadline.ThreadRun{
		Text: `client:get_weather {"city":"Paris"}`, ClientTools: []*threadline.ClientTool{getWeather},
	})
	if first.Result.GetStatus() != threadline.StatusSuspended {
		t.Fatalf("status %v", first.Result.GetStatus())
	}
	calls := first.Result.GetDeferred().GetCalls()
	if len(calls) != 1 || calls[0].GetKind() != threadline.KindExternal || !maps.Equal(callArgs(t, calls[0]), map[string]any{"city": "Paris"}) {
		t.Fatalf("calls %v", calls)
	}
	head, err := th.Checkpoint(ctx, made.GetThreadId(), first.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if len(head.GetClientTools()) != 1 || head.GetClientTools()[0].GetName() != "get_weather" {
		t.Errorf("head client tools %v", head.GetClientTools())
	}

	// No client tools declared: the pending call meets the tools the head was made with.
	answers := threadline.NewAnswers(first.Result.GetDeferred())
	if err := answers.Return(calls[0].GetToolCallId(), map[string]any{"sky": "clear", "temp_c": 21}); err != nil {
		t.Fatal(err)
	}
	done := mustRun(t, th, ctx, made.GetThreadId(), &threadline.ThreadRun{Answers: answers.Results()})

	if done.Result.GetStatus() != threadline.StatusCompleted {
		t.Fatalf("status %v (failure %v)", done.Result.GetStatus(), done.Result.GetFailure())
	}
	text := output(t, done.Result)
	if !strings.HasPrefix(text, "Tool results: get_weather:") || !strings.Contains(text, "21") || !strings.Contains(text, "clear") {
		t.Errorf("output %q", text)
	}
}

// --- fork and rollback ---------------------------------------------------------------------------

func TestThreadAForkOfASuspendedThreadIsSuspendedOnTheSameCalls(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	source, call := suspendedOnDelete(t, th, ctx, "notes.txt")
	label := randomHex()

	fork, err := th.Fork(ctx, source.GetThreadId(), threadline.ForkOptions{Labels: map[string]string{"fork": label}})
	if err != nil {
		t.Fatal(err)
	}

	if fork.GetThreadId() == source.GetThreadId() || !maps.Equal(fork.GetLabels(), map[string]string{"fork": label}) {
		t.Errorf("fork %q labels %v", fork.GetThreadId(), fork.GetLabels())
	}
	if fork.GetStatus() != threadline.ThreadSuspended || fork.GetRevision() != 1 || fork.GetHead().GetKind() != threadlinev1.CheckpointKind_CHECKPOINT_KIND_FORKED {
		t.Errorf("fork %v rev %d head %v", fork.GetStatus(), fork.GetRevision(), fork.GetHead().GetKind())
	}
	pending := threadline.NewAnswers(fork.GetPending()).Pending()
	if len(pending) != 1 || pending[0].GetToolCallId() != call.GetToolCallId() {
		t.Fatalf("fork pending %v, want %s", fork.GetPending(), call.GetToolCallId())
	}

	approve := threadline.NewAnswers(fork.GetPending()).Approve(fork.GetPending().GetApprovals()[0].GetToolCallId())
	done := mustRun(t, th, ctx, fork.GetThreadId(), &threadline.ThreadRun{Answers: approve.Results()})
	if got := output(t, done.Result); got != "Tool results: delete_file: Deleted notes.txt." {
		t.Errorf("fork's run: %q", got)
	}
	if got := mustGet(t, th, ctx, source.GetThreadId()).GetStatus(); got != threadline.ThreadSuspended {
		t.Errorf("source %v: want untouched, suspended", got)
	}

	_, err = th.Fork(ctx, source.GetThreadId(), threadline.ForkOptions{NewThreadID: source.GetThreadId()})
	if threadline.ReasonOf(err) != threadline.ReasonForkThreadIDConflict {
		t.Errorf("fork onto itself: %v", err)
	}
	_, err = th.Fork(ctx, source.GetThreadId(), threadline.ForkOptions{NewThreadID: fork.GetThreadId()})
	asErr[*threadline.ThreadExistsError](t, err, codes.AlreadyExists, threadline.ReasonThreadExists)
	_, err = th.Fork(ctx, source.GetThreadId(), threadline.ForkOptions{Revision: 999})
	asErr[*threadline.CheckpointNotFoundError](t, err, codes.NotFound, threadline.ReasonCheckpointNotFound)
}

func TestThreadRollbackMakesAnEarlierCheckpointCurrent(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	made := mustCreate(t, th, ctx, nil)
	once := mustRun(t, th, ctx, made.GetThreadId(), &threadline.ThreadRun{Text: "count"})
	twice := mustRun(t, th, ctx, made.GetThreadId(), &threadline.ThreadRun{Text: "count"})
	if output(t, once.Result) != "Tool results: count: 1" || output(t, twice.Result) != "Tool results: count: 2" {
		t.Fatalf("counts %q %q", once.Result.GetOutputJson(), twice.Result.GetOutputJson())
	}

	_, err := th.Rollback(ctx, made.GetThreadId(), once.Revision, once.Revision)
	stale := asErr[*threadline.RevisionConflictError](t, err, codes.Aborted, threadline.ReasonRevisionConflict)
	if stale.CurrentRevision != twice.Revision {
		t.Errorf("current revision %d, want %d", stale.CurrentRevision, twice.Revision)
	}
	rolled, err := th.Rollback(ctx, made.GetThreadId(), once.Revision, twice.Revision)
	if err != nil {
		t.Fatal(err)
	}

	if rolled.GetRevision() != twice.Revision+1 || rolled.GetStatus() != threadline.ThreadIdle || rolled.GetHead().GetKind() != threadlinev1.CheckpointKind_CHECKPOINT_KIND_ROLLED_BACK {
		t.Errorf("rolled %d %v %v", rolled.GetRevision(), rolled.GetStatus(), rolled.GetHead().GetKind())
	}
	again := mustRun(t, th, ctx, made.GetThreadId(), &threadline.ThreadRun{Text: "count"})
	if got := output(t, again.Result); got != "Tool results: count: 2" {
		t.Errorf("after rollback %q: the counter should come back with the checkpoint", got)
	}
	_, err = th.Rollback(ctx, made.GetThreadId(), 999, 0)
	asErr[*threadline.CheckpointNotFoundError](t, err, codes.NotFound, threadline.ReasonCheckpointNotFound)
}

// --- cancel, busy, conflict ----------------------------------------------------------------------

func TestThreadCancelEndsTheRunCancelled(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	made := mustCreate(t, th, ctx, nil)
	s, runID := sleeping(t, th, ctx, made.GetThreadId())

	status, err := th.Cancel(ctx, made.GetThreadId(), runID)
	if err != nil {
		t.Fatal(err)
	}
	if status != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_RUNNING && status != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_CANCELLED {
		t.Errorf("cancel status %v", status)
	}
	outcome, err := s.Collect() // well before the 30 s sleep would end
	if err != nil {
		t.Fatal(err)
	}

	if outcome.Result.GetStatus() != threadline.StatusCancelled || outcome.Result.GetRunId() != runID {
		t.Errorf("result %v run %q, want cancelled %q", outcome.Result.GetStatus(), outcome.Result.GetRunId(), runID)
	}
	head, err := th.Checkpoint(ctx, made.GetThreadId(), outcome.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if head.GetKind() != threadlinev1.CheckpointKind_CHECKPOINT_KIND_CANCELLED || head.GetRunId() != runID {
		t.Errorf("head %v run %q", head.GetKind(), head.GetRunId())
	}
	if status, err := th.Cancel(ctx, made.GetThreadId(), runID); err != nil || status != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_CANCELLED {
		t.Errorf("second cancel %v, %v: want CANCELLED", status, err)
	}
	if got := mustGet(t, th, ctx, made.GetThreadId()).GetStatus(); got != threadline.ThreadIdle {
		t.Errorf("status %v, want idle", got)
	}
}

// The cancel lands while the server commits the run's first checkpoints, not inside a tool.
func TestThreadACancelRightAfterRunStartedEndsTheRunCancelled(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	for i := range 10 { // each lands at a different point of the first model request
		made := mustCreate(t, th, ctx, nil)
		callCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		s := th.Stream(callCtx, made.GetThreadId(), &threadline.ThreadRun{Text: "sleep 30"})
		if !s.Receive() {
			cancel()
			t.Fatalf("round %d: no first event: %v", i, s.Err())
		}
		if _, err := th.Cancel(ctx, made.GetThreadId(), s.Msg().GetRunId()); err != nil {
			cancel()
			t.Fatalf("round %d: cancel: %v", i, err)
		}
		outcome, err := s.Collect()
		cancel()
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if outcome.Result.GetStatus() != threadline.StatusCancelled {
			t.Errorf("round %d: status %v", i, outcome.Result.GetStatus())
		}
		if got := mustGet(t, th, ctx, made.GetThreadId()).GetStatus(); got != threadline.ThreadIdle {
			t.Errorf("round %d: thread %v, want idle", i, got)
		}
	}
}

func TestThreadASecondRunWhileOneRunsIsBusy(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	made := mustCreate(t, th, ctx, nil)
	id := made.GetThreadId()
	s, runID := sleeping(t, th, ctx, id)

	running := mustGet(t, th, ctx, id)
	if running.GetStatus() != threadline.ThreadRunning || running.GetLease().GetRunId() != runID || running.GetLease().GetRequestId() != s.RequestID() {
		t.Errorf("running %v lease %v, want run %q request %q", running.GetStatus(), running.GetLease(), runID, s.RequestID())
	}
	busyCalls := map[string]func() error{
		"another run": func() error {
			_, err := th.Run(ctx, id, &threadline.ThreadRun{Text: "hello"})
			return err
		},
		// (A retry of the running request itself attaches to it instead: LIVE §2.5, below.)
		"a delete": func() error { return th.Delete(ctx, id, 0) },
	}
	for name, call := range busyCalls {
		busy := asErr[*threadline.ThreadBusyError](t, call(), codes.Aborted, threadline.ReasonThreadBusy)
		if busy.RunID != runID || busy.RequestID != s.RequestID() {
			t.Errorf("%s: busy with %q %q, want %q %q", name, busy.RunID, busy.RequestID, runID, s.RequestID())
		}
		if busy.LeaseExpiresAt.IsZero() || busy.LeaseExpiresAt.Before(time.Now().Add(-5*time.Minute)) {
			t.Errorf("%s: lease expires at %v", name, busy.LeaseExpiresAt)
		}
	}

	if _, err := th.Cancel(ctx, id, runID); err != nil {
		t.Fatal(err)
	}
	first, err := s.Collect()
	if err != nil {
		t.Fatal(err)
	}

	// Once it finished, the retry gets its stored outcome.
	retried := mustRun(t, th, ctx, id, &threadline.ThreadRun{Text: "sleep 30", RequestID: s.RequestID()})
	if !retried.Replayed || retried.Result.GetStatus() != threadline.StatusCancelled || retried.Result.GetRunId() != runID || retried.Revision != first.Revision {
		t.Errorf("retried: replayed %v %v run %q rev %d, want replayed CANCELLED %q %d",
			retried.Replayed, retried.Result.GetStatus(), retried.Result.GetRunId(), retried.Revision, runID, first.Revision)
	}
}

func TestThreadAStaleExpectedRevisionIsAConflict(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	made := mustCreate(t, th, ctx, nil)
	moved := mustRun(t, th, ctx, made.GetThreadId(), &threadline.ThreadRun{Text: "hello", ExpectedRevision: made.GetRevision()})
	if moved.Revision <= made.GetRevision() {
		t.Fatalf("revision %d, was %d", moved.Revision, made.GetRevision())
	}

	_, err := th.Run(ctx, made.GetThreadId(), &threadline.ThreadRun{Text: "hello", ExpectedRevision: made.GetRevision()})

	conflict := asErr[*threadline.RevisionConflictError](t, err, codes.Aborted, threadline.ReasonRevisionConflict)
	if conflict.CurrentRevision != moved.Revision {
		t.Errorf("current revision %d, want %d", conflict.CurrentRevision, moved.Revision)
	}
	if got := mustGet(t, th, ctx, made.GetThreadId()).GetRevision(); got != moved.Revision {
		t.Errorf("revision %d, want %d: nothing ran", got, moved.Revision)
	}
	_, err = th.Stream(ctx, made.GetThreadId(), &threadline.ThreadRun{Text: "hello", ExpectedRevision: 1}).Collect()
	asErr[*threadline.RevisionConflictError](t, err, codes.Aborted, threadline.ReasonRevisionConflict)
}

// --- request IDs: retry, replay, reuse -----------------------------------------------------------

func TestThreadTheSameRequestIDRunsOnceAndReplays(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	made := mustCreate(t, th, ctx, nil)
	requestID := "req-" + randomHex()
	same := &threadline.ThreadRun{Text: "hello", RequestID: requestID, ExpectedRevision: made.GetRevision()}

	first := mustRun(t, th, ctx, made.GetThreadId(), same)
	// The retry carries the now stale expected revision: a finished request is replayed regardless.
	again := mustRun(t, th, ctx, made.GetThreadId(), same)
	s := th.Stream(ctx, made.GetThreadId(), same)
	defer s.Close()
	var replay []*threadline.RunEvent
	for s.Receive() {
		replay = append(replay, s.Msg())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}

	if first.Replayed || !again.Replayed || again.Revision != first.Revision {
		t.Errorf("first replayed %v, again replayed %v rev %d (first %d)", first.Replayed, again.Replayed, again.Revision, first.Revision)
	}
	if again.Result.GetRunId() != first.Result.GetRunId() || again.Result.GetRequestId() != requestID {
		t.Errorf("again run %q request %q", again.Result.GetRunId(), again.Result.GetRequestId())
	}
	if output(t, again.Result) != "You said: hello" || output(t, first.Result) != "You said: hello" {
		t.Errorf("outputs %q %q", first.Result.GetOutputJson(), again.Result.GetOutputJson())
	}
	if got := caseNames(replay); !slices.Equal(got, []string{"run_started", "thread_committed", "result"}) {
		t.Errorf("replay events %v", got)
	}
	if o := s.Outcome(); o == nil || !o.Replayed || o.Revision != first.Revision {
		t.Errorf("stream outcome %+v", o)
	}
	for _, ev := range replay {
		if ev.GetRunId() != first.Result.GetRunId() {
			t.Errorf("replay event run %q, want %q", ev.GetRunId(), first.Result.GetRunId())
		}
	}
	// One run: the thread did not move, and every checkpoint of the request has the same run.
	if got := mustGet(t, th, ctx, made.GetThreadId()).GetRevision(); got != first.Revision {
		t.Errorf("revision %d, want %d", got, first.Revision)
	}
	runs := map[string]bool{}
	for _, cp := range collectAll(t, th.Checkpoints(ctx, made.GetThreadId(), 0)) {
		if cp.GetRequestId() == requestID {
			runs[cp.GetRunId()] = true
		}
	}
	if !maps.Equal(runs, map[string]bool{first.Result.GetRunId(): true}) {
		t.Errorf("runs of the request %v, want only %q", runs, first.Result.GetRunId())
	}

	_, err := th.Run(ctx, made.GetThreadId(), &threadline.ThreadRun{Text: "something else", RequestID: requestID})
	asErr[*threadline.RequestIDReusedError](t, err, codes.InvalidArgument, threadline.ReasonRequestIDReused)
}

// cuttingProxy is a loopback proxy to upstream whose first connection is cut just as the server
// starts to answer a call (its first HEADERS frame on a stream): the server ran the call, the
// client never hears back. Later connections pass through. seen returns one entry per connection.
func cuttingProxy(t *testing.T, upstream string) (addr string, seen func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		log   []string
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c ...net.Conn) {
		mu.Lock()
		conns = append(conns, c...)
		mu.Unlock()
	}
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	handle := func(client net.Conn) {
		defer wg.Done()
		server, err := net.Dial("tcp", upstream)
		if err != nil {
			_ = client.Close()
			return
		}
		track(client, server)
		mu.Lock()
		first := len(log) == 0
		if first {
			log = append(log, "cut")
		} else {
			log = append(log, "passed")
		}
		mu.Unlock()
		go func() { _, _ = io.Copy(server, client); _ = server.Close() }()
		if !first {
			_, _ = io.Copy(client, server)
			_ = client.Close()
			return
		}
		// Relay the server's frames (SETTINGS, PING, ...) up to the call's response headers.
		defer client.Close()
		defer server.Close()
		header := make([]byte, 9)
		for {
			if _, err := io.ReadFull(server, header); err != nil {
				return
			}
			length := int(header[0])<<16 | int(header[1])<<8 | int(header[2])
			kind, stream := header[3], binary.BigEndian.Uint32(header[5:9])&0x7fffffff
			payload := make([]byte, length)
			if _, err := io.ReadFull(server, payload); err != nil {
				return
			}
			if kind == 0x1 && stream != 0 {
				return // the call's response: never delivered
			}
			if _, err := client.Write(append(header, payload...)); err != nil {
				return
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go handle(client)
		}
	}()
	return ln.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(log)
	}
}

func TestThreadRunRetriesALostAnswerWithTheSameRequestID(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	made := mustCreate(t, th, ctx, nil)
	addr, seen := cuttingProxy(t, serverAddr)
	cut, err := threadline.Dial(addr, threadline.WithRunTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Close()

	outcome, err := cut.Threads().Run(ctx, made.GetThreadId(), &threadline.ThreadRun{Text: "hello"})
	if err != nil {
		t.Fatalf("Run through the cutting proxy: %v (connections %v)", err, seen())
	}

	// The first attempt ran and committed; its answer was lost, so the SDK sent the request again
	// under the same ID, and the server answered it from its record instead of running it twice.
	if got := seen(); !slices.Equal(got, []string{"cut", "passed"}) {
		t.Errorf("connections %v, want [cut passed]", got)
	}
	if !outcome.Replayed || outcome.Result.GetStatus() != threadline.StatusCompleted || output(t, outcome.Result) != "You said: hello" {
		t.Errorf("outcome replayed %v %v %q", outcome.Replayed, outcome.Result.GetStatus(), outcome.Result.GetOutputJson())
	}
	if got := mustGet(t, th, ctx, made.GetThreadId()).GetRevision(); got != outcome.Revision {
		t.Errorf("revision %d, want %d", got, outcome.Revision)
	}
	runs := map[string]bool{}
	for _, cp := range collectAll(t, th.Checkpoints(ctx, made.GetThreadId(), 0)) {
		if cp.GetRunId() != "" {
			runs[cp.GetRunId()] = true
		}
	}
	if !maps.Equal(runs, map[string]bool{outcome.Result.GetRunId(): true}) {
		t.Errorf("runs %v, want only %q", runs, outcome.Result.GetRunId())
	}
}

// --- live runs: join, reconnect, watch, attach (LIVE §2) -------------------------------------------

// drain reads a thread run stream to its end and returns its events and outcome.
func drain(t *testing.T, s *threadline.ThreadRunStream) ([]*threadline.RunEvent, *threadline.ThreadRunOutcome) {
	t.Helper()
	defer s.Close()
	var events []*threadline.RunEvent
	for s.Receive() {
		events = append(events, s.Msg())
	}
	outcome, err := s.Collect()
	if err != nil {
		t.Fatalf("stream ended with %v after %v", err, caseNames(events))
	}
	return events, outcome
}

// sameEvents fails the test unless got and want are the same events: the same sequences, the
// same contents (what the server encoded once).
func sameEvents(t *testing.T, what string, got, want []*threadline.RunEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events %v, want %d %v", what, len(got), caseNames(got), len(want), caseNames(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("%s: event %d is\n%v\nwant\n%v", what, i, got[i], want[i])
		}
	}
}

// sequences returns the events' sequence numbers.
func sequences(events []*threadline.RunEvent) []uint64 {
	out := make([]uint64, len(events))
	for i, ev := range events {
		out[i] = ev.GetSequence()
	}
	return out
}

// untilToolCall reads s until its first tool_call event and returns the events so far.
func untilToolCall(t *testing.T, s *threadline.ThreadRunStream) []*threadline.RunEvent {
	t.Helper()
	var events []*threadline.RunEvent
	for s.Receive() {
		events = append(events, s.Msg())
		if s.Msg().GetToolCall() != nil {
			return events
		}
	}
	t.Fatalf("the stream ended before a tool call: %v after %v", s.Err(), caseNames(events))
	return nil
}

// untilToolRuns reads until the tool of the first tool call is running: its dispatch was committed
// with the response that called it (LIVE §5.2), whose thread_committed follows the tool_call.
func untilToolRuns(t *testing.T, s *threadline.ThreadRunStream) []*threadline.RunEvent {
	t.Helper()
	events := untilToolCall(t, s)
	for s.Receive() {
		events = append(events, s.Msg())
		if s.Msg().GetThreadCommitted() != nil {
			return events
		}
	}
	t.Fatalf("the stream ended before the tool's commit: %v after %v", s.Err(), caseNames(events))
	return nil
}

func TestThreadJoinAFinishedRunYieldsTheEventsOfItsStream(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	made := mustCreate(t, th, ctx, nil)
	id := made.GetThreadId()
	streamed, outcome := drain(t, th.Stream(ctx, id, &threadline.ThreadRun{Text: "lookup grpc"}))
	runID := outcome.Result.GetRunId()
	if !slices.Contains(caseNames(streamed), "tool_call") || caseOf(streamed[len(streamed)-1]) != "result" {
		t.Fatalf("streamed %v", caseNames(streamed))
	}

	joined, again := drain(t, th.JoinRun(ctx, id, threadline.JoinRun{RunID: runID}))
	sameEvents(t, "join by run ID", joined, streamed)
	if again.Revision != outcome.Revision || again.Replayed || !proto.Equal(again.Result, outcome.Result) {
		t.Errorf("join's outcome %+v, want %+v", again, outcome)
	}
	// Its request names the same attempt; no name at all, the thread's latest.
	s := th.Stream(ctx, id, &threadline.ThreadRun{Text: "hello"})
	_, _ = drain(t, s)
	first, _ := drain(t, th.JoinRun(ctx, id, threadline.JoinRun{RequestID: s.RequestID()}))
	latest, _ := drain(t, th.JoinRun(ctx, id, threadline.JoinRun{}))
	sameEvents(t, "join by request ID vs the latest", first, latest)
	if first[0].GetRunId() == runID {
		t.Errorf("the latest run is still %s", runID)
	}

	_, err := drain2(th.JoinRun(ctx, id, threadline.JoinRun{RunID: "run-" + randomHex()}))
	asErr[*threadline.RunNotFoundError](t, err, codes.NotFound, threadline.ReasonRunNotFound)
	_, err = drain2(th.JoinRun(ctx, freshID("missing"), threadline.JoinRun{}))
	asErr[*threadline.ThreadNotFoundError](t, err, codes.NotFound, threadline.ReasonThreadNotFound)
}

// drain2 reads a stream to its end and returns its events and error.
func drain2(s *threadline.ThreadRunStream) ([]*threadline.RunEvent, error) {
	defer s.Close()
	var events []*threadline.RunEvent
	for s.Receive() {
		events = append(events, s.Msg())
	}
	return events, s.Err()
}

func TestThreadJoinAfterASequenceYieldsExactlyTheEventsAfterIt(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	id := mustCreate(t, th, ctx, nil).GetThreadId()
	streamed, outcome := drain(t, th.Stream(ctx, id, &threadline.ThreadRun{Text: "lookup grpc"}))
	for _, k := range []uint64{0, streamed[len(streamed)/2].GetSequence(), streamed[len(streamed)-2].GetSequence()} {
		var want []*threadline.RunEvent
		for _, ev := range streamed {
			if ev.GetSequence() > k {
				want = append(want, ev)
			}
		}
		joined, _ := drain(t, th.JoinRun(ctx, id, threadline.JoinRun{RunID: outcome.Result.GetRunId(), AfterSequence: &k}))
		sameEvents(t, fmt.Sprintf("after %d", k), joined, want)
	}
}

// forwarder is a loopback TCP forwarder to upstream whose connections the test can cut at once.
type forwarder struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	conns    []net.Conn
	accepted int
	refuse   time.Time // until then, accepted connections are closed at once
	wg       sync.WaitGroup
}

func newForwarder(t *testing.T, upstream string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln, upstream: upstream}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		f.cut(0)
		f.wg.Wait()
	})
	return f
}

func (f *forwarder) addr() string { return f.ln.Addr().String() }

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		client, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.accepted++
		refusing := time.Now().Before(f.refuse)
		f.mu.Unlock()
		if refusing {
			_ = client.Close()
			continue
		}
		f.mu.Lock()
		upstream := f.upstream
		f.mu.Unlock()
		server, err := net.Dial("tcp", upstream)
		if err != nil {
			_ = client.Close()
			continue
		}
		f.mu.Lock()
		f.conns = append(f.conns, client, server)
		f.mu.Unlock()
		f.wg.Add(2)
		go func() { defer f.wg.Done(); _, _ = io.Copy(server, client); _ = server.Close() }()
		go func() { defer f.wg.Done(); _, _ = io.Copy(client, server); _ = client.Close() }()
	}
}

// cut closes every open connection, and refuses new ones for the next refuse.
func (f *forwarder) cut(refuse time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse = time.Now().Add(refuse)
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.conns = nil
}

// retarget sends the connections accepted from now on to upstream.
func (f *forwarder) retarget(upstream string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.upstream = upstream
}

func (f *forwarder) connections() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accepted
}

func TestThreadAStreamCutMidRunIsResumedWithNoEventLostOrRepeated(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	id := mustCreate(t, th, ctx, nil).GetThreadId()
	fwd := newForwarder(t, serverAddr)
	cutClient, _ := dialAt(t, fwd.addr())

	s := cutClient.Threads().Stream(ctx, id, &threadline.ThreadRun{Text: "sleep 3"})
	got := untilToolCall(t, s)
	fwd.cut(300 * time.Millisecond)
	rest, outcome := drain(t, s)
	got = append(got, rest...)
	if fwd.connections() < 2 {
		t.Errorf("%d connections: the stream did not reconnect", fwd.connections())
	}
	if outcome.Result.GetStatus() != threadline.StatusCompleted {
		t.Errorf("status %v", outcome.Result.GetStatus())
	}
	// Exactly the uncut stream: what a join from the first event gets once the run ended.
	uncut, _ := drain(t, th.JoinRun(ctx, id, threadline.JoinRun{RunID: outcome.Result.GetRunId()}))
	sameEvents(t, "the resumed stream vs the uncut", got, uncut)
	if want := sequences(uncut); !slices.Equal(sequences(got), want) {
		t.Errorf("sequences %v, want %v", sequences(got), want)
	}

	// A join is resumed the same way.
	s = cutClient.Threads().Stream(ctx, id, &threadline.ThreadRun{Text: "sleep 3"})
	first := untilToolCall(t, s)
	join := cutClient.Threads().JoinRun(ctx, id, threadline.JoinRun{RunID: first[0].GetRunId()})
	joined := untilToolCall(t, join)
	fwd.cut(300 * time.Millisecond)
	rest, _ = drain(t, join)
	joined = append(joined, rest...)
	streamed, _ := drain(t, s)
	sameEvents(t, "the resumed join vs the resumed stream", joined, append(first, streamed...))

	// Opted out, the cut ends the stream UNAVAILABLE, as before; the run goes on and commits.
	s = cutClient.Threads().Stream(ctx, id, &threadline.ThreadRun{Text: "sleep 3", NoReconnect: true})
	before := untilToolCall(t, s)
	fwd.cut(0)
	mid, err := drain2(s)
	if threadline.CodeOf(err) != codes.Unavailable {
		t.Fatalf("opted out: %v, want UNAVAILABLE", err)
	}
	// Events already in flight when the cut came may still arrive; the join takes over after them.
	seen := append(before, mid...)
	last, _ := s.LastSequence()
	after, outcome := drain(t, th.JoinRun(ctx, id, threadline.JoinRun{RunID: s.RunID(), AfterSequence: &last}))
	if last != seen[len(seen)-1].GetSequence() {
		t.Errorf("last sequence %d, but the stream's last event was %d", last, seen[len(seen)-1].GetSequence())
	}
	if outcome.Result.GetStatus() != threadline.StatusCompleted || after[0].GetSequence() != last+1 {
		t.Errorf("the opted-out run's rest %v after %d ended %v", sequences(after), last, outcome.Result.GetStatus())
	}
}

func TestThreadWatchSeesARunStartCommitAndEnd(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	id := mustCreate(t, th, ctx, nil).GetThreadId()
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	updates := make(chan *threadline.ThreadUpdate, 64)
	errs := make(chan error, 1)
	go func() {
		defer close(updates)
		for u, err := range th.WatchThread(watchCtx, id) {
			if err != nil {
				errs <- err
				return
			}
			updates <- u
		}
	}()
	next := func() *threadline.ThreadUpdate {
		t.Helper()
		select {
		case u, ok := <-updates:
			if !ok {
				t.Fatalf("the watch ended: %v", <-errs)
			}
			return u
		case <-time.After(20 * time.Second):
			t.Fatal("no update within 20 s")
			return nil
		}
	}
	snapshot := next()
	if !slices.Equal(snapshot.GetChanges(), []threadline.ThreadChange{threadline.ChangeSnapshot}) || snapshot.GetThread().GetThreadId() != id {
		t.Fatalf("first update %v", snapshot)
	}

	outcome := mustRun(t, th, ctx, id, &threadline.ThreadRun{Text: "hello"})
	at := map[threadline.ThreadChange]int{}
	seq := snapshot.GetChangeSequence()
	for i := 1; at[threadline.ChangeRunEnded] == 0; i++ {
		u := next()
		if u.GetChangeSequence() <= seq {
			t.Errorf("change_sequence %d after %d", u.GetChangeSequence(), seq)
		}
		seq = u.GetChangeSequence()
		for _, kind := range u.GetChanges() {
			if at[kind] == 0 {
				at[kind] = i
			}
		}
		if at[threadline.ChangeRunEnded] != 0 && (u.GetThread().GetStatus() != threadline.ThreadIdle || u.GetThread().GetRevision() != outcome.Revision) {
			t.Errorf("after the run: %v at revision %d, want IDLE at %d", u.GetThread().GetStatus(), u.GetThread().GetRevision(), outcome.Revision)
		}
	}
	started, committed, ended := at[threadline.ChangeRunStarted], at[threadline.ChangeCommitted], at[threadline.ChangeRunEnded]
	if started == 0 || committed == 0 || !(started <= committed && committed <= ended) {
		t.Errorf("RUN_STARTED at %d, COMMITTED at %d, RUN_ENDED at %d: want all three in that order", started, committed, ended)
	}
	if at[threadline.ChangeSnapshot] != 0 {
		t.Errorf("a second SNAPSHOT at %d", at[threadline.ChangeSnapshot])
	}

	// Deleting the thread ends the watch NOT_FOUND.
	if err := th.Delete(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	for range updates {
	}
	asErr[*threadline.ThreadNotFoundError](t, <-errs, codes.NotFound, threadline.ReasonThreadNotFound)
}

func TestThreadARetryOfARunningRequestAttachesFromTheFirstEvent(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	id := mustCreate(t, th, ctx, nil).GetThreadId()
	run := &threadline.ThreadRun{Text: "sleep 3", RequestID: "req-" + randomHex()}
	s := th.Stream(ctx, id, run)
	first := untilToolCall(t, s)

	// Another caller sends the same request while it runs: it attaches, from sequence 0, and
	// RunThread waits for the same result instead of failing THREAD_BUSY.
	other, _ := newClient(t)
	ran := make(chan *threadline.ThreadRunOutcome, 1)
	go func() {
		outcome, err := other.Threads().Run(ctx, id, run)
		if err != nil {
			t.Errorf("attached Run: %v", err)
		}
		ran <- outcome
	}()
	attached, outcome := drain(t, other.Threads().Stream(ctx, id, run))
	rest, mine := drain(t, s)
	sameEvents(t, "the attached retry vs the first call", attached, append(first, rest...))
	if attached[0].GetSequence() != 0 || outcome.Replayed || !proto.Equal(outcome.Result, mine.Result) {
		t.Errorf("attached from %d, replayed %v", attached[0].GetSequence(), outcome.Replayed)
	}
	if waited := <-ran; waited == nil || waited.Replayed || waited.Result.GetRunId() != mine.Result.GetRunId() || waited.Revision != mine.Revision {
		t.Errorf("attached Run %+v, want run %s at %d", waited, mine.Result.GetRunId(), mine.Revision)
	}
	// Once it ended, the same request is a replay, as before.
	if again := mustRun(t, th, ctx, id, run); !again.Replayed {
		t.Error("a retry after the end ran again")
	}
}

func TestThreadAStreamWhoseServerDiesFollowsTheNextAttemptOnAnother(t *testing.T) {
	if os.Getenv("THREADLINE_ADDR") != "" {
		t.Skip("needs two servers of its own on one SQLite file")
	}
	store := "sqlite:" + filepath.Join(t.TempDir(), "threads.sqlite3")
	stopA, killA, addrA, err := startKillable("--store", store, "--lease-ttl", "2")
	if err != nil {
		t.Fatal(err)
	}
	defer stopA()
	stopB, addrB, err := startServer("--store", store, "--lease-ttl", "2")
	if err != nil {
		t.Fatal(err)
	}
	defer stopB()
	fwd := newForwarder(t, addrA)
	c, ctx := dialAt(t, fwd.addr())
	th := c.Threads()
	id := mustCreate(t, th, ctx, nil).GetThreadId()

	s := th.Stream(ctx, id, &threadline.ThreadRun{Text: "sleep 3"})
	first := untilToolRuns(t, s)
	lostRun := first[0].GetRunId()
	// The holder crashes; the stream's connection now leads to the other replica.
	fwd.retarget(addrB)
	killA()
	fwd.cut(0)
	rest, outcome := drain(t, s)

	// The lost attempt's written events that the stream had not handed out, then (once the
	// attempt was lost and the stream sent its request again) the next attempt's, from sequence 0.
	next := slices.IndexFunc(rest, func(ev *threadline.RunEvent) bool { return ev.GetRunId() != lostRun })
	if next < 0 || caseOf(rest[next]) != "run_started" || rest[next].GetSequence() != 0 {
		t.Fatalf("no next attempt from its run_started: %v", caseNames(rest))
	}
	last := first[len(first)-1].GetSequence()
	for _, ev := range rest[:next] {
		if ev.GetSequence() <= last {
			t.Errorf("event %d of the lost attempt again", ev.GetSequence())
		}
		last = ev.GetSequence()
	}
	if outcome.Result.GetRunId() != rest[next].GetRunId() || outcome.Result.GetRequestId() != s.RequestID() {
		t.Errorf("outcome of run %s request %s", outcome.Result.GetRunId(), outcome.Result.GetRequestId())
	}
	// The next attempt's events are what a join of the request yields.
	joined, _ := drain(t, th.JoinRun(ctx, id, threadline.JoinRun{RequestID: s.RequestID()}))
	sameEvents(t, "the next attempt vs a join of its request", rest[next:], joined)
	// A join of the lost attempt ends with its typed error, its metadata naming the next one.
	_, err = drain2(th.JoinRun(ctx, id, threadline.JoinRun{RunID: lostRun}))
	lost := asErr[*threadline.RunAttemptLostError](t, err, codes.Aborted, threadline.ReasonRunAttemptLost)
	// (Its last written event may come before the last one the stream had: a crash loses what
	// the holder had not written yet, at most one window.)
	if lost.RunID != lostRun || lost.RequestID != s.RequestID() || lost.LastSequence == 0 ||
		(lost.NextRunID != "" && lost.NextRunID != outcome.Result.GetRunId()) {
		t.Errorf("lost: run %s request %s last %d next %q", lost.RunID, lost.RequestID, lost.LastSequence, lost.NextRunID)
	}
}

// --- background runs: start, follow, result, cancel (LIVE §3) ----------------------------------------

// mustStart starts run on the thread in the background.
func mustStart(t *testing.T, th *threadline.Threads, ctx context.Context, id string, run *threadline.ThreadRun) *threadline.StartedRun {
	t.Helper()
	started, err := th.StartRun(ctx, id, run)
	if err != nil {
		t.Fatalf("StartRun %+v: %v", run, err)
	}
	return started
}

func TestThreadStartRunAnswersRunningAndResultWaitsForTheEnd(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	made := mustCreate(t, th, ctx, nil)
	id := made.GetThreadId()
	run := &threadline.ThreadRun{Text: "sleep 3", RequestID: "req-" + randomHex()}

	started := mustStart(t, th, ctx, id, run)

	if started.Status() != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_RUNNING || started.Replayed() || started.Outcome() != nil ||
		!strings.HasPrefix(started.RunID(), "run-") || started.RequestID() != run.RequestID || started.Revision() != made.GetRevision() ||
		started.ThreadID() != id {
		t.Fatalf("started %v replayed %v run %q request %q revision %d, want RUNNING %q from %d",
			started.Status(), started.Replayed(), started.RunID(), started.RequestID(), started.Revision(), run.RequestID, made.GetRevision())
	}
	// It answered before the run ended: the run holds the thread, with no client.
	running := mustGet(t, th, ctx, id)
	if running.GetStatus() != threadline.ThreadRunning || running.GetLease().GetRunId() != started.RunID() || running.GetLease().GetRequestId() != run.RequestID {
		t.Errorf("thread %v lease %v, want RUNNING by %s", running.GetStatus(), running.GetLease(), started.RunID())
	}

	outcome, err := started.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if outcome.Result.GetStatus() != threadline.StatusCompleted || outcome.Result.GetRunId() != started.RunID() ||
		outcome.Result.GetRequestId() != run.RequestID || outcome.Replayed || outcome.Revision <= made.GetRevision() {
		t.Errorf("outcome %v run %q request %q replayed %v revision %d", outcome.Result.GetStatus(), outcome.Result.GetRunId(),
			outcome.Result.GetRequestId(), outcome.Replayed, outcome.Revision)
	}
	if got := mustGet(t, th, ctx, id); got.GetStatus() != threadline.ThreadIdle || got.GetRevision() != outcome.Revision {
		t.Errorf("thread %v at %d, want idle at %d", got.GetStatus(), got.GetRevision(), outcome.Revision)
	}

	// The same request again: its stored outcome, nothing runs.
	again := mustStart(t, th, ctx, id, run)
	if !again.Replayed() || again.Status() != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_COMPLETED || again.RunID() != started.RunID() ||
		again.Revision() != outcome.Revision || !proto.Equal(again.Outcome().Result, outcome.Result) {
		t.Errorf("again: replayed %v %v run %q revision %d result %v, want replayed COMPLETED %q %d %v",
			again.Replayed(), again.Status(), again.RunID(), again.Revision(), again.Outcome(), started.RunID(), outcome.Revision, outcome.Result)
	}
	if replayed, err := again.Result(ctx); err != nil || !replayed.Replayed || !proto.Equal(replayed.Result, outcome.Result) || replayed.Revision != outcome.Revision {
		t.Errorf("again's Result %+v, %v", replayed, err)
	}
	if got := mustGet(t, th, ctx, id); got.GetRevision() != outcome.Revision {
		t.Errorf("revision %d after the replay, want %d", got.GetRevision(), outcome.Revision)
	}
}

func TestThreadStartedRunEventsFromTheFirstAndAfterASequence(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	id := mustCreate(t, th, ctx, nil).GetThreadId()
	started := mustStart(t, th, ctx, id, &threadline.ThreadRun{Text: "sleep 3"})

	// Joined while it runs: every event, from run_started (0) to the result, each sequence once.
	events, outcome := drain(t, started.Events(ctx, nil))
	if len(events) < 3 || caseOf(events[0]) != "run_started" || caseOf(events[len(events)-1]) != "result" ||
		!slices.Contains(caseNames(events), "tool_call") {
		t.Fatalf("events %v", caseNames(events))
	}
	for i, ev := range events {
		if ev.GetSequence() != uint64(i) || ev.GetRunId() != started.RunID() {
			t.Fatalf("event %d: sequence %d of run %s, want %d of %s (%v)", i, ev.GetSequence(), ev.GetRunId(), i, started.RunID(), sequences(events))
		}
	}
	if outcome.Result.GetRunId() != started.RunID() || outcome.Result.GetStatus() != threadline.StatusCompleted {
		t.Errorf("outcome %v of %s", outcome.Result.GetStatus(), outcome.Result.GetRunId())
	}
	if result, err := started.Result(ctx); err != nil || !proto.Equal(result.Result, outcome.Result) || result.Revision != outcome.Revision {
		t.Errorf("Result %+v, %v; want the events' %+v", result, err, outcome)
	}

	for _, k := range []uint64{0, events[len(events)/2].GetSequence(), events[len(events)-2].GetSequence()} {
		var want []*threadline.RunEvent
		for _, ev := range events {
			if ev.GetSequence() > k {
				want = append(want, ev)
			}
		}
		after, _ := drain(t, started.Events(ctx, &k))
		sameEvents(t, fmt.Sprintf("after %d", k), after, want)
	}
}

func TestThreadStartedRunCancelEndsItCancelled(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	id := mustCreate(t, th, ctx, nil).GetThreadId()
	run := &threadline.ThreadRun{Text: "sleep 3", RequestID: "req-" + randomHex()}
	started := mustStart(t, th, ctx, id, run)
	s := started.Events(ctx, nil)
	t.Cleanup(func() { _ = s.Close() })
	untilToolCall(t, s) // inside the sleep, clear of its checkpoint boundaries

	status, err := started.Cancel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if status != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_RUNNING && status != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_CANCELLED {
		t.Errorf("cancel status %v", status)
	}
	outcome, err := started.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if outcome.Result.GetStatus() != threadline.StatusCancelled || outcome.Result.GetRunId() != started.RunID() {
		t.Errorf("outcome %v run %q, want cancelled %q", outcome.Result.GetStatus(), outcome.Result.GetRunId(), started.RunID())
	}
	if _, joined := drain(t, s); joined.Result.GetStatus() != threadline.StatusCancelled {
		t.Errorf("the events end %v", joined.Result.GetStatus())
	}
	head, err := th.Checkpoint(ctx, id, outcome.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if head.GetKind() != threadlinev1.CheckpointKind_CHECKPOINT_KIND_CANCELLED || head.GetRunId() != started.RunID() {
		t.Errorf("head %v run %q", head.GetKind(), head.GetRunId())
	}
	if got := mustGet(t, th, ctx, id).GetStatus(); got != threadline.ThreadIdle {
		t.Errorf("status %v, want idle", got)
	}
	if again := mustStart(t, th, ctx, id, run); !again.Replayed() || again.Status() != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_CANCELLED {
		t.Errorf("again: replayed %v %v", again.Replayed(), again.Status())
	}
}

func TestThreadARunKnownOnlyByItsRequestIDIsCancelledByIt(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	id := mustCreate(t, th, ctx, nil).GetThreadId()
	run := &threadline.ThreadRun{Text: "sleep 3", RequestID: "req-" + randomHex()}
	started := mustStart(t, th, ctx, id, run)
	s := started.Events(ctx, nil)
	t.Cleanup(func() { _ = s.Close() })
	untilToolCall(t, s)

	status, err := th.CancelRequest(ctx, id, run.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if status != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_RUNNING && status != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_CANCELLED {
		t.Errorf("cancel status %v", status)
	}
	outcome, err := started.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if outcome.Result.GetStatus() != threadline.StatusCancelled || outcome.Result.GetRequestId() != run.RequestID {
		t.Errorf("outcome %v request %q, want cancelled %q", outcome.Result.GetStatus(), outcome.Result.GetRequestId(), run.RequestID)
	}
	if again, err := th.CancelRequest(ctx, id, run.RequestID); err != nil || again != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_CANCELLED {
		t.Errorf("again: %v %v", again, err)
	}
	_, err = th.CancelRequest(ctx, id, "req-"+randomHex())
	asErr[*threadline.RunNotFoundError](t, err, codes.NotFound, threadline.ReasonRunNotFound)
}

func TestThreadStartRunOnABusyThreadIsBusy(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	id := mustCreate(t, th, ctx, nil).GetThreadId()
	s, runID := sleeping(t, th, ctx, id)

	_, err := th.StartRun(ctx, id, &threadline.ThreadRun{Text: "hello"})

	busy := asErr[*threadline.ThreadBusyError](t, err, codes.Aborted, threadline.ReasonThreadBusy)
	if busy.RunID != runID || busy.RequestID != s.RequestID() {
		t.Errorf("busy with %q %q, want %q %q", busy.RunID, busy.RequestID, runID, s.RequestID())
	}
	// The running request itself, started again in the background, answers its attempt.
	attached := mustStart(t, th, ctx, id, &threadline.ThreadRun{Text: "sleep 30", RequestID: s.RequestID()})
	if attached.Replayed() || attached.Status() != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_RUNNING || attached.RunID() != runID {
		t.Errorf("attached: replayed %v %v run %q, want RUNNING %q", attached.Replayed(), attached.Status(), attached.RunID(), runID)
	}
	if _, err := attached.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if outcome, err := s.Collect(); err != nil || outcome.Result.GetStatus() != threadline.StatusCancelled {
		t.Errorf("the busy run ended %+v, %v", outcome, err)
	}
}

// A background run's server dies: another replica runs its next attempt with no client, and
// Result follows it there; a run cancelled once its server was gone is closed CANCELLED without a
// result of its own, and Result reads that outcome from a retry of the request.
func TestThreadAStartedRunWhoseServerDiesEndsOnAnother(t *testing.T) {
	if os.Getenv("THREADLINE_ADDR") != "" {
		t.Skip("needs two servers of its own on one SQLite file")
	}
	store := "sqlite:" + filepath.Join(t.TempDir(), "threads.sqlite3")
	stopA, killA, addrA, err := startKillable("--store", store, "--lease-ttl", "2")
	if err != nil {
		t.Fatal(err)
	}
	defer stopA()
	stopB, addrB, err := startServer("--store", store, "--lease-ttl", "2")
	if err != nil {
		t.Fatal(err)
	}
	defer stopB()
	fwd := newForwarder(t, addrA)
	c, ctx := dialAt(t, fwd.addr())
	th := c.Threads()
	goesOn := mustStart(t, th, ctx, mustCreate(t, th, ctx, nil).GetThreadId(), &threadline.ThreadRun{Text: "sleep 3"})
	cancelled := mustStart(t, th, ctx, mustCreate(t, th, ctx, nil).GetThreadId(), &threadline.ThreadRun{Text: "sleep 30"})
	for _, started := range []*threadline.StartedRun{goesOn, cancelled} {
		s := started.Events(ctx, nil)
		untilToolCall(t, s)
		_ = s.Close()
	}
	fwd.retarget(addrB)
	killA()
	fwd.cut(0)
	// The cancel is recorded on B while A's lease runs out (once the client saw its connection cut).
	for try := 0; ; try++ {
		_, err := cancelled.Cancel(ctx)
		if err == nil {
			break
		}
		if threadline.CodeOf(err) != codes.Unavailable || try == 20 {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	outcome, err := goesOn.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if outcome.Result.GetStatus() != threadline.StatusCompleted || outcome.Result.GetRunId() == goesOn.RunID() ||
		outcome.Result.GetRequestId() != goesOn.RequestID() || outcome.Replayed {
		t.Errorf("outcome %v run %q (started %q) request %q replayed %v, want COMPLETED by a next attempt", outcome.Result.GetStatus(),
			outcome.Result.GetRunId(), goesOn.RunID(), outcome.Result.GetRequestId(), outcome.Replayed)
	}
	stopped, err := cancelled.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stopped.Result.GetStatus() != threadline.StatusCancelled || stopped.Result.GetRequestId() != cancelled.RequestID() || !stopped.Replayed {
		t.Errorf("cancelled: %v request %q replayed %v, want a replayed CANCELLED", stopped.Result.GetStatus(), stopped.Result.GetRequestId(), stopped.Replayed)
	}
}

// --- busy strategies: the thread's queue (LIVE §4.2) --------------------------------------------

// requestsOfCheckpoints returns the requests that committed the thread's checkpoints, oldest
// first, each run once (consecutive checkpoints of one request collapsed).
func requestsOfCheckpoints(t *testing.T, th *threadline.Threads, ctx context.Context, id string) []string {
	t.Helper()
	newestFirst := collectAll(t, th.Checkpoints(ctx, id, 0))
	var order []string
	for _, cp := range slices.Backward(newestFirst) {
		if cp.GetRequestId() != "" && (len(order) == 0 || order[len(order)-1] != cp.GetRequestId()) {
			order = append(order, cp.GetRequestId())
		}
	}
	return order
}

func TestThreadAnEnqueuedStartWaitsItsTurnThenRuns(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	id := mustCreate(t, th, ctx, nil).GetThreadId()
	s, sleepingRun := sleeping(t, th, ctx, id)

	queued := mustStart(t, th, ctx, id, &threadline.ThreadRun{Text: "hello", BusyStrategy: threadline.BusyEnqueue})

	if queued.Status() != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_QUEUED || queued.QueuePosition() != 1 ||
		!strings.HasPrefix(queued.RunID(), "run-") || queued.RunID() == sleepingRun || queued.Replayed() {
		t.Fatalf("queued: %v position %d run %q replayed %v, want QUEUED 1 with a run-… ID of its own",
			queued.Status(), queued.QueuePosition(), queued.RunID(), queued.Replayed())
	}
	waiting := mustGet(t, th, ctx, id).GetQueue()
	if len(waiting) != 1 || waiting[0].GetRequestId() != queued.RequestID() || waiting[0].GetRunId() != queued.RunID() ||
		waiting[0].GetKind() != threadline.QueuedEnqueued || waiting[0].GetCreateTime() == nil {
		t.Fatalf("queue %v, want one ENQUEUED entry for %s / %s with a create time", waiting, queued.RequestID(), queued.RunID())
	}
	// A REJECT request is refused while a run holds the thread and one waits.
	for name, call := range map[string]func() error{
		"Run": func() error {
			_, err := th.Run(ctx, id, &threadline.ThreadRun{Text: "hello", BusyStrategy: threadline.BusyReject})
			return err
		},
		"StartRun": func() error { _, err := th.StartRun(ctx, id, &threadline.ThreadRun{Text: "hello"}); return err },
	} {
		busy := asErr[*threadline.ThreadBusyError](t, call(), codes.Aborted, threadline.ReasonThreadBusy)
		if busy.RunID != sleepingRun || busy.RequestID != s.RequestID() || busy.QueueLength != 1 {
			t.Errorf("%s: busy with %q %q queue %d, want %q %q queue 1", name, busy.RunID, busy.RequestID, busy.QueueLength, sleepingRun, s.RequestID())
		}
	}

	if _, err := th.Cancel(ctx, id, sleepingRun); err != nil {
		t.Fatal(err)
	}
	outcome, err := queued.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if outcome.Result.GetStatus() != threadline.StatusCompleted || outcome.Result.GetRunId() != queued.RunID() ||
		outcome.Result.GetRequestId() != queued.RequestID() {
		t.Errorf("outcome %v run %q request %q, want COMPLETED %q %q", outcome.Result.GetStatus(), outcome.Result.GetRunId(),
			outcome.Result.GetRequestId(), queued.RunID(), queued.RequestID())
	}
	if after := mustGet(t, th, ctx, id); len(after.GetQueue()) != 0 || after.GetStatus() != threadline.ThreadIdle {
		t.Errorf("thread %v queue %v, want idle with an empty queue", after.GetStatus(), after.GetQueue())
	}
}

func TestThreadAFullQueueIsThreadQueueFullAndAQueuedRequestIsCancelledBeforeItRuns(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	id := mustCreate(t, th, ctx, nil).GetThreadId()
	s, sleepingRun := sleeping(t, th, ctx, id)

	var queued []*threadline.StartedRun
	for i := range 16 {
		started := mustStart(t, th, ctx, id, &threadline.ThreadRun{Text: "hello", RequestID: fmt.Sprintf("q%02d", i), BusyStrategy: threadline.BusyEnqueue})
		if started.Status() != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_QUEUED || started.QueuePosition() != i+1 {
			t.Fatalf("q%02d: %v position %d, want QUEUED %d", i, started.Status(), started.QueuePosition(), i+1)
		}
		queued = append(queued, started)
	}
	_, err := th.StartRun(ctx, id, &threadline.ThreadRun{Text: "hello", BusyStrategy: threadline.BusyEnqueue})
	full := asErr[*threadline.ThreadQueueFullError](t, err, codes.ResourceExhausted, threadline.ReasonThreadQueueFull)
	if full.ThreadID != id || full.Limit != 16 || full.QueueLength != 16 {
		t.Errorf("queue full: thread %q limit %d length %d, want %q 16 16", full.ThreadID, full.Limit, full.QueueLength, id)
	}

	status, err := th.CancelRequest(ctx, id, "q00")
	if err != nil || status != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_CANCELLED {
		t.Fatalf("cancel q00: %v, %v; want CANCELLED", status, err)
	}
	cancelled, err := queued[0].Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// It never ran: no events to follow, so Result reads the outcome from a retry (Replayed).
	if cancelled.Result.GetStatus() != threadline.StatusCancelled || cancelled.Result.GetRequestId() != "q00" ||
		cancelled.Result.GetRunId() != queued[0].RunID() || !cancelled.Replayed {
		t.Errorf("q00 ended %v request %q run %q replayed %v, want a replayed CANCELLED of %s", cancelled.Result.GetStatus(),
			cancelled.Result.GetRequestId(), cancelled.Result.GetRunId(), cancelled.Replayed, queued[0].RunID())
	}
	// A retry of it (same input and strategy) replays CANCELLED: it never runs.
	if again := mustStart(t, th, ctx, id, &threadline.ThreadRun{Text: "hello", RequestID: "q00", BusyStrategy: threadline.BusyEnqueue}); !again.Replayed() ||
		again.Status() != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_CANCELLED || again.Outcome().Result.GetStatus() != threadline.StatusCancelled {
		t.Errorf("q00 again: replayed %v %v, want a replayed CANCELLED", again.Replayed(), again.Status())
	}
	if waiting := mustGet(t, th, ctx, id).GetQueue(); len(waiting) != 15 || waiting[0].GetRequestId() != "q01" {
		t.Errorf("queue %v, want 15 from q01", waiting)
	}

	if _, err := th.Cancel(ctx, id, sleepingRun); err != nil {
		t.Fatal(err)
	}
	if outcome, err := s.Collect(); err != nil || outcome.Result.GetStatus() != threadline.StatusCancelled {
		t.Errorf("the sleeping run ended %+v, %v", outcome, err)
	}
	last, err := queued[15].Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if last.Result.GetStatus() != threadline.StatusCompleted || last.Result.GetRequestId() != "q15" {
		t.Errorf("q15 ended %v request %q, want COMPLETED", last.Result.GetStatus(), last.Result.GetRequestId())
	}
	if after := mustGet(t, th, ctx, id); after.GetStatus() != threadline.ThreadIdle || len(after.GetQueue()) != 0 {
		t.Errorf("thread %v queue %v, want idle with an empty queue", after.GetStatus(), after.GetQueue())
	}
	want := []string{s.RequestID()}
	for i := 1; i < 16; i++ {
		want = append(want, fmt.Sprintf("q%02d", i))
	}
	if ran := requestsOfCheckpoints(t, th, ctx, id); len(ran) < len(want) || !slices.Equal(ran[len(ran)-len(want):], want) {
		t.Errorf("checkpoints by request %v, want them to end with %v: the rest ran once each, in order", ran, want)
	}
}

func TestThreadRunWithBusyEnqueueWaitsForItsTurn(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	id := mustCreate(t, th, ctx, nil).GetThreadId()
	requestID := "req-" + randomHex()
	_, sleepingRun := sleeping(t, th, ctx, id)

	type ran struct {
		outcome *threadline.ThreadRunOutcome
		err     error
	}
	done := make(chan ran, 1)
	go func() {
		outcome, err := th.Run(ctx, id, &threadline.ThreadRun{Text: "hello", RequestID: requestID, BusyStrategy: threadline.BusyEnqueue})
		done <- ran{outcome, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		waiting := mustGet(t, th, ctx, id).GetQueue()
		if len(waiting) == 1 && waiting[0].GetRequestId() == requestID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %v: the request never waited in it", waiting)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("Run returned while its request was queued: %+v, %v", r.outcome, r.err)
	default:
	}

	if _, err := th.Cancel(ctx, id, sleepingRun); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.outcome.Result.GetStatus() != threadline.StatusCompleted || r.outcome.Result.GetRequestId() != requestID || r.outcome.Replayed {
		t.Errorf("outcome %v request %q replayed %v, want COMPLETED %q", r.outcome.Result.GetStatus(), r.outcome.Result.GetRequestId(), r.outcome.Replayed, requestID)
	}
}

func TestThreadAnInterruptStopsTheRunningTurnAndRunsAheadOfTheQueue(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	id := mustCreate(t, th, ctx, nil).GetThreadId()
	s, sleepingRun := sleeping(t, th, ctx, id)

	later := mustStart(t, th, ctx, id, &threadline.ThreadRun{Text: "hello", RequestID: "later", BusyStrategy: threadline.BusyEnqueue})
	if later.Status() != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_QUEUED || later.QueuePosition() != 1 {
		t.Fatalf("later: %v position %d, want QUEUED 1", later.Status(), later.QueuePosition())
	}
	interruptedAt := time.Now()
	now := mustStart(t, th, ctx, id, &threadline.ThreadRun{Text: "hello", RequestID: "now", BusyStrategy: threadline.BusyInterrupt})
	if now.Status() != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_QUEUED || now.QueuePosition() != 1 ||
		!strings.HasPrefix(now.RunID(), "run-") || now.RunID() == sleepingRun || now.RunID() == later.RunID() || now.Replayed() {
		t.Fatalf("now: %v position %d run %q replayed %v, want QUEUED 1 with a run-… ID of its own",
			now.Status(), now.QueuePosition(), now.RunID(), now.Replayed())
	}
	// Read before the stopped run hands off, the queue is [now, later]; on a fast server "now" may have
	// started already, leaving [later] (the order it ran in is checked on the checkpoints below).
	waiting := mustGet(t, th, ctx, id).GetQueue()
	if len(waiting) == 2 {
		if waiting[0].GetRequestId() != "now" || waiting[0].GetRunId() != now.RunID() || waiting[0].GetKind() != threadline.QueuedInterrupting {
			t.Errorf("queue %v, want [now (INTERRUPTING), later (ENQUEUED)]", waiting)
		}
		waiting = waiting[1:]
	}
	if len(waiting) != 1 || waiting[0].GetRequestId() != "later" || waiting[0].GetRunId() != later.RunID() || waiting[0].GetKind() != threadline.QueuedEnqueued {
		t.Errorf("queue %v, want [now (INTERRUPTING), later (ENQUEUED)] or [later (ENQUEUED)]", waiting)
	}

	// Nothing is cancelled here: the interrupt stops the sleeping run, long before its 30 s.
	stopped, err := s.Collect()
	if err != nil {
		t.Fatal(err)
	}
	if stopped.Result.GetStatus() != threadline.StatusCancelled || stopped.Result.GetRunId() != sleepingRun ||
		stopped.Result.GetRequestId() != s.RequestID() {
		t.Errorf("the sleeping run ended %v run %q request %q, want CANCELLED %q %q", stopped.Result.GetStatus(),
			stopped.Result.GetRunId(), stopped.Result.GetRequestId(), sleepingRun, s.RequestID())
	}
	if took := time.Since(interruptedAt); took > 15*time.Second {
		t.Errorf("the sleeping run ended %v after the interrupt, want it stopped at once", took)
	}
	for _, started := range []*threadline.StartedRun{now, later} {
		outcome, err := started.Result(ctx)
		if err != nil {
			t.Fatalf("%s: %v", started.RequestID(), err)
		}
		if outcome.Result.GetStatus() != threadline.StatusCompleted || outcome.Result.GetRequestId() != started.RequestID() ||
			outcome.Result.GetRunId() != started.RunID() {
			t.Errorf("%s ended %v run %q request %q, want COMPLETED %q", started.RequestID(), outcome.Result.GetStatus(),
				outcome.Result.GetRunId(), outcome.Result.GetRequestId(), started.RunID())
		}
	}
	want := []string{s.RequestID(), "now", "later"}
	if ran := requestsOfCheckpoints(t, th, ctx, id); len(ran) < len(want) || !slices.Equal(ran[len(ran)-len(want):], want) {
		t.Errorf("checkpoints by request %v, want them to end with %v", ran, want)
	}
	if after := mustGet(t, th, ctx, id); after.GetStatus() != threadline.ThreadIdle || len(after.GetQueue()) != 0 {
		t.Errorf("thread %v queue %v, want idle with an empty queue", after.GetStatus(), after.GetQueue())
	}
}

func TestThreadARollbackThrowsTheRunningTurnAwayAndAnswersAgainFromWhereItBegan(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	id := mustCreate(t, th, ctx, nil).GetThreadId()
	mustRun(t, th, ctx, id, &threadline.ThreadRun{Text: "hello", RequestID: "before"})
	began := mustGet(t, th, ctx, id).GetRevision()
	s, sleepingRun := sleeping(t, th, ctx, id)

	redo := mustStart(t, th, ctx, id, &threadline.ThreadRun{Text: "lookup grpc", RequestID: "redo", BusyStrategy: threadline.BusyRollback})
	if redo.Status() != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_QUEUED || redo.QueuePosition() != 1 || redo.RunID() == sleepingRun {
		t.Fatalf("redo: %v position %d run %q, want QUEUED 1 with a run ID of its own", redo.Status(), redo.QueuePosition(), redo.RunID())
	}
	// Read before the stopped run hands off, the queue is [redo (ROLLING_BACK)]; on a fast server
	// it may have started already.
	if waiting := mustGet(t, th, ctx, id).GetQueue(); len(waiting) > 1 ||
		len(waiting) == 1 && (waiting[0].GetRequestId() != "redo" || waiting[0].GetKind() != threadline.QueuedRollingBack) {
		t.Errorf("queue %v, want [redo (ROLLING_BACK)] or []", waiting)
	}

	// Nothing is cancelled here: the rollback stops the sleeping run.
	stopped, err := s.Collect()
	if err != nil {
		t.Fatal(err)
	}
	if stopped.Result.GetStatus() != threadline.StatusCancelled || stopped.Result.GetRunId() != sleepingRun {
		t.Errorf("the sleeping run ended %v run %q, want CANCELLED %q", stopped.Result.GetStatus(), stopped.Result.GetRunId(), sleepingRun)
	}
	outcome, err := redo.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if outcome.Result.GetStatus() != threadline.StatusCompleted || outcome.Result.GetRequestId() != "redo" {
		t.Errorf("redo ended %v request %q, want COMPLETED redo", outcome.Result.GetStatus(), outcome.Result.GetRequestId())
	}

	// After revision began: the stopped turn's checkpoints (still listed), one ROLLED_BACK copy,
	// then redo's.
	var after []*threadline.Checkpoint
	for _, cp := range slices.Backward(collectAll(t, th.Checkpoints(ctx, id, 0))) {
		if cp.GetRevision() > began {
			after = append(after, cp)
		}
	}
	describe := func() string {
		var parts []string
		for _, cp := range after {
			parts = append(parts, fmt.Sprintf("%d %v %q", cp.GetRevision(), cp.GetKind(), cp.GetRequestId()))
		}
		return strings.Join(parts, ", ")
	}
	discarded := 0
	for discarded < len(after) && after[discarded].GetRequestId() == s.RequestID() &&
		after[discarded].GetKind() != threadlinev1.CheckpointKind_CHECKPOINT_KIND_ROLLED_BACK {
		discarded++
	}
	if discarded == 0 || discarded >= len(after)-1 {
		t.Fatalf("checkpoints after %d: [%s]; want the stopped turn's, a ROLLED_BACK copy, then redo's", began, describe())
	}
	rolled := after[discarded]
	if rolled.GetKind() != threadlinev1.CheckpointKind_CHECKPOINT_KIND_ROLLED_BACK ||
		rolled.GetRevision() != after[discarded-1].GetRevision()+1 {
		t.Errorf("checkpoints after %d: [%s]; want one ROLLED_BACK right after the stopped turn's", began, describe())
	}
	for _, cp := range after[discarded+1:] {
		if cp.GetRequestId() != "redo" || cp.GetKind() == threadlinev1.CheckpointKind_CHECKPOINT_KIND_ROLLED_BACK {
			t.Errorf("checkpoints after %d: [%s]; want only redo's after the ROLLED_BACK copy", began, describe())
			break
		}
	}

	// The copy is checkpoint began again, history byte for byte; the head never saw "sleep 30".
	copied, err := th.Checkpoint(ctx, id, rolled.GetRevision())
	if err != nil {
		t.Fatal(err)
	}
	source, err := th.Checkpoint(ctx, id, began)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := copied.GetState().GetMessageHistory(), source.GetState().GetMessageHistory(); want.GetData() == "" || !proto.Equal(got, want) {
		t.Errorf("the ROLLED_BACK copy's history (%d messages) %s\nwant checkpoint %d's (%d messages) %s",
			got.GetMessageCount(), got.GetData(), began, want.GetMessageCount(), want.GetData())
	}
	head, err := th.Get(ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	if history := head.GetHead().GetState().GetMessageHistory().GetData(); history == "" ||
		strings.Contains(history, "sleep 30") || !strings.Contains(history, "lookup grpc") {
		t.Errorf("head's history %s: want redo's turn without the stopped one", history)
	}
}

// "Undo that answer, answer again" (LIVE §4.5): the approved turn is stopped and thrown away, and the
// same approval is answered again, denied; answers to a running turn without ROLLBACK are refused.
func TestThreadRollbackWithAnswersUndoesAnApprovalAndAnswersTheBatchAgain(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	id := mustCreate(t, th, ctx, nil).GetThreadId()
	asked := mustRun(t, th, ctx, id, &threadline.ThreadRun{Text: "delete notes.txt then sleep 30"})
	if asked.Result.GetStatus() != threadline.StatusSuspended {
		t.Fatalf("status %v, want suspended", asked.Result.GetStatus())
	}
	pending := mustGet(t, th, ctx, id).GetPending()
	if len(pending.GetApprovals()) != 1 || len(pending.GetCalls()) != 0 {
		t.Fatalf("pending %v: want one approval", pending)
	}
	call := pending.GetApprovals()[0]

	approve := threadline.NewAnswers(pending).Approve(call.GetToolCallId())
	approved := th.Stream(ctx, id, &threadline.ThreadRun{Answers: approve.Results()})
	t.Cleanup(func() { _ = approved.Close() })
	// Streamed until the sleep call: the delete ran, and the turn sleeps.
	sleeps := false
	for !sleeps && approved.Receive() {
		sleeps = approved.Msg().GetToolCall().GetToolName() == "sleep"
	}
	if !sleeps {
		t.Fatalf("the approved stream ended before the sleep call: %v", approved.Err())
	}

	deny := threadline.NewAnswers(pending).Deny(call.GetToolCallId(), "")
	_, err := th.Run(ctx, id, &threadline.ThreadRun{Answers: deny.Results(), BusyStrategy: threadline.BusyEnqueue})
	asErr[*threadline.ThreadNotSuspendedError](t, err, codes.FailedPrecondition, threadline.ReasonThreadNotSuspended)

	again := threadline.NewAnswers(pending).Deny(call.GetToolCallId(), "keep it")
	redo := mustStart(t, th, ctx, id, &threadline.ThreadRun{Answers: again.Results(), BusyStrategy: threadline.BusyRollback})
	if redo.Status() != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_QUEUED || redo.QueuePosition() != 1 {
		t.Fatalf("redo: %v position %d, want QUEUED 1", redo.Status(), redo.QueuePosition())
	}

	// Nothing is cancelled here: the rollback stops the approved run.
	stopped, err := approved.Collect()
	if err != nil {
		t.Fatal(err)
	}
	if stopped.Result.GetStatus() != threadline.StatusCancelled {
		t.Errorf("the approved run ended %v, want CANCELLED", stopped.Result.GetStatus())
	}
	done, err := redo.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := output(t, done.Result); got != "Tool results: delete_file: keep it" {
		t.Errorf("redo: %q", got)
	}
	rolledBack := 0
	for _, cp := range collectAll(t, th.Checkpoints(ctx, id, 0)) {
		if cp.GetKind() == threadlinev1.CheckpointKind_CHECKPOINT_KIND_ROLLED_BACK {
			rolledBack++
		}
	}
	if rolledBack != 1 {
		t.Errorf("%d ROLLED_BACK checkpoints, want 1", rolledBack)
	}
	head, err := th.Get(ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	if history := head.GetHead().GetState().GetMessageHistory().GetData(); history == "" || strings.Contains(history, "Deleted") {
		t.Errorf("head's history %s: want it without the approved turn", history)
	}
}

// --- what a refusal names (LIVE §5.5) ------------------------------------------------------------

// A prompt without answers takes a suspended thread's batch: answers for it afterwards are refused
// naming that request; the same request ID with another prompt is refused naming what the original
// did and where this one differs; a run on a thread a background run holds is busy with that run.
func TestThreadRefusalsNameWhoTookTheBatchTheReusedRequestAndTheHolder(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	made, call := suspendedOnDelete(t, th, ctx, "a.txt")
	id := made.GetThreadId()

	// a. The prompt continues the SUSPENDED thread without answers; the approval answered later is
	// refused, naming the prompt's request and the batch's revision.
	neverMindID := "req-" + randomHex()
	neverMind := mustRun(t, th, ctx, id, &threadline.ThreadRun{Text: "never mind", RequestID: neverMindID})
	if neverMind.Result.GetStatus() != threadline.StatusCompleted || neverMind.Revision <= made.GetRevision() {
		t.Fatalf("never mind: %v at %d, want completed past %d", neverMind.Result.GetStatus(), neverMind.Revision, made.GetRevision())
	}
	approve := threadline.NewAnswers(made.GetPending()).Approve(call.GetToolCallId())
	_, err := th.Run(ctx, id, &threadline.ThreadRun{Answers: approve.Results(), RequestID: "req-" + randomHex()})
	notSuspended := asErr[*threadline.ThreadNotSuspendedError](t, err, codes.FailedPrecondition, threadline.ReasonThreadNotSuspended)
	want := threadline.AnsweredBy{RequestID: neverMindID, Revision: made.GetRevision(), How: "prompt", RunRevision: neverMind.Revision, Matches: true}
	if by, ok := notSuspended.AnsweredBy(); !ok || by != want {
		t.Errorf("AnsweredBy %+v, %v; want %+v", by, ok, want)
	}
	if notSuspended.ThreadID != id || notSuspended.Status != threadline.ThreadIdle {
		t.Errorf("thread %q %v, want %q idle", notSuspended.ThreadID, notSuspended.Status, id)
	}
	if got := mustGet(t, th, ctx, id).GetRevision(); got != neverMind.Revision {
		t.Errorf("revision %d, want %d: the answers did not run", got, neverMind.Revision)
	}

	// b. The never-mind request's ID with another prompt.
	_, err = th.Run(ctx, id, &threadline.ThreadRun{Text: "something else", RequestID: neverMindID})
	reused := asErr[*threadline.RequestIDReusedError](t, err, codes.InvalidArgument, threadline.ReasonRequestIDReused)
	if differs, ok := reused.Differs(); !ok || !slices.Equal(differs, []string{"prompt"}) {
		t.Errorf("Differs %q, %v; want [prompt]", differs, ok)
	}
	if reused.Status != threadlinev1.ThreadRunStatus_THREAD_RUN_STATUS_COMPLETED || reused.RunID != neverMind.Result.GetRunId() || reused.Revision != neverMind.Revision {
		t.Errorf("reused: %v run %q revision %d, want COMPLETED %q %d", reused.Status, reused.RunID, reused.Revision, neverMind.Result.GetRunId(), neverMind.Revision)
	}

	// c. A background run holds the thread: it is its own request's, nobody else's.
	sleepID := "req-" + randomHex()
	started := mustStart(t, th, ctx, id, &threadline.ThreadRun{Text: "sleep 30", RequestID: sleepID})
	ownID := "req-" + randomHex()
	_, err = th.Run(ctx, id, &threadline.ThreadRun{Text: "hello", RequestID: ownID})
	busy := asErr[*threadline.ThreadBusyError](t, err, codes.Aborted, threadline.ReasonThreadBusy)
	if !busy.IsOwn(sleepID) || busy.IsOwn(ownID) || busy.RunID != started.RunID() {
		t.Errorf("busy with %q %q: IsOwn(sleeping) %v, IsOwn(own) %v; want run %q", busy.RunID, busy.RequestID, busy.IsOwn(sleepID), busy.IsOwn(ownID), started.RunID())
	}
	if _, err := started.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if outcome, err := started.Result(ctx); err != nil || outcome.Result.GetStatus() != threadline.StatusCancelled {
		t.Errorf("the sleeping run ended %+v, %v; want CANCELLED", outcome, err)
	}
}
