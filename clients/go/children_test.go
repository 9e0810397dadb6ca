package threadline_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	threadline "github.com/threadline-dev/threadline/clients/go"
	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// The answers AnswerChild builds from a child's terminal result, and what it refuses.

const childThread = "thread_0123456789abcdef0123456789abcdef"

func childCall() *threadline.DeferredToolCall {
	return &threadline.DeferredToolCall{
		ToolCallId: "p1",
		ToolName:   "delegate",
		Kind:       threadline.KindExternal,
		Child: &threadline.ChildRequest{
			Action:       threadline.ChildStart,
			SubagentName: "reviewer",
			Agent:        "demo-reviewer",
			ThreadId:     childThread,
			Input:        `{"delegated_task":"check"}`,
			Parent:       &threadline.ChildLineage{ParentThreadId: "thread_parent", ParentAgent: "demo-lead"},
		},
	}
}

// plainCall is a call of an external tool that asks for no child.
func plainCall() *threadline.DeferredToolCall {
	return &threadline.DeferredToolCall{ToolCallId: "c1", ToolName: "get_time", Kind: threadline.KindExternal}
}

// answersFor is the answers to a batch of call alone.
func answersFor(call *threadline.DeferredToolCall) *threadline.Answers {
	return threadline.NewAnswers(&threadline.DeferredToolRequests{Calls: []*threadline.DeferredToolCall{call}})
}

func TestAnswerChild(t *testing.T) {
	for name, tc := range map[string]struct {
		result *threadline.RunResult
		want   *threadlinev1.CallResult
	}{
		"completed": {
			&threadline.RunResult{Status: threadline.StatusCompleted, ThreadId: childThread, OutputJson: `{"verdict": "ok"}`},
			&threadlinev1.CallResult{ToolCallId: "p1", Result: &threadlinev1.CallResult_ValueJson{
				ValueJson: `{"execution_id":"` + childThread + `","subagent":"reviewer","status":"completed","output":{"verdict":"ok"}}`,
			}},
		},
		"failed": {
			&threadline.RunResult{Status: threadline.StatusFailed, ThreadId: childThread, Failure: &threadlinev1.Failure{Code: "usage_limit_exceeded"}},
			&threadlinev1.CallResult{ToolCallId: "p1", Result: &threadlinev1.CallResult_Failed{Failed: &threadlinev1.ToolFailedResult{
				Message: "Child " + childThread + " did not complete successfully (usage_limit_exceeded).",
			}}},
		},
		"cancelled": {
			&threadline.RunResult{Status: threadline.StatusCancelled, ThreadId: childThread},
			&threadlinev1.CallResult{ToolCallId: "p1", Result: &threadlinev1.CallResult_Failed{Failed: &threadlinev1.ToolFailedResult{
				Message: "Child " + childThread + " did not complete successfully (child_cancelled).",
			}}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			call := childCall()
			answers := answersFor(call)
			if err := answers.AnswerChild(call, tc.result); err != nil {
				t.Fatal(err)
			}
			got := answers.Results().GetCalls()
			if len(got) != 1 || !proto.Equal(got[0], tc.want) {
				t.Errorf("answers %v, want %v", got, tc.want)
			}
			if len(answers.Pending()) != 0 {
				t.Errorf("pending after the answer: %v", answers.Pending())
			}
		})
	}
}

func TestAnswerChildRunning(t *testing.T) {
	call := childCall()
	answers := answersFor(call)
	if err := answers.AnswerChildRunning(call); err != nil {
		t.Fatal(err)
	}
	want := &threadlinev1.CallResult{ToolCallId: "p1", Result: &threadlinev1.CallResult_ValueJson{
		ValueJson: `{"execution_id":"` + childThread + `","subagent":"reviewer","status":"running"}`,
	}}
	if got := answers.Results().GetCalls(); len(got) != 1 || !proto.Equal(got[0], want) {
		t.Errorf("answers %v, want %v", got, want)
	}
	if err := threadline.NewAnswers(nil).AnswerChildRunning(plainCall()); err == nil || !strings.Contains(err.Error(), "call c1 is not a child request") {
		t.Errorf("a plain call answered running: %v", err)
	}
}

func TestAnswerChildRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		call   *threadline.DeferredToolCall
		result *threadline.RunResult
		want   string
	}{
		"suspended child":  {childCall(), &threadline.RunResult{Status: threadline.StatusSuspended, ThreadId: childThread}, "is suspended"},
		"another thread":   {childCall(), &threadline.RunResult{Status: threadline.StatusCompleted, ThreadId: "thread_other", OutputJson: `"x"`}, `result of thread "thread_other"`},
		"no status":        {childCall(), &threadline.RunResult{ThreadId: childThread}, "not a terminal one"},
		"no output":        {childCall(), &threadline.RunResult{Status: threadline.StatusCompleted, ThreadId: childThread}, "has no JSON output"},
		"not a child call": {plainCall(), &threadline.RunResult{Status: threadline.StatusCompleted, ThreadId: childThread, OutputJson: `"x"`}, "call c1 is not a child request"},
	} {
		t.Run(name, func(t *testing.T) {
			answers := answersFor(tc.call)
			err := answers.AnswerChild(tc.call, tc.result)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
			if errors.Is(err, threadline.ErrChildSuspended) != (name == "suspended child") {
				t.Errorf("errors.Is(ErrChildSuspended) = %v", errors.Is(err, threadline.ErrChildSuspended))
			}
			if len(answers.Results().GetCalls()) != 0 || len(answers.Pending()) != 1 {
				t.Errorf("a refused answer was recorded: %v", answers.Results())
			}
		})
	}
}

func TestChildRequestsAndForChild(t *testing.T) {
	call := childCall()
	batch := &threadline.DeferredToolRequests{
		Approvals: []*threadline.DeferredToolCall{{ToolCallId: "a1", Kind: threadline.KindApproval}},
		Calls:     []*threadline.DeferredToolCall{plainCall(), call},
	}
	if got := threadline.ChildRequests(batch); len(got) != 1 || got[0] != call {
		t.Errorf("ChildRequests = %v, want the one child call", got)
	}
	if got := threadline.ChildRequests(nil); got != nil {
		t.Errorf("ChildRequests(nil) = %v", got)
	}

	spec := &threadline.RunSpec{Prompt: threadline.Text("go on")}
	if got := threadline.ForChild(call.GetChild(), spec); got != spec || spec.GetAgent() != "demo-reviewer" ||
		!proto.Equal(spec.GetLineage(), call.GetChild().GetParent()) || spec.GetLineage() == call.GetChild().GetParent() {
		t.Errorf("ForChild = %v: want spec itself with the agent and a copy of the lineage", got)
	}
}

func TestRunChildRefusesWithoutItsThread(t *testing.T) {
	c := dial(t)
	cont := proto.CloneOf(childCall().GetChild())
	cont.Action = threadline.ChildContinue
	if _, err := c.RunChild(t.Context(), cont, nil); err == nil || !strings.Contains(err.Error(), "pass the child thread's state") {
		t.Errorf("continue without a state: %v", err)
	}
	other, err := c.NewState(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunChild(t.Context(), childCall().GetChild(), other); err == nil || !strings.Contains(err.Error(), "given for the child thread "+childThread) {
		t.Errorf("another thread's state: %v", err)
	}
	if _, err := c.RunChild(t.Context(), nil, nil); err == nil {
		t.Error("nil request: no error")
	}
}
