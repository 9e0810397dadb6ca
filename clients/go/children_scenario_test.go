package threadline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	threadline "github.com/threadline-dev/threadline/clients/go"
	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// Child runs against the suite's server (CHILDREN): the demo agent `default` runs its inline child
// `helper` itself; `demo-lead` asks the host to run its child `reviewer` as agent `demo-reviewer`.

const (
	lead     = "demo-lead"
	reviewer = "demo-reviewer"
)

var (
	inlineChildID = regexp.MustCompile(`helper-[0-9a-f]{4}`)
	threadID      = regexp.MustCompile(`^thread_[0-9a-f]{32}$`)
)

// resumeLead continues the suspended demo-lead run parent with answers (the parent's agent is
// named in each of its runs).
func resumeLead(parent *threadline.RunResult, answers *threadline.Answers) *threadline.RunSpec {
	spec := threadline.Resume(parent, answers)
	spec.Agent = lead
	return spec
}

// askChild runs demo-lead with `ask-child <task>` and returns the suspended parent and its one
// child request call, after checking the request against the parent run.
func askChild(t *testing.T, c *threadline.Client, task string) (*threadline.RunResult, *threadline.DeferredToolCall) {
	t.Helper()
	parent := run(t, c, t.Context(), &threadline.RunSpec{Agent: lead, Prompt: threadline.Text("ask-child " + task)}, threadline.StatusSuspended)
	calls := threadline.ChildRequests(parent.GetDeferred())
	if len(calls) != 1 || len(parent.GetDeferred().GetCalls()) != 1 || len(parent.GetDeferred().GetApprovals()) != 0 {
		t.Fatalf("deferred = %v, want one child request", parent.GetDeferred())
	}
	call := calls[0]
	if call.GetToolName() != "delegate" || call.GetKind() != threadline.KindExternal ||
		call.GetTargetIdentity() != "tool/threadline.subagents.host/delegate" {
		t.Errorf("child request call %v", call)
	}
	req := call.GetChild()
	if req.GetAction() != threadline.ChildStart || req.GetAgent() != reviewer || req.GetSubagentName() != "reviewer" ||
		req.GetChildDefinitionId() != reviewer || !threadID.MatchString(req.GetThreadId()) || req.GetThreadId() == parent.GetThreadId() {
		t.Errorf("child request %v", req)
	}
	want := &threadline.ChildLineage{
		ParentThreadId:        parent.GetThreadId(),
		ParentRunId:           parent.GetRunId(),
		ParentToolCallId:      call.GetToolCallId(),
		ParentAgentInstanceId: req.GetParent().GetParentAgentInstanceId(),
		SubagentName:          "reviewer",
		DelegationId:          req.GetThreadId(),
		ParentAgent:           lead,
	}
	if !proto.Equal(req.GetParent(), want) || want.ParentAgentInstanceId == "" {
		t.Errorf("child request's parent = %v, want %v", req.GetParent(), want)
	}
	var task0 struct {
		DelegatedTask string `json:"delegated_task"`
	}
	if err := json.Unmarshal([]byte(req.GetInput()), &task0); err != nil || task0.DelegatedTask != task {
		t.Errorf("child input %q (%v)", req.GetInput(), err)
	}
	// The typed request is a copy of the one in the call's metadata.
	var md struct {
		Child struct {
			ThreadID string `json:"thread_id"`
			Agent    string `json:"agent"`
			Input    string `json:"input"`
		} `json:"threadline.child"`
	}
	if err := json.Unmarshal([]byte(call.GetMetadataJson()), &md); err != nil ||
		md.Child.ThreadID != req.GetThreadId() || md.Child.Agent != reviewer || md.Child.Input != req.GetInput() {
		t.Errorf("metadata_json %q (%v)", call.GetMetadataJson(), err)
	}
	return parent, call
}

