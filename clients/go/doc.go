// Package threadline is the Go host SDK of Threadline, a gRPC server that runs Pydantic AI
// harness threads.
//
// A host owns its threads: it keeps the state envelope ([HarnessState]) each run returns,
// answers deferred tool calls (approvals, client tools), and starts the next run with the state
// it chose. The server keeps nothing between runs of [Client.Run] and [Client.StreamRun].
//
//	c, err := threadline.Dial("127.0.0.1:50051")
//	if err != nil { ... }
//	defer c.Close()
//
//	s := c.StreamRun(ctx, &threadline.RunSpec{Prompt: threadline.Text("hello")})
//	defer s.Close()
//	for s.Receive() {
//		handle(s.Msg())
//	}
//	if err := s.Err(); err != nil { ... }
//	result := s.Result() // the terminal RunResult: persist result.GetState()
//
// With [Client.Threads] the server keeps the threads instead (ThreadService): the host sends only
// what is new, a prompt or its answers by call ID, and every request is answered exactly once.
//
//	th := c.Threads()
//	thread, err := th.Create(ctx, nil)
//	outcome, err := th.Run(ctx, thread.GetThreadId(), &threadline.ThreadRun{Text: "delete notes.txt"})
//	if outcome.Result.GetStatus() == threadline.StatusSuspended {
//		answers := threadline.NewAnswers(outcome.Result.GetDeferred())
//		answers.Approve(answers.Approvals()[0].GetToolCallId())
//		outcome, err = th.Run(ctx, thread.GetThreadId(), &threadline.ThreadRun{Answers: answers.Results()})
//	}
//
// [Threads.JoinRun] follows a run the host did not start, live or finished, from any replica: the
// same events [Threads.Stream] hands out, with the same sequences. Both reconnect a broken stream
// from the last sequence they handed out; [Threads.WatchThread] yields a thread's changes.
//
// A parent that delegates to a Host-managed child suspends with a child request
// (DeferredToolCall.Child, listed by [ChildRequests]); [Client.RunChild] runs the child on a
// thread of its own, [ForChild] makes any later run of it (a resume, a recovery) a child run, and
// [Answers.AnswerChild] answers the parent with the child's result ([Answers.AnswerChildRunning]
// lets the parent go on meanwhile).
//
// Errors from the server are *[Error] values carrying the gRPC code and the ErrorInfo reason
// (e.g. [ReasonSchemaVersionUnsupported]); [ReasonOf] and [CodeOf] read them through wrapping.
// The threads' reasons are typed errors wrapping one, such as *[ThreadBusyError].
// When the server's answer breaks the contract (a stream without its result, a checkpoint delta
// that does not rebuild), the SDK returns a *[ProtocolError]: a kind of *[Error] with
// codes.Internal and no reason. Failures after a run started are not errors: they are a FAILED
// [RunResult].
//
// Every call carries the OpenTelemetry trace context of its ctx (W3C traceparent and tracestate,
// plus whatever the global propagator adds), so a tracing server continues the host's trace; with
// no span in ctx nothing is sent. The SDK makes no spans of its own.
//
// The messages are the generated types of package
// github.com/threadline-dev/threadline/clients/go/gen/threadline/v1; the common ones are
// re-exported here as aliases, so most hosts import only this package.
package threadline
