package threadline

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/proto"

	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// Answers collects a host's answers to the deferred batch a run suspended on. Answer every
// pending item once, in its own category (Approve or Deny an approval; Return, Fail or Retry a
// call), then pass the answers to Resume, or their Results to a thread run (Threads).
//
//	answers := threadline.NewAnswers(result.GetDeferred())
//	for _, call := range answers.Approvals() {
//		answers.Approve(call.GetToolCallId())
//	}
//	next, err := c.Run(ctx, threadline.Resume(result, answers))
//
// The server checks the answers (all present, none extra, right category) before the run starts;
// a mistake is an *Error such as ReasonDeferredResultsIncomplete. An Answers is not safe for
// concurrent use.
type Answers struct {
	requests *DeferredToolRequests
	results  *threadlinev1.DeferredToolResults
	answered map[string]bool
	by       string
}

// NewAnswers starts the answers to requests, the batch of a SUSPENDED RunResult.
func NewAnswers(requests *DeferredToolRequests) *Answers {
	return &Answers{
		requests: requests,
		results:  &threadlinev1.DeferredToolResults{},
		answered: map[string]bool{},
	}
}

// AnsweredBy records who answers the items answered after this call (a person's ID, a bot or a
// policy name). The server records it but does not check it.
func (a *Answers) AnsweredBy(who string) *Answers {
	a.by = who
	return a
}

// Approvals returns the calls waiting for approval, in the model's order.
func (a *Answers) Approvals() []*DeferredToolCall { return a.requests.GetApprovals() }

// Calls returns the calls the host executes itself (client and external tools, questions).
func (a *Answers) Calls() []*DeferredToolCall { return a.requests.GetCalls() }

// Pending returns the items of the batch not answered yet: approvals first, then calls.
func (a *Answers) Pending() []*DeferredToolCall {
	var out []*DeferredToolCall
	for _, c := range a.requests.GetApprovals() {
		if !a.answered[c.GetToolCallId()] {
			out = append(out, c)
		}
	}
	for _, c := range a.requests.GetCalls() {
		if !a.answered[c.GetToolCallId()] {
			out = append(out, c)
		}
	}
	return out
}

// Approve lets the call run, with the model's arguments, in the next run.
func (a *Answers) Approve(toolCallID string) *Answers {
	return a.approval(&threadlinev1.ApprovalResult{
		ToolCallId: toolCallID,
		Decision:   &threadlinev1.ApprovalResult_Approved{Approved: &threadlinev1.ToolApproved{}},
	})
}

// ApproveWithArgs lets the call run with argsJSON (a JSON object) instead of the model's
// arguments; they are validated when the call runs, and the history keeps the original call.
func (a *Answers) ApproveWithArgs(toolCallID, argsJSON string) *Answers {
	return a.approval(&threadlinev1.ApprovalResult{
		ToolCallId: toolCallID,
		Decision: &threadlinev1.ApprovalResult_Approved{
			Approved: &threadlinev1.ToolApproved{OverrideArgsJson: proto.String(argsJSON)},
		},
	})
}

// Deny refuses the call; the model sees message as the tool's result (an empty message means the
// default "The tool call was denied.").
func (a *Answers) Deny(toolCallID, message string) *Answers {
	return a.approval(&threadlinev1.ApprovalResult{
		ToolCallId: toolCallID,
		Decision:   &threadlinev1.ApprovalResult_Denied{Denied: &threadlinev1.ToolDenied{Message: message}},
	})
}

// Return records value, encoded with encoding/json, as the successful result of a call the host
// executed (a client or external tool, or the answer to a question).
func (a *Answers) Return(toolCallID string, value any) error {
	data, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("threadline: encode result of %s: %w", toolCallID, err)
	}
	a.ReturnJSON(toolCallID, string(data))
	return nil
}

// ReturnJSON is Return for a value that is already JSON text.
func (a *Answers) ReturnJSON(toolCallID, valueJSON string) *Answers {
	return a.call(&threadlinev1.CallResult{ToolCallId: toolCallID, Result: &threadlinev1.CallResult_ValueJson{ValueJson: valueJSON}})
}

// Fail records that the call failed; the model sees message.
func (a *Answers) Fail(toolCallID, message string) *Answers {
	return a.call(&threadlinev1.CallResult{ToolCallId: toolCallID, Result: &threadlinev1.CallResult_Failed{Failed: &threadlinev1.ToolFailedResult{Message: message}}})
}

// Retry asks the model to call the tool again, with message as feedback.
func (a *Answers) Retry(toolCallID, message string) *Answers {
	return a.call(&threadlinev1.CallResult{ToolCallId: toolCallID, Result: &threadlinev1.CallResult_Retry{Retry: &threadlinev1.ToolRetryResult{Message: message}}})
}

// Resume returns the batch and the answers as the DeferredToolResume of the next run. The
// answers are copied, so a later change to a does not alter it.
func (a *Answers) Resume() *DeferredToolResume {
	return &DeferredToolResume{
		Requests: a.requests,
		Results:  proto.CloneOf(a.results),
	}
}

// Results returns the answers alone, keyed by call ID, for a thread run's ThreadRun.Answers: the
// server keeps the batch (Thread.Pending) and pairs them with it. They are copied, so a later
// change to a does not alter them.
//
//	answers := threadline.NewAnswers(thread.GetPending())
//	answers.Approve(answers.Approvals()[0].GetToolCallId())
//	outcome, err := c.Threads().Run(ctx, thread.GetThreadId(), &threadline.ThreadRun{Answers: answers.Results()})
func (a *Answers) Results() *DeferredToolResults {
	return proto.CloneOf(a.results)
}

// Resume returns the RunSpec that continues the suspended run result with answers: previous
// state and deferred resume set. Add the thread's client tools (declare them in every run) and
// any other settings before running it.
func Resume(result *RunResult, answers *Answers) *RunSpec {
	return &RunSpec{
		PreviousState:  result.GetState(),
		DeferredResume: answers.Resume(),
	}
}

// Continue returns the RunSpec that continues the thread of state with a new text prompt.
func Continue(state *HarnessState, prompt string) *RunSpec {
	return &RunSpec{PreviousState: state, Prompt: Text(prompt)}
}

func (a *Answers) approval(r *threadlinev1.ApprovalResult) *Answers {
	r.AnsweredBy = a.by
	a.results.Approvals = append(a.results.Approvals, r)
	a.answered[r.GetToolCallId()] = true
	return a
}

func (a *Answers) call(r *threadlinev1.CallResult) *Answers {
	r.AnsweredBy = a.by
	a.results.Calls = append(a.results.Calls, r)
	a.answered[r.GetToolCallId()] = true
	return a
}
