package threadline_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	threadline "github.com/threadline-dev/threadline/clients/go"
	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// The shared scenarios, against the real server and its embedded "default" agent, whose
// scripted model picks a tool from words in the prompt (server/demo.py).

func newClient(t *testing.T) (*threadline.Client, context.Context) {
	t.Helper()
	return dialAt(t, serverAddr)
}

// dialAt dials addr with the suite's timeouts, then opts, and closes the client when the test
// ends.
func dialAt(t *testing.T, addr string, opts ...threadline.Option) (*threadline.Client, context.Context) {
	t.Helper()
	opts = append([]threadline.Option{threadline.WithTimeout(20 * time.Second), threadline.WithRunTimeout(60 * time.Second)}, opts...)
	c, err := threadline.Dial(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, t.Context()
}

func run(t *testing.T, c *threadline.Client, ctx context.Context, spec *threadline.RunSpec, want threadline.RunStatus) *threadline.RunResult {
	t.Helper()
	res, err := c.Run(ctx, spec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.GetStatus() != want {
		t.Fatalf("status = %v, want %v (failure %v)", res.GetStatus(), want, res.GetFailure())
	}
	if res.GetState() == nil {
		t.Fatal("result has no state")
	}
	return res
}

func output(t *testing.T, res *threadline.RunResult) string {
	t.Helper()
	var s string
	if err := json.Unmarshal([]byte(res.GetOutputJson()), &s); err != nil {
		t.Fatalf("output_json %q: %v", res.GetOutputJson(), err)
	}
	return s
}

func TestContinueThreadTwice(t *testing.T) {
	c, ctx := newClient(t)
	first := run(t, c, ctx, &threadline.RunSpec{Prompt: threadline.Text("hello")}, threadline.StatusCompleted)
	second := run(t, c, ctx, threadline.Continue(first.GetState(), "and again"), threadline.StatusCompleted)
	third := run(t, c, ctx, threadline.Continue(second.GetState(), "once more"), threadline.StatusCompleted)

	if first.GetThreadId() == "" || second.GetThreadId() != first.GetThreadId() || third.GetThreadId() != first.GetThreadId() {
		t.Errorf("thread ids %q, %q, %q: want one thread", first.GetThreadId(), second.GetThreadId(), third.GetThreadId())
	}
	if third.GetState().GetThreadId() != first.GetThreadId() {
		t.Errorf("state thread id %q", third.GetState().GetThreadId())
	}
	ids := map[string]bool{first.GetRunId(): true, second.GetRunId(): true, third.GetRunId(): true}
	if len(ids) != 3 {
		t.Errorf("run ids %q, %q, %q: want three distinct", first.GetRunId(), second.GetRunId(), third.GetRunId())
	}
	counts := []int64{
		first.GetState().GetMessageHistory().GetMessageCount(),
		second.GetState().GetMessageHistory().GetMessageCount(),
		third.GetState().GetMessageHistory().GetMessageCount(),
	}
	if !(counts[0] > 0 && counts[1] > counts[0] && counts[2] > counts[1]) {
		t.Errorf("message counts %v: want a growing history", counts)
	}
	if got := output(t, third); !strings.Contains(got, "once more") {
		t.Errorf("output %q", got)
	}
}

func TestForkThread(t *testing.T) {
	c, ctx := newClient(t)
	src := run(t, c, ctx, &threadline.RunSpec{Prompt: threadline.Text("count")}, threadline.StatusCompleted).GetState()

	fork, err := c.ForkState(ctx, src, "")
	if err != nil {
		t.Fatal(err)
	}
	if fork.GetThreadId() == "" || fork.GetThreadId() == src.GetThreadId() {
		t.Errorf("fork thread id %q, source %q", fork.GetThreadId(), src.GetThreadId())
	}
	if !proto.Equal(fork.GetMessageHistory(), src.GetMessageHistory()) {
		t.Error("fork's history differs from the source's")
	}
	if len(src.GetCapabilityStates()) == 0 || !equalCaps(fork, src) {
		t.Errorf("capability states: fork %v, source %v", fork.GetCapabilityStates(), src.GetCapabilityStates())
	}

	// The fork is a thread of its own.
	next := run(t, c, ctx, threadline.Continue(fork, "hello fork"), threadline.StatusCompleted)
	if next.GetThreadId() != fork.GetThreadId() {
		t.Errorf("run on fork: thread %q, want %q", next.GetThreadId(), fork.GetThreadId())
	}

	// A host-chosen ID, and the source's own ID, which is refused.
	named, err := c.ForkState(ctx, src, "thr_gofork1")
	if err != nil {
		t.Fatal(err)
	}
	if named.GetThreadId() != "thr_gofork1" {
		t.Errorf("named fork id %q", named.GetThreadId())
	}
	_, err = c.ForkState(ctx, src, src.GetThreadId())
	if threadline.ReasonOf(err) != threadline.ReasonForkThreadIDConflict || threadline.CodeOf(err) != codes.InvalidArgument {
		t.Errorf("fork to own id: %v", err)
	}
}

func equalCaps(a, b *threadline.HarnessState) bool {
	if len(a.GetCapabilityStates()) != len(b.GetCapabilityStates()) {
		return false
	}
	for i := range a.GetCapabilityStates() {
		if !proto.Equal(a.GetCapabilityStates()[i], b.GetCapabilityStates()[i]) {
			return false
		}
	}
	return true
}

func TestApprovalSuspendApprove(t *testing.T) {
	c, ctx := newClient(t)
	suspended := run(t, c, ctx, &threadline.RunSpec{Prompt: threadline.Text("delete notes.txt")}, threadline.StatusSuspended)
	if suspended.GetSuspendReason() != threadlinev1.SuspendReason_SUSPEND_REASON_DEFERRED {
		t.Errorf("suspend reason %v", suspended.GetSuspendReason())
	}
	approvals := suspended.GetDeferred().GetApprovals()
	if len(approvals) != 1 || len(suspended.GetDeferred().GetCalls()) != 0 {
		t.Fatalf("deferred = %v, want one approval", suspended.GetDeferred())
	}
	call := approvals[0]
	if call.GetToolName() != "delete_file" || call.GetKind() != threadline.KindApproval {
		t.Errorf("pending call %v", call)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(call.GetArgsJson()), &args); err != nil || args["path"] != "notes.txt" {
		t.Errorf("args_json %q (%v)", call.GetArgsJson(), err)
	}

	answers := threadline.NewAnswers(suspended.GetDeferred()).AnsweredBy("go-test")
	answers.Approve(call.GetToolCallId())
	done := run(t, c, ctx, threadline.Resume(suspended, answers), threadline.StatusCompleted)
	if done.GetThreadId() != suspended.GetThreadId() || done.GetRunId() == suspended.GetRunId() {
		t.Errorf("resume: thread %q run %q after thread %q run %q", done.GetThreadId(), done.GetRunId(), suspended.GetThreadId(), suspended.GetRunId())
	}
	if got := output(t, done); !strings.Contains(got, "Deleted notes.txt") {
		t.Errorf("output %q: the approved call did not run", got)
	}
	if done.GetDeferred() != nil {
		t.Errorf("completed run has a deferred batch %v", done.GetDeferred())
	}

	// The accepted resume is still pending at the suspended checkpoint, and incorporated at the
	// completed one.
	resume := answers.Resume()
	pending, err := c.RemainingDeferred(ctx, resume, suspended.GetState())
	if err != nil {
		t.Fatal(err)
	}
	if len(pending.GetRequests().GetApprovals()) != 1 || len(pending.GetResults().GetApprovals()) != 1 {
		t.Errorf("remaining at the suspended state = %v", pending)
	}
	if left, err := c.RemainingDeferred(ctx, resume, done.GetState()); err != nil || left != nil {
		t.Errorf("remaining at the completed state = %v, %v", left, err)
	}
}

func TestServerInfo(t *testing.T) {
	c, ctx := newClient(t)
	info, err := c.ServerInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(info.GetSchemaVersions(), "1") || info.GetDefaultAgent() != "default" {
		t.Errorf("info = %v", info)
	}
	tools := map[string]threadlinev1.ToolCategory{}
	for _, a := range info.GetAgents() {
		if a.GetName() == "default" {
			for _, tool := range a.GetTools() {
				tools[tool.GetName()] = tool.GetCategory()
			}
		}
	}
	if tools["delete_file"] != threadlinev1.ToolCategory_TOOL_CATEGORY_REQUIRES_APPROVAL || tools["lookup"] != threadlinev1.ToolCategory_TOOL_CATEGORY_PLAIN {
		t.Errorf("default agent's tools = %v", tools)
	}
}

func TestDenialReachesTheModel(t *testing.T) {
	c, ctx := newClient(t)
	suspended := run(t, c, ctx, &threadline.RunSpec{Prompt: threadline.Text("delete secrets.txt")}, threadline.StatusSuspended)
	answers := threadline.NewAnswers(suspended.GetDeferred())
	for _, call := range answers.Approvals() {
		answers.Deny(call.GetToolCallId(), "Keep that file, it is needed.")
	}

	s := c.StreamRun(ctx, threadline.Resume(suspended, answers))
	defer s.Close()
	var denied bool
	for s.Receive() {
		if r := s.Msg().GetToolResult(); r != nil && r.GetOutcome() == threadlinev1.ToolOutcome_TOOL_OUTCOME_DENIED {
			denied = true
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if !denied {
		t.Error("no tool_result event with outcome DENIED")
	}
	done := s.Result()
	if done.GetStatus() != threadline.StatusCompleted {
		t.Fatalf("status %v", done.GetStatus())
	}
	got := output(t, done)
	if !strings.Contains(got, "Keep that file, it is needed.") || strings.Contains(got, "Deleted") {
		t.Errorf("output %q: the model did not see the denial", got)
	}
}

func TestClientToolExecutedByHost(t *testing.T) {
	c, ctx := newClient(t)
	tools := []*threadline.ClientTool{{
		Name:                 "get_time",
		Description:          "The current time in a time zone.",
		ParametersJsonSchema: `{"type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]}`,
	}}
	suspended := run(t, c, ctx, &threadline.RunSpec{
		Prompt:      threadline.Text(`client:get_time {"zone":"UTC"}`),
		ClientTools: tools,
	}, threadline.StatusSuspended)
	calls := suspended.GetDeferred().GetCalls()
	if len(calls) != 1 || len(suspended.GetDeferred().GetApprovals()) != 0 {
		t.Fatalf("deferred = %v, want one call", suspended.GetDeferred())
	}
	call := calls[0]
	if call.GetToolName() != "get_time" || call.GetKind() != threadline.KindExternal ||
		call.GetTargetIdentity() != "tool/threadline.client/get_time" {
		t.Errorf("pending call %v", call)
	}

	// The host runs the tool itself.
	var args struct{ Zone string }
	if err := json.Unmarshal([]byte(call.GetArgsJson()), &args); err != nil || args.Zone != "UTC" {
		t.Fatalf("args_json %q (%v)", call.GetArgsJson(), err)
	}
	answers := threadline.NewAnswers(suspended.GetDeferred())
	if err := answers.Return(call.GetToolCallId(), "12:34 in "+args.Zone); err != nil {
		t.Fatal(err)
	}
	spec := threadline.Resume(suspended, answers)
	spec.ClientTools = tools // declared in every run of the thread
	done := run(t, c, ctx, spec, threadline.StatusCompleted)
	if got := output(t, done); !strings.Contains(got, "12:34 in UTC") {
		t.Errorf("output %q: the model did not see the host's result", got)
	}
}

func TestCheckpointCandidatesBeforeResult(t *testing.T) {
	c, ctx := newClient(t)
	s := c.StreamRun(ctx, &threadline.RunSpec{Prompt: threadline.Text("lookup grpc"), Checkpoints: true})
	defer s.Close()
	var events []*threadline.RunEvent
	for s.Receive() {
		events = append(events, s.Msg())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(events) < 3 {
		t.Fatalf("%d events", len(events))
	}
	if events[0].GetRunStarted() == nil {
		t.Errorf("first event %v, want run_started", events[0])
	}
	last := events[len(events)-1]
	if last.GetResult() == nil || s.Result() != last.GetResult() {
		t.Fatalf("last event %v, want the result", last)
	}
	candidates := 0
	for i, ev := range events {
		if ev.GetSequence() != uint64(i) {
			t.Errorf("event %d has sequence %d", i, ev.GetSequence())
		}
		if ev.GetThreadId() != last.GetResult().GetThreadId() || ev.GetRunId() != last.GetResult().GetRunId() {
			t.Errorf("event %d ids %q/%q", i, ev.GetThreadId(), ev.GetRunId())
		}
		if ev.GetResult() != nil && i != len(events)-1 {
			t.Errorf("result at %d of %d", i, len(events))
		}
		if cc := ev.GetCheckpointCandidate(); cc != nil {
			candidates++
			if cc.GetState().GetThreadId() != last.GetResult().GetThreadId() {
				t.Errorf("candidate %d state thread %q", i, cc.GetState().GetThreadId())
			}
			if prev := events[i-1].GetLifecycle().GetType(); prev != "model_request_started" && prev != "model_request_completed" {
				t.Errorf("candidate %d follows %v", i, events[i-1])
			}
		}
	}
	// Two model requests (tool call, then text), each started and completed.
	if candidates < 4 {
		t.Errorf("%d checkpoint candidates, want at least 4", candidates)
	}
	if last.GetResult().GetStatus() != threadline.StatusCompleted {
		t.Errorf("status %v", last.GetResult().GetStatus())
	}

	// Without `checkpoints`, none.
	plain := c.StreamRun(ctx, &threadline.RunSpec{Prompt: threadline.Text("lookup grpc")})
	defer plain.Close()
	for plain.Receive() {
		if plain.Msg().GetCheckpointCandidate() != nil {
			t.Error("checkpoint candidate without checkpoints")
		}
	}
	if plain.Err() != nil || plain.Result() == nil {
		t.Errorf("plain stream: err %v, result %v", plain.Err(), plain.Result())
	}
}

func TestUnsupportedSchemaVersionRejected(t *testing.T) {
	c, ctx := newClient(t)
	state, err := c.NewState(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if state.GetSchemaVersion() != "1" || !strings.HasPrefix(state.GetThreadId(), "thread_") {
		t.Errorf("new state %v", state)
	}
	future := proto.CloneOf(state)
	future.SchemaVersion = "999"

	check := func(name string, err error) {
		t.Helper()
		if threadline.ReasonOf(err) != threadline.ReasonSchemaVersionUnsupported || threadline.CodeOf(err) != codes.FailedPrecondition {
			t.Fatalf("%s: err = %v, want FAILED_PRECONDITION SCHEMA_VERSION_UNSUPPORTED", name, err)
		}
		var e *threadline.Error
		_ = errors.As(err, &e)
		if md := e.Metadata(); md["received"] != "999" || md["supported"] != "1" {
			t.Errorf("%s: metadata %v", name, md)
		}
		if e.Domain() != threadline.Domain {
			t.Errorf("%s: domain %q", name, e.Domain())
		}
	}

	_, err = c.Run(ctx, threadline.Continue(future, "hello"))
	check("Run", err)

	s := c.StreamRun(ctx, threadline.Continue(future, "hello"))
	if s.Receive() {
		t.Errorf("stream sent an event: %v", s.Msg())
	}
	check("StreamRun", s.Err())
	_ = s.Close()

	_, err = c.ValidateState(ctx, future)
	check("ValidateState", err)

	// The supported version validates, in both forms.
	valid, err := c.ValidateState(ctx, state)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(valid.State, state) || !strings.Contains(valid.JSON, state.GetThreadId()) {
		t.Errorf("ValidateState = %v", valid)
	}
	again, err := c.ValidateStateJSON(ctx, valid.JSON)
	if err != nil || !proto.Equal(again.State, state) {
		t.Errorf("ValidateStateJSON = %v, %v", again, err)
	}
}

func TestBadInput(t *testing.T) {
	c, ctx := newClient(t)
	_, err := c.Run(ctx, &threadline.RunSpec{Prompt: threadline.Text("")})
	if threadline.ReasonOf(err) != threadline.ReasonInputEmpty || threadline.CodeOf(err) != codes.InvalidArgument {
		t.Errorf("empty prompt: %v", err)
	}
	_, err = c.Run(ctx, &threadline.RunSpec{Agent: "no-such-agent", Prompt: threadline.Text("hi")})
	if threadline.ReasonOf(err) != threadline.ReasonAgentUnknown {
		t.Errorf("unknown agent: %v", err)
	}
}

func TestPersistedStateContinues(t *testing.T) {
	c, ctx := newClient(t)
	first := run(t, c, ctx, &threadline.RunSpec{Prompt: threadline.Text("count")}, threadline.StatusCompleted)
	for _, f := range []threadline.Format{threadline.Binary, threadline.JSON} {
		data, err := threadline.MarshalState(first.GetState(), f)
		if err != nil {
			t.Fatal(err)
		}
		loaded, err := threadline.UnmarshalState(data, f)
		if err != nil {
			t.Fatal(err)
		}
		next := run(t, c, ctx, threadline.Continue(loaded, "count"), threadline.StatusCompleted)
		if next.GetThreadId() != first.GetThreadId() {
			t.Errorf("%v: thread %q", f, next.GetThreadId())
		}
		if got := output(t, next); !strings.Contains(got, "count: 2") {
			t.Errorf("%v: output %q, want the counter at 2", f, got)
		}
	}
}

func TestRunTimeoutAndStreamClose(t *testing.T) {
	// The default run timeout applies when the context has no deadline.
	c, err := threadline.Dial(serverAddr, threadline.WithRunTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Run(context.Background(), &threadline.RunSpec{Prompt: threadline.Text("sleep 5")})
	if threadline.CodeOf(err) != codes.DeadlineExceeded {
		t.Errorf("Run past the default timeout: %v", err)
	}
	s := c.StreamRun(context.Background(), &threadline.RunSpec{Prompt: threadline.Text("sleep 5")})
	for s.Receive() {
	}
	if threadline.CodeOf(s.Err()) != codes.DeadlineExceeded || s.Result() != nil {
		t.Errorf("stream past the default timeout: %v, %v", s.Err(), s.Result())
	}
	_ = s.Close()

	// Closing a stream early ends it without an error.
	c2, ctx := newClient(t)
	s = c2.StreamRun(ctx, &threadline.RunSpec{Prompt: threadline.Text("sleep 5")})
	if !s.Receive() || s.Msg().GetRunStarted() == nil {
		t.Fatalf("first event %v, err %v", s.Msg(), s.Err())
	}
	_ = s.Close()
	if s.Receive() || s.Err() != nil {
		t.Errorf("after Close: err %v", s.Err())
	}
	_ = s.Close()
}
