package threadline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// Host-managed children (CHILDREN §4). A parent that delegates to a Host-managed child suspends
// with one pending call per child request: a KindExternal call whose Child (a *ChildRequest) says
// which agent to run on which thread, with what input and lineage. The host runs the child as an
// ordinary thread of its own and answers the parent's call once the child has ended:
//
//	for _, call := range threadline.ChildRequests(parent.GetDeferred()) {
//		child, err := c.RunChild(ctx, call.GetChild(), nil) // persist child.GetState()
//		for err == nil && child.GetStatus() == threadline.StatusSuspended {
//			childAnswers := threadline.NewAnswers(child.GetDeferred()) // ask the user, ...
//			child, err = c.Run(ctx, threadline.ForChild(call.GetChild(), threadline.Resume(child, childAnswers)))
//		}
//		if err == nil {
//			err = answers.AnswerChild(call, child)
//		}
//	}
//
// These helpers keep nothing: the host keeps both threads' states and the link from the parent's
// call to the child's thread (by the child's thread ID, since tool call IDs may repeat).

// ErrChildSuspended is what errors.Is matches in the error of AnswerChild given a suspended child
// result: the child has no answer yet. Answer the child's own pending calls and run it again
// first (or answer the parent's call another way, e.g. Fail).
var ErrChildSuspended = errors.New("threadline: the child run is suspended: answer it and run it again before answering its parent")

// ChildRequests returns the calls of a suspended run's batch that ask the host to run a child
// (those whose Child is set), in the model's order. Answers.Calls lists them too, beside the
// client and external tools.
func ChildRequests(requests *DeferredToolRequests) []*DeferredToolCall {
	var out []*DeferredToolCall
	for _, call := range requests.GetCalls() {
		if call.GetChild() != nil {
			out = append(out, call)
		}
	}
	return out
}

// ForChild makes spec a run of the child that request asks for: it sets spec's Agent to
// request's agent and its Lineage to a copy of request's Parent, and returns spec. Send every run
// of the child thread with them (its first run, the resumes of its suspensions, a recovery): the
// lineage names the parent's agent, so the server checks the edge and applies its usage limits
// and the child's identity.
//
//	spec := threadline.ForChild(request, threadline.Resume(child, childAnswers))
func ForChild(request *ChildRequest, spec *RunSpec) *RunSpec {
	spec.Agent = request.GetAgent()
	spec.Lineage = proto.CloneOf(request.GetParent())
	return spec
}

// RunChild runs the child that request asks for once, with request's input as its prompt, and
// returns the child's result: persist its state (the child's thread), and while it is SUSPENDED
// answer it and run it again (ForChild with Resume) before answering the parent with
// Answers.AnswerChild.
//
// state is the child thread's state: nil to start the child (CHILD_ACTION_START), when RunChild
// first makes the thread with NewState(request's thread ID); or the state the host kept for that
// thread, to continue it (CHILD_ACTION_CONTINUE, or a start request asked again after a parent's
// recovery, whose thread already exists). It is ForChild(request, Continue(state, input)) and
// Run; build that spec yourself to stream the child, ask for checkpoints or declare its client
// tools.
func (c *Client) RunChild(ctx context.Context, request *ChildRequest, state *HarnessState) (*RunResult, error) {
	if request == nil {
		return nil, errors.New("threadline: RunChild needs a child request (DeferredToolCall.Child)")
	}
	switch {
	case state == nil && request.GetAction() != ChildStart:
		return nil, fmt.Errorf("threadline: child request for %s is %v: pass the child thread's state", request.GetThreadId(), request.GetAction())
	case state == nil:
		var err error
		if state, err = c.NewState(ctx, request.GetThreadId()); err != nil {
			return nil, err
		}
	case state.GetThreadId() != request.GetThreadId():
		return nil, fmt.Errorf("threadline: state of thread %s given for the child thread %s", state.GetThreadId(), request.GetThreadId())
	}
	return c.Run(ctx, ForChild(request, Continue(state, request.GetInput())))
}

// childAnswer is the parent's answer for a child (CHILDREN §4.4): Output exactly when completed.
type childAnswer struct {
	ExecutionID string          `json:"execution_id"`
	Subagent    string          `json:"subagent"`
	Status      string          `json:"status"`
	Output      json.RawMessage `json:"output,omitempty"`
}

// childRequestOf returns the child request of call, or the error for a call that is none.
func childRequestOf(call *DeferredToolCall) (*ChildRequest, error) {
	request := call.GetChild()
	if request == nil {
		return nil, fmt.Errorf("threadline: call %s is not a child request", call.GetToolCallId())
	}
	return request, nil
}

// returnChild records the child answer of request with status (and output) as the result of
// call.
func (a *Answers) returnChild(call *DeferredToolCall, request *ChildRequest, status string, output json.RawMessage) error {
	value, err := json.Marshal(childAnswer{ExecutionID: request.GetThreadId(), Subagent: request.GetSubagentName(), Status: status, Output: output})
	if err != nil {
		return fmt.Errorf("threadline: encode the answer of child %s: %w", request.GetThreadId(), err)
	}
	a.ReturnJSON(call.GetToolCallId(), string(value))
	return nil
}

// AnswerChildRunning answers the parent's child request call with the admission value
// {"execution_id": <child thread ID>, "subagent": <edge name>, "status": "running"}: the parent
// goes on while the host runs the child, and its model may ask for the child's outcome later
// (resume_subagent, a CHILD_ACTION_CONTINUE request for the same thread).
func (a *Answers) AnswerChildRunning(call *DeferredToolCall) error {
	request, err := childRequestOf(call)
	if err != nil {
		return err
	}
	return a.returnChild(call, request, "running", nil)
}

// AnswerChild answers the parent's child request call with the child's terminal result: for a
// COMPLETED child the value {"execution_id": <child thread ID>, "subagent": <edge name>,
// "status": "completed", "output": <the child's output>}; for a FAILED or CANCELLED one the
// failure "Child <thread ID> did not complete successfully (<code>)." (the failure's code, or
// child_cancelled). A SUSPENDED child has no answer yet (ErrChildSuspended); neither has a
// result of another thread, nor a call that is no child request.
func (a *Answers) AnswerChild(call *DeferredToolCall, result *RunResult) error {
	request, err := childRequestOf(call)
	if err != nil {
		return err
	}
	if result.GetThreadId() != request.GetThreadId() {
		return fmt.Errorf("threadline: result of thread %q does not answer the child request for %s", result.GetThreadId(), request.GetThreadId())
	}
	switch result.GetStatus() {
	case StatusCompleted:
		if !json.Valid([]byte(result.GetOutputJson())) {
			return fmt.Errorf("threadline: completed child %s has no JSON output", request.GetThreadId())
		}
		return a.returnChild(call, request, "completed", json.RawMessage(result.GetOutputJson()))
	case StatusFailed, StatusCancelled:
		code := "child_cancelled"
		if f := result.GetFailure(); f != nil {
			code = f.GetCode()
		}
		a.Fail(call.GetToolCallId(), fmt.Sprintf("Child %s did not complete successfully (%s).", request.GetThreadId(), code))
		return nil
	case StatusSuspended:
		return fmt.Errorf("child %s: %w", request.GetThreadId(), ErrChildSuspended)
	default:
		return fmt.Errorf("threadline: child %s has status %v, not a terminal one", request.GetThreadId(), result.GetStatus())
	}
}