// childSuspendedOnDelete starts the child of a `delete <file>` request and checks it suspends on
// the delete_file approval, its result echoing the request's lineage.
func childSuspendedOnDelete(t *testing.T, c *threadline.Client, call *threadline.DeferredToolCall, file string) *threadline.RunResult {
	t.Helper()
	req := call.GetChild()
	child, err := c.RunChild(t.Context(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if child.GetStatus() != threadline.StatusSuspended || child.GetThreadId() != req.GetThreadId() {
		t.Fatalf("child: status %v thread %q, want SUSPENDED on %q (failure %v)", child.GetStatus(), child.GetThreadId(), req.GetThreadId(), child.GetFailure())
	}
	approvals := child.GetDeferred().GetApprovals()
	if len(approvals) != 1 || approvals[0].GetToolName() != "delete_file" || callArgs(t, approvals[0])["path"] != file {
		t.Fatalf("child's deferred = %v, want the delete_file approval", child.GetDeferred())
	}
	if !proto.Equal(child.GetLineage(), req.GetParent()) {
		t.Errorf("child result's lineage = %v, want the request's %v", child.GetLineage(), req.GetParent())
	}
	if err := threadline.NewAnswers(nil).AnswerChild(call, child); !errors.Is(err, threadline.ErrChildSuspended) {
		t.Errorf("answer with the suspended child: %v, want ErrChildSuspended", err)
	}
	return child
}

// answerParent answers the parent's child request with child's result and runs the parent on.
func answerParent(t *testing.T, c *threadline.Client, parent *threadline.RunResult, call *threadline.DeferredToolCall, child *threadline.RunResult) *threadline.RunResult {
	t.Helper()
	answers := threadline.NewAnswers(parent.GetDeferred())
	if err := answers.AnswerChild(call, child); err != nil {
		t.Fatal(err)
	}
	done := run(t, c, t.Context(), resumeLead(parent, answers), threadline.StatusCompleted)
	if done.GetThreadId() != parent.GetThreadId() {
		t.Errorf("parent resumed on thread %q, want %q", done.GetThreadId(), parent.GetThreadId())
	}
	return done
}

// quotesChild checks the parent's output quotes the completed answer of child to call.
func quotesChild(t *testing.T, parent *threadline.RunResult, call *threadline.DeferredToolCall, child *threadline.RunResult) {
	t.Helper()
	want, _ := json.Marshal(map[string]any{
		"execution_id": call.GetChild().GetThreadId(),
		"subagent":     "reviewer",
		"status":       "completed",
		"output":       json.RawMessage(child.GetOutputJson()),
	})
	got := output(t, parent)
	quoted, ok := strings.CutPrefix(got, "Tool results: "+call.GetToolName()+": ")
	if !ok {
		t.Fatalf("parent's output %q does not quote the %s result", got, call.GetToolName())
	}
	var a, b any
	_ = json.Unmarshal(want, &a)
	if err := json.Unmarshal([]byte(quoted), &b); err != nil || !reflect.DeepEqual(a, b) {
		t.Errorf("parent's output quotes %s, want %s", quoted, want)
	}
}

// toolReturns counts the tool-return parts of tool in state's history.
func toolReturns(t *testing.T, state *threadline.HarnessState, tool string) []string {
	t.Helper()
	var messages []struct {
		Parts []struct {
			PartKind string          `json:"part_kind"`
			ToolName string          `json:"tool_name"`
			Content  json.RawMessage `json:"content"`
		} `json:"parts"`
	}
	if err := json.Unmarshal([]byte(state.GetMessageHistory().GetData()), &messages); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range messages {
		for _, p := range m.Parts {
			if p.PartKind == "tool-return" && p.ToolName == tool {
				out = append(out, string(p.Content))
			}
		}
	}
	return out
}

func TestInlineChildDelegateAndResume(t *testing.T) {
	c, ctx := newClient(t)
	events := streamAll(t, c, &threadline.RunSpec{Prompt: threadline.Text("delegate tidy the notes")}, 0)
	checkSequence(t, events)
	result := events[len(events)-1].GetResult()
	if result.GetStatus() != threadline.StatusCompleted {
		t.Fatalf("status %v (failure %v)", result.GetStatus(), result.GetFailure())
	}
	var delegations []*threadlinev1.InlineDelegation
	for _, ev := range events {
		if d := ev.GetInlineDelegation(); d != nil {
			delegations = append(delegations, d)
		}
		if ev.GetLifecycle().GetKind() == "delegation" {
			t.Errorf("a delegation sent as lifecycle: %v", ev)
		}
	}
	if len(delegations) != 2 || delegations[0].GetAction() != "started" || delegations[1].GetAction() != "completed" {
		t.Fatalf("inline_delegation events %v, want started then completed", delegations)
	}
	started, completed := delegations[0], delegations[1]
	if started.GetInvocationId() == "" || completed.GetInvocationId() != started.GetInvocationId() ||
		started.GetChildRunId() == "" || completed.GetChildRunId() != started.GetChildRunId() ||
		started.GetChildRunId() == result.GetRunId() {
		t.Errorf("started %v, completed %v: want one invocation and one child run", started, completed)
	}
	for _, d := range delegations {
		if d.GetSubagent() != "helper" || !inlineChildID.MatchString(d.GetChildInstanceId()) ||
			d.GetParentRunId() != result.GetRunId() || d.GetParentToolCallId() == "" {
			t.Errorf("delegation %v", d)
		}
	}
	if started.GetStatus() != "running" || completed.GetStatus() != "completed" {
		t.Errorf("statuses %q, %q", started.GetStatus(), completed.GetStatus())
	}
	got := output(t, result)
	id := inlineChildID.FindString(got)
	if !strings.Contains(got, "helper, task 1: tidy the notes") || id != started.GetChildInstanceId() {
		t.Fatalf("output %q: want the helper's answer and its execution ID %s", got, started.GetChildInstanceId())
	}

	// The child lives in the parent's state, so a later run of the parent continues it.
	next := run(t, c, ctx, threadline.Continue(result.GetState(), "resume-child "+id+" and the desk"), threadline.StatusCompleted)
	if got := output(t, next); !strings.Contains(got, "helper, task 2: and the desk") || !strings.Contains(got, id) {
		t.Errorf("continued output %q: want the same helper at task 2", got)
	}
	for _, state := range []*threadline.HarnessState{result.GetState(), next.GetState()} {
		var registry *threadlinev1.CapabilityState
		for _, cs := range state.GetCapabilityStates() {
			if cs.GetCapabilityId() == "a13n.subagents" {
				registry = cs
			}
		}
		var data struct {
			Children map[string]struct {
				SubagentName string `json:"subagent_name"`
			} `json:"children"`
		}
		if registry == nil || registry.GetVersion() != "2" || json.Unmarshal([]byte(registry.GetDataJson()), &data) != nil ||
			len(data.Children) != 1 || data.Children[id].SubagentName != "helper" {
			t.Errorf("a13n.subagents = %v, want version 2 with child %s", registry, id)
		}
	}
}

func TestHostChildSuspendsForApproval(t *testing.T) {
	c, _ := newClient(t)
	parent, call := askChild(t, c, "delete old.txt")
	req := call.GetChild()
	child := childSuspendedOnDelete(t, c, call, "old.txt")

	// The host asks its user, then resumes the child with the request's agent and lineage.
	childAnswers := threadline.NewAnswers(child.GetDeferred())
	childAnswers.Approve(child.GetDeferred().GetApprovals()[0].GetToolCallId())
	events := streamAll(t, c, threadline.ForChild(req, threadline.Resume(child, childAnswers)), 0)
	done := events[len(events)-1].GetResult()
	if done.GetStatus() != threadline.StatusCompleted || done.GetThreadId() != req.GetThreadId() {
		t.Fatalf("child resumed: status %v thread %q (failure %v)", done.GetStatus(), done.GetThreadId(), done.GetFailure())
	}
	if got := output(t, done); got != "Tool results: delete_file: Deleted old.txt." {
		t.Errorf("child's output %q", got)
	}
	if !proto.Equal(done.GetLineage(), req.GetParent()) {
		t.Errorf("child result's lineage = %v, want %v", done.GetLineage(), req.GetParent())
	}
	// The first event echoes the request's lineage too, parent_agent included.
	if started := events[0].GetRunStarted(); started == nil || !proto.Equal(started.GetLineage(), req.GetParent()) {
		t.Errorf("first event %v, want run_started with the request's lineage", events[0])
	}

	final := answerParent(t, c, parent, call, done)
	quotesChild(t, final, call, done)
	if final.GetLineage() != nil {
		t.Errorf("parent has lineage %v", final.GetLineage())
	}
	// Nothing about the child is in the parent's state.
	for _, cs := range final.GetState().GetCapabilityStates() {
		if cs.GetCapabilityId() == "a13n.subagents" {
			t.Errorf("parent state has %v", cs)
		}
	}
}

func TestHostChildFailureAnswersTheParent(t *testing.T) {
	c, ctx := newClient(t)
	parent, call := askChild(t, c, "lookup grpc")
	req := call.GetChild()
	state, err := c.NewState(ctx, req.GetThreadId())
	if err != nil {
		t.Fatal(err)
	}
	// The reviewer looks up, then needs a second model request, over the host's limit of one.
	spec := threadline.ForChild(req, threadline.Continue(state, req.GetInput()))
	spec.UsageLimits = &threadline.UsageLimits{RequestLimit: proto.Int64(1)}
	child := run(t, c, ctx, spec, threadline.StatusFailed)
	if child.GetFailure().GetCode() != "usage_limit_exceeded" {
		t.Fatalf("child failure %v", child.GetFailure())
	}
	final := answerParent(t, c, parent, call, child)
	want := fmt.Sprintf("Child %s did not complete successfully (usage_limit_exceeded).", req.GetThreadId())
	if got := output(t, final); !strings.Contains(got, want) {
		t.Errorf("parent's output %q, want it to quote %q", got, want)
	}
}

func TestHostChildRunningThenContinued(t *testing.T) {
	c, ctx := newClient(t)
	parent, call := askChild(t, c, "lookup grpc")
	req := call.GetChild()

	// The parent goes on while the child works.
	answers := threadline.NewAnswers(parent.GetDeferred())
	if err := answers.AnswerChildRunning(call); err != nil {
		t.Fatal(err)
	}
	admitted := run(t, c, ctx, resumeLead(parent, answers), threadline.StatusCompleted)
	want := fmt.Sprintf(`Tool results: delegate: {"execution_id":%q,"subagent":"reviewer","status":"running"}`, req.GetThreadId())
	if got := output(t, admitted); got != want {
		t.Errorf("parent's output %q, want %q", got, want)
	}
	child, err := c.RunChild(ctx, req, nil)
	if err != nil || child.GetStatus() != threadline.StatusCompleted {
		t.Fatalf("child: %v, %v", child.GetStatus(), err)
	}

	// Later the parent's model asks to continue the same child thread.
	spec := threadline.Continue(admitted.GetState(), "resume-child "+req.GetThreadId()+" and the desk")
	spec.Agent = lead
	again := run(t, c, ctx, spec, threadline.StatusSuspended)
	calls := threadline.ChildRequests(again.GetDeferred())
	if len(calls) != 1 || calls[0].GetToolName() != "resume_subagent" ||
		calls[0].GetTargetIdentity() != "tool/threadline.subagents.host/resume_subagent" {
		t.Fatalf("deferred = %v, want one resume_subagent child request", again.GetDeferred())
	}
	cont := calls[0].GetChild()
	if cont.GetAction() != threadline.ChildContinue || cont.GetThreadId() != req.GetThreadId() || cont.GetAgent() != reviewer ||
		cont.GetParent().GetParentRunId() != again.GetRunId() || cont.GetParent().GetParentToolCallId() != calls[0].GetToolCallId() {
		t.Errorf("continue request %v", cont)
	}
	if _, err := c.RunChild(ctx, cont, nil); err == nil {
		t.Error("a continue request ran without the child's state")
	}
	continued, err := c.RunChild(ctx, cont, child.GetState())
	if err != nil || continued.GetStatus() != threadline.StatusCompleted {
		t.Fatalf("continued child: %v, %v", continued.GetStatus(), err)
	}
	if got := output(t, continued); got != "You said: and the desk" {
		t.Errorf("continued child's output %q", got)
	}
	if n, before := continued.GetState().GetMessageHistory().GetMessageCount(), child.GetState().GetMessageHistory().GetMessageCount(); n <= before {
		t.Errorf("continued child has %d messages, before %d: want its history to grow", n, before)
	}
	final := answerParent(t, c, again, calls[0], continued)
	quotesChild(t, final, calls[0], continued)
}

func TestHostChildRecoveredFromCheckpoint(t *testing.T) {
	c, ctx := newClient(t)
	parent, call := askChild(t, c, "delete old.txt")
	req := call.GetChild()
	child := childSuspendedOnDelete(t, c, call, "old.txt")
	childAnswers := threadline.NewAnswers(child.GetDeferred())
	childAnswers.Approve(child.GetDeferred().GetApprovals()[0].GetToolCallId())
	accepted := childAnswers.Resume() // the host persists it before resuming the child

	// The resume streams checkpoints; the host keeps the first one and crashes (closes the stream).
	spec := threadline.ForChild(req, threadline.Resume(child, childAnswers))
	spec.Checkpoints = true
	s := c.StreamRun(ctx, spec)
	var checkpoint *threadline.HarnessState
	for checkpoint == nil && s.Receive() {
		checkpoint = s.Msg().GetCheckpointCandidate().GetState()
	}
	if err := s.Err(); err != nil || checkpoint == nil {
		t.Fatalf("no checkpoint candidate: %v", err)
	}
	_ = s.Close()
	// The candidate was taken after the approved call ran: the accepted batch is incorporated.
	if left, err := c.RemainingDeferred(ctx, accepted, checkpoint); err != nil || left != nil {
		t.Fatalf("remaining at the checkpoint = %v, %v: want nothing", left, err)
	}

	// Recovery: the accepted batch again, with recovery, from the checkpoint.
	recovery := proto.CloneOf(accepted)
	recovery.Recovery = true
	recovered := run(t, c, ctx, threadline.ForChild(req, &threadline.RunSpec{PreviousState: checkpoint, DeferredResume: recovery}), threadline.StatusCompleted)
	if got := toolReturns(t, recovered.GetState(), "delete_file"); len(got) != 1 || got[0] != `"Deleted old.txt."` {
		t.Errorf("delete_file returns %v: want it ran once", got)
	}
	if got := output(t, recovered); got != "Tool results: delete_file: Deleted old.txt." {
		t.Errorf("recovered child's output %q", got)
	}

	// From the suspended state itself, recovery does not reuse the approval as permission to run
	// the call again: it gets the unknown result (DECLARED recovery, the tool is not retryable).
	fromSuspended := run(t, c, ctx, threadline.ForChild(req, &threadline.RunSpec{PreviousState: child.GetState(), DeferredResume: recovery}), threadline.StatusCompleted)
	if got := toolReturns(t, fromSuspended.GetState(), "delete_file"); len(got) != 1 || !strings.Contains(got[0], "No tool result was recorded because execution was interrupted.") {
		t.Errorf("delete_file returns %v after recovery from the suspended state: want the unknown result", got)
	}

	final := answerParent(t, c, parent, call, recovered)
	quotesChild(t, final, call, recovered)
}

func TestChildrenInServerInfo(t *testing.T) {
	c, ctx := newClient(t)
	agents := agentsByName(t, c, ctx)
	for name, want := range map[string]struct {
		subagent   string
		mode       threadlinev1.SubagentMode
		agent      string // the served agent a host runs; none for an inline child
		definition string
		category   threadlinev1.ToolCategory
	}{
		"default": {"helper", threadlinev1.SubagentMode_SUBAGENT_MODE_INLINE, "", "demo-helper", threadlinev1.ToolCategory_TOOL_CATEGORY_PLAIN},
		lead:      {"reviewer", threadlinev1.SubagentMode_SUBAGENT_MODE_HOST, reviewer, reviewer, threadlinev1.ToolCategory_TOOL_CATEGORY_EXTERNAL},
	} {
		a := agents[name]
		subs := a.GetSubagents()
		if len(subs) != 1 || subs[0].GetName() != want.subagent || subs[0].GetMode() != want.mode || subs[0].GetDescription() == "" ||
			subs[0].GetAgent() != want.agent || subs[0].GetChildDefinitionId() != want.definition {
			t.Errorf("%s: subagents %v, want %s (%v)", name, subs, want.subagent, want.mode)
		}
		tools := map[string]threadlinev1.ToolCategory{}
		for _, tool := range a.GetTools() {
			tools[tool.GetName()] = tool.GetCategory()
		}
		if tools["delegate"] != want.category || tools["resume_subagent"] != want.category {
			t.Errorf("%s: delegate %v, resume_subagent %v, want %v", name, tools["delegate"], tools["resume_subagent"], want.category)
		}
	}
	if subs := agents[reviewer].GetSubagents(); agents[reviewer] == nil || len(subs) != 0 {
		t.Errorf("%s: %v, want an agent without children", reviewer, agents[reviewer])
	}

	// The delegation tools' names are reserved for client tools.
	for _, agent := range []string{"default", lead} {
		_, err := c.Run(ctx, &threadline.RunSpec{
			Agent:       agent,
			Prompt:      threadline.Text("hello"),
			ClientTools: []*threadline.ClientTool{{Name: "delegate", ParametersJsonSchema: `{"type":"object"}`}},
		})
		if threadline.ReasonOf(err) != threadline.ReasonClientToolInvalid || threadline.CodeOf(err) != codes.InvalidArgument {
			t.Errorf("%s: client tool named delegate: %v", agent, err)
		}
	}
}

func TestDeferredToolsUnsupportedHasNoHostChild(t *testing.T) {
	c, ctx := newClient(t)
	res := run(t, c, ctx, &threadline.RunSpec{
		Agent:         lead,
		Prompt:        threadline.Text("ask-child x"),
		DeferredTools: threadlinev1.DeferredToolsMode_DEFERRED_TOOLS_MODE_UNSUPPORTED,
	}, threadline.StatusCompleted)
	if res.GetDeferred() != nil {
		t.Errorf("deferred %v", res.GetDeferred())
	}
	// The demo model still calls delegate; the run has no such tool.
	got := output(t, res)
	if _, available, ok := strings.Cut(got, "Unknown tool name: 'delegate'. Available tools: "); !ok || strings.Contains(available, "delegate") {
		t.Errorf("output %q: want delegate absent from the run's tools", got)
	}
	_, err := c.Run(ctx, &threadline.RunSpec{Agent: lead, Prompt: threadline.Text("hi"), DeferredTools: 99})
	if threadline.ReasonOf(err) != threadline.ReasonInputInvalid || threadline.CodeOf(err) != codes.InvalidArgument {
		t.Errorf("unknown deferred_tools mode: %v", err)
	}
}

func TestChildLineageChecked(t *testing.T) {
	c, ctx := newClient(t)
	_, call := askChild(t, c, "lookup grpc")
	req := call.GetChild()

	// The lineage names demo-lead, whose reviewer edge runs demo-reviewer, not default.
	wrong := threadline.ForChild(req, &threadline.RunSpec{Prompt: threadline.Text(req.GetInput())})
	wrong.Agent = "default"
	_, err := c.Run(ctx, wrong)
	if threadline.ReasonOf(err) != threadline.ReasonChildEdgeUnknown || threadline.CodeOf(err) != codes.FailedPrecondition {
		t.Errorf("lineage to an undeclared edge: %v", err)
	}

	// A child run on its parent's own thread.
	state, err := c.NewState(ctx, req.GetParent().GetParentThreadId())
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Run(ctx, threadline.ForChild(req, threadline.Continue(state, req.GetInput())))
	if threadline.ReasonOf(err) != threadline.ReasonChildLineageInvalid || threadline.CodeOf(err) != codes.InvalidArgument {
		t.Errorf("lineage whose parent thread is the run's own: %v", err)
	}
}

// agentsByName is the server's GetServerInfo agents, by name.
func agentsByName(t *testing.T, c *threadline.Client, ctx context.Context) map[string]*threadlinev1.AgentInfo {
	t.Helper()
	info, err := c.ServerInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	agents := map[string]*threadlinev1.AgentInfo{}
	for _, a := range info.GetAgents() {
		agents[a.GetName()] = a
	}
	return agents
}
