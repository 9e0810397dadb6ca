package threadline_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"google.golang.org/grpc"

	threadline "github.com/threadline-dev/threadline/clients/go"
	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// The examples run against the server of the test run (serverAddr, e.g. "127.0.0.1:50051"),
// whose default agent has a scripted model: "delete" asks for an approval, "lookup" calls a
// plain tool, and anything else is echoed.

func Example() {
	c, err := threadline.Dial(serverAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	first, err := c.Run(ctx, &threadline.RunSpec{Prompt: threadline.Text("hello")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.GetStatus(), first.GetOutputJson())

	// Continue the thread from the state the first run returned.
	second, err := c.Run(ctx, threadline.Continue(first.GetState(), "and again"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(second.GetThreadId() == first.GetThreadId(), second.GetOutputJson())
	// Output:
	// RUN_STATUS_COMPLETED "You said: hello"
	// true "You said: and again"
}

func ExampleClient_StreamRun() {
	c, err := threadline.Dial(serverAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	s := c.StreamRun(context.Background(), &threadline.RunSpec{Prompt: threadline.Text("lookup grpc")})
	defer s.Close()
	for s.Receive() {
		ev := s.Msg()
		switch {
		case ev.GetToolCall() != nil:
			fmt.Println("call", ev.GetToolCall().GetToolName(), ev.GetToolCall().GetArgsJson())
		case ev.GetToolResult() != nil:
			fmt.Println("result", ev.GetToolResult().GetOutcome())
		case ev.GetResult() != nil:
			fmt.Println(ev.GetResult().GetStatus(), ev.GetResult().GetOutputJson())
		}
	}
	if err := s.Err(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// call lookup {"query": "grpc"}
	// result TOOL_OUTCOME_SUCCESS
	// RUN_STATUS_COMPLETED "Tool results: lookup: gRPC is a remote procedure call framework over HTTP/2."
}

func ExampleAnswers() {
	c, err := threadline.Dial(serverAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	result, err := c.Run(ctx, &threadline.RunSpec{Prompt: threadline.Text("delete notes.txt")})
	if err != nil {
		log.Fatal(err)
	}
	for result.GetStatus() == threadline.StatusSuspended {
		answers := threadline.NewAnswers(result.GetDeferred()).AnsweredBy("example")
		for _, call := range answers.Approvals() {
			fmt.Println("approve?", call.GetToolName(), call.GetArgsJson())
			answers.Approve(call.GetToolCallId()) // or answers.Deny(id, "why not")
		}
		if result, err = c.Run(ctx, threadline.Resume(result, answers)); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(result.GetStatus(), result.GetOutputJson())
	// Output:
	// approve? delete_file {"path": "notes.txt"}
	// RUN_STATUS_COMPLETED "Tool results: delete_file: Deleted notes.txt."
}

func ExampleAnswers_Return() {
	c, err := threadline.Dial(serverAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	// A client tool: declared by the host in every run of the thread, executed by the host.
	tools := []*threadline.ClientTool{{
		Name:                 "get_time",
		ParametersJsonSchema: `{"type":"object","properties":{"zone":{"type":"string"}}}`,
	}}
	result, err := c.Run(ctx, &threadline.RunSpec{Prompt: threadline.Text(`client:get_time {"zone":"UTC"}`), ClientTools: tools})
	if err != nil {
		log.Fatal(err)
	}
	answers := threadline.NewAnswers(result.GetDeferred())
	for _, call := range answers.Calls() {
		fmt.Println("run", call.GetTargetIdentity(), call.GetArgsJson())
		if err := answers.Return(call.GetToolCallId(), map[string]string{"time": "12:00"}); err != nil {
			log.Fatal(err)
		}
	}
	spec := threadline.Resume(result, answers)
	spec.ClientTools = tools
	if result, err = c.Run(ctx, spec); err != nil {
		log.Fatal(err)
	}
	fmt.Println(result.GetStatus(), result.GetOutputJson())
	// Output:
	// run tool/threadline.client/get_time {"zone": "UTC"}
	// RUN_STATUS_COMPLETED "Tool results: get_time: {\"time\":\"12:00\"}"
}

func ExampleReasonOf() {
	c, err := threadline.Dial(serverAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	state, err := c.NewState(ctx, "thr_example1")
	if err != nil {
		log.Fatal(err)
	}
	state.SchemaVersion = "999" // written by a newer harness
	_, err = c.Run(ctx, threadline.Continue(state, "hello"))
	err = fmt.Errorf("continue thread: %w", err)

	fmt.Println(threadline.CodeOf(err), threadline.ReasonOf(err))
	var e *threadline.Error
	if errors.As(err, &e) {
		fmt.Println(e.Metadata()["received"], e.Metadata()["supported"])
	}
	// Output:
	// FailedPrecondition SCHEMA_VERSION_UNSUPPORTED
	// 999 1
}

// A host tells the SDK's own findings (*ProtocolError: the server's answer broke the contract)
// from the statuses the server sent (*Error). Here a stream is cut before its result, as a broken
// proxy might do it: cutBeforeResult is a grpc stream interceptor of this file.
func ExampleProtocolError() {
	c, err := threadline.Dial(serverAddr, threadline.WithDialOptions(cutBeforeResult))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	s := c.StreamRun(context.Background(), &threadline.RunSpec{Prompt: threadline.Text("hello")})
	defer s.Close()
	for s.Receive() {
	}
	err = s.Err()

	var protocolErr *threadline.ProtocolError
	var serverErr *threadline.Error
	switch {
	case errors.As(err, &protocolErr): // first: a *ProtocolError is also an *Error
		fmt.Println("the server broke the contract:", protocolErr.Message())
	case errors.As(err, &serverErr):
		fmt.Println("the server said:", serverErr.Code(), serverErr.Reason())
	}
	fmt.Println(threadline.CodeOf(err), threadline.ReasonOf(err) == "", errors.Is(err, threadline.ErrNoResult))
	// Output:
	// the server broke the contract: the stream ended without its terminal result
	// Internal true true
}

// cutBeforeResult ends every stream cleanly (io.EOF) where the server sends a result, so the
// stream ends without one.
var cutBeforeResult = grpc.WithStreamInterceptor(
	func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		return &resultCut{ClientStream: s}, err
	})

type resultCut struct{ grpc.ClientStream }

func (s *resultCut) RecvMsg(m any) error {
	if err := s.ClientStream.RecvMsg(m); err != nil {
		return err
	}
	resp, ok := m.(*threadlinev1.StreamRunResponse)
	if !ok {
		return nil
	}
	for _, ev := range append([]*threadline.RunEvent{resp.GetEvent()}, resp.GetEvents()...) {
		if ev.GetResult() != nil {
			return io.EOF
		}
	}
	return nil
}

func ExampleMarshalState() {
	c, err := threadline.Dial(serverAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	result, err := c.Run(ctx, &threadline.RunSpec{Prompt: threadline.Text("count")})
	if err != nil {
		log.Fatal(err)
	}
	// Persist the envelope (threadline.Binary is smaller; threadline.JSON is readable).
	path := filepath.Join(os.TempDir(), "threadline-example-state.json")
	data, err := threadline.MarshalState(result.GetState(), threadline.JSON)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		log.Fatal(err)
	}
	defer os.Remove(path)

	// Later, maybe in another process: load it and continue the thread.
	data, err = os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	state, err := threadline.UnmarshalState(data, threadline.JSON)
	if err != nil {
		log.Fatal(err)
	}
	next, err := c.Run(ctx, threadline.Continue(state, "count"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(next.GetThreadId() == result.GetThreadId(), next.GetOutputJson())
	// Output:
	// true "Tool results: count: 2"
}

func ExampleClient_ForkState() {
	c, err := threadline.Dial(serverAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	result, err := c.Run(ctx, &threadline.RunSpec{Prompt: threadline.Text("hello")})
	if err != nil {
		log.Fatal(err)
	}
	fork, err := c.ForkState(ctx, result.GetState(), "thr_branch1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(fork.GetThreadId(), fork.GetMessageHistory().GetMessageCount() == result.GetState().GetMessageHistory().GetMessageCount())
	// Output:
	// thr_branch1 true
}

func ExampleClient_Threads() {
	c, err := threadline.Dial(serverAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	th := c.Threads()

	// The server keeps the thread: the host sends only the prompt, then its answers by call ID.
	thread, err := th.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer th.Delete(ctx, thread.GetThreadId(), 0)
	outcome, err := th.Run(ctx, thread.GetThreadId(), &threadline.ThreadRun{Text: "delete notes.txt"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(outcome.Result.GetStatus())

	answers := threadline.NewAnswers(outcome.Result.GetDeferred())
	answers.Approve(answers.Approvals()[0].GetToolCallId())
	outcome, err = th.Run(ctx, thread.GetThreadId(), &threadline.ThreadRun{Answers: answers.Results()})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(outcome.Result.GetStatus(), outcome.Result.GetOutputJson())

	// The result carries no state: it is the checkpoint at the outcome's revision.
	head, err := th.Checkpoint(ctx, thread.GetThreadId(), outcome.Revision)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(head.GetKind(), head.GetState().GetThreadId() == thread.GetThreadId())
	// Output:
	// RUN_STATUS_SUSPENDED
	// RUN_STATUS_COMPLETED "Tool results: delete_file: Deleted notes.txt."
	// CHECKPOINT_KIND_COMPLETED true
}

func ExampleThreads_Stream() {
	c, err := threadline.Dial(serverAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	thread, err := c.Threads().Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}

	s := c.Threads().Stream(ctx, thread.GetThreadId(), &threadline.ThreadRun{Text: "hello"})
	defer s.Close()
	var last *threadlinev1.ThreadCommitted // the run commits at every checkpoint boundary
	for s.Receive() {
		if committed := s.Msg().GetThreadCommitted(); committed != nil {
			last = committed
		} else if s.Msg().GetResult() != nil {
			fmt.Println("committed", last.GetKind(), "before the result")
		}
	}
	outcome, err := s.Collect()
	if err != nil {
		log.Fatal(err) // retry with &threadline.ThreadRun{Text: "hello", RequestID: s.RequestID()}
	}
	fmt.Println(outcome.Result.GetOutputJson(), outcome.Revision == last.GetRevision(), outcome.Replayed)
	// Output:
	// committed CHECKPOINT_KIND_COMPLETED before the result
	// "You said: hello" true false
}

func ExampleThreads_StartRun() {
	c, err := threadline.Dial(serverAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	th := c.Threads()
	thread, err := th.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}

	// It answers once the run holds the thread; the server runs it to its end with no client.
	started, err := th.StartRun(ctx, thread.GetThreadId(), &threadline.ThreadRun{Text: "lookup grpc"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(started.Status(), started.Revision())
	s := started.Events(ctx, nil) // from run_started, following its next attempts if its server is lost
	for s.Receive() {
		if call := s.Msg().GetToolCall(); call != nil {
			fmt.Println("tool", call.GetToolName())
		}
	}
	s.Close()
	outcome, err := started.Result(ctx) // to the end, wherever its attempts ran
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(outcome.Result.GetStatus(), outcome.Result.GetRunId() == started.RunID())
	// Output:
	// THREAD_RUN_STATUS_RUNNING 1
	// tool lookup
	// RUN_STATUS_COMPLETED true
}

func ExampleThreadBusyError() {
	c, err := threadline.Dial(serverAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	th := c.Threads()
	thread, err := th.Create(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	s := th.Stream(ctx, thread.GetThreadId(), &threadline.ThreadRun{Text: "sleep 30"})
	defer s.Close()
	for s.Receive() {
		if s.Msg().GetToolCall() != nil {
			break // inside the sleep tool; the thread is busy from run_started on
		}
	}

	_, err = th.Run(ctx, thread.GetThreadId(), &threadline.ThreadRun{Text: "hello"})
	var busy *threadline.ThreadBusyError
	if errors.As(err, &busy) {
		fmt.Println(threadline.ReasonOf(err), busy.RequestID == s.RequestID())
		if _, err := th.Cancel(ctx, thread.GetThreadId(), busy.RunID); err != nil {
			log.Fatal(err)
		}
	}
	outcome, err := s.Collect()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(outcome.Result.GetStatus())
	// Output:
	// THREAD_BUSY true
	// RUN_STATUS_CANCELLED
}

func ExampleClient_RunChild() {
	c, err := threadline.Dial(serverAddr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	// demo-lead delegates to its Host-managed child: the parent suspends with a child request.
	parent, err := c.Run(ctx, &threadline.RunSpec{Agent: "demo-lead", Prompt: threadline.Text("ask-child delete old.txt")})
	if err != nil {
		log.Fatal(err)
	}
	answers := threadline.NewAnswers(parent.GetDeferred())
	for _, call := range threadline.ChildRequests(parent.GetDeferred()) {
		request := call.GetChild()
		fmt.Println("run", request.GetAgent(), "for", request.GetSubagentName())
		child, err := c.RunChild(ctx, request, nil) // a new thread, request.GetThreadId()
		for err == nil && child.GetStatus() == threadline.StatusSuspended {
			childAnswers := threadline.NewAnswers(child.GetDeferred())
			for _, approval := range childAnswers.Approvals() {
				fmt.Println("approve", approval.GetToolName(), approval.GetArgsJson())
				childAnswers.Approve(approval.GetToolCallId())
			}
			child, err = c.Run(ctx, threadline.ForChild(request, threadline.Resume(child, childAnswers)))
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("child", child.GetStatus(), child.GetOutputJson())
		if err := answers.AnswerChild(call, child); err != nil {
			log.Fatal(err)
		}
	}
	spec := threadline.Resume(parent, answers)
	spec.Agent = "demo-lead"
	done, err := c.Run(ctx, spec)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("parent", done.GetStatus())
	// Output:
	// run demo-reviewer for reviewer
	// approve delete_file {"path": "old.txt"}
	// child RUN_STATUS_COMPLETED "Tool results: delete_file: Deleted old.txt."
	// parent RUN_STATUS_COMPLETED
}
