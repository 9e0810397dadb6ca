package threadline

import (
	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// Aliases of the generated messages a host uses most. They are the same types, so values mix
// freely with code that imports the generated package.
type (
	// RunSpec says what to run; see threadline.v1.RunSpec.
	RunSpec = threadlinev1.RunSpec
	// RunResult is a run's terminal outcome.
	RunResult = threadlinev1.RunResult
	// RunEvent is one event of a streamed run.
	RunEvent = threadlinev1.RunEvent
	// HarnessState is a thread's state envelope: persist it, send it back unchanged.
	HarnessState = threadlinev1.HarnessState
	// ClientTool is a tool the host declares for a run and executes itself.
	ClientTool = threadlinev1.ClientTool
	// DeferredToolRequests is the batch of calls a suspended run waits on.
	DeferredToolRequests = threadlinev1.DeferredToolRequests
	// DeferredToolCall is one pending call of a DeferredToolRequests batch.
	DeferredToolCall = threadlinev1.DeferredToolCall
	// DeferredToolResume is a batch with the host's answers, sent in RunSpec.DeferredResume.
	DeferredToolResume = threadlinev1.DeferredToolResume
	// RunStatus is how a run ended.
	RunStatus = threadlinev1.RunStatus
	// DeferredKind is what a pending call asks of the host.
	DeferredKind = threadlinev1.DeferredKind
)

// Short names for the values of RunStatus and DeferredKind.
const (
	StatusCompleted = threadlinev1.RunStatus_RUN_STATUS_COMPLETED
	StatusSuspended = threadlinev1.RunStatus_RUN_STATUS_SUSPENDED
	StatusFailed    = threadlinev1.RunStatus_RUN_STATUS_FAILED
	StatusCancelled = threadlinev1.RunStatus_RUN_STATUS_CANCELLED

	KindApproval = threadlinev1.DeferredKind_DEFERRED_KIND_APPROVAL
	KindExternal = threadlinev1.DeferredKind_DEFERRED_KIND_EXTERNAL
	KindQuestion = threadlinev1.DeferredKind_DEFERRED_KIND_QUESTION
)

// Text is a plain text prompt for RunSpec.Prompt.
//
//	spec := &threadline.RunSpec{Prompt: threadline.Text("hello")}
func Text(prompt string) *threadlinev1.RunSpec_Text {
	return &threadlinev1.RunSpec_Text{Text: prompt}
}
