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
	// DeferredToolResults are a host's answers by call ID, sent in ThreadRun.Answers.
	DeferredToolResults = threadlinev1.DeferredToolResults
	// PromptParts is a prompt of several parts.
	PromptParts = threadlinev1.PromptParts
	// UsageLimits limits a run's model usage.
	UsageLimits = threadlinev1.UsageLimits
	// ToolRecovery says how a run settles calls its previous state left unanswered.
	ToolRecovery = threadlinev1.ToolRecovery
	// ChildRequest is a Host-managed child a parent run asks the host to run (DeferredToolCall.Child).
	ChildRequest = threadlinev1.ChildRequest
	// ChildLineage says which parent run a child run serves (RunSpec.Lineage).
	ChildLineage = threadlinev1.ChildLineage
	// ChildAction is what a ChildRequest asks: start the child thread or continue it.
	ChildAction = threadlinev1.ChildAction

	// Thread is a thread the server keeps (Threads).
	Thread = threadlinev1.Thread
	// Checkpoint is one committed revision of a thread.
	Checkpoint = threadlinev1.Checkpoint
	// ThreadStatus is what a thread is doing: IDLE, RUNNING or SUSPENDED.
	ThreadStatus = threadlinev1.ThreadStatus
	// ThreadRunStatus is the status of a thread run's record (Threads.Cancel, StartedRun.Status);
	// THREAD_RUN_STATUS_QUEUED while the request waits in its thread's queue (BusyEnqueue,
	// BusyInterrupt, BusyRollback).
	ThreadRunStatus = threadlinev1.ThreadRunStatus
	// CheckpointKind is what made a checkpoint.
	CheckpointKind = threadlinev1.CheckpointKind
	// BusyStrategy is what a run request does when its thread is busy (ThreadRun.BusyStrategy):
	// BusyReject, BusyEnqueue, BusyInterrupt or BusyRollback.
	BusyStrategy = threadlinev1.BusyStrategy
	// QueuedRun is a request waiting in a thread's queue (Thread.Queue, GetQueue): its RequestId,
	// the RunId its first attempt will run under (JoinRun and Cancel take it), its Kind and its
	// CreateTime (when it was accepted, by the store's clock).
	QueuedRun = threadlinev1.QueuedRun
	// QueuedRunKind is why a request waits in a thread's queue: QueuedEnqueued,
	// QueuedInterrupting or QueuedRollingBack.
	QueuedRunKind = threadlinev1.QueuedRunKind
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

// Short names for the values of ChildAction.
const (
	ChildStart    = threadlinev1.ChildAction_CHILD_ACTION_START
	ChildContinue = threadlinev1.ChildAction_CHILD_ACTION_CONTINUE
)

// Short names for the values of ThreadStatus.
const (
	ThreadIdle      = threadlinev1.ThreadStatus_THREAD_STATUS_IDLE
	ThreadRunning   = threadlinev1.ThreadStatus_THREAD_STATUS_RUNNING
	ThreadSuspended = threadlinev1.ThreadStatus_THREAD_STATUS_SUSPENDED
)

// Short names for the values of BusyStrategy. The zero value (unspecified) is BusyReject.
const (
	// BusyReject fails at once with a *ThreadBusyError while a run holds the thread or requests
	// wait in its queue (a retry of the running request itself attaches to it instead).
	BusyReject = threadlinev1.BusyStrategy_BUSY_STRATEGY_REJECT
	// BusyEnqueue waits in the thread's durable queue (Thread.Queue) and runs after the requests
	// accepted before it, each once, in acceptance order; a free thread with an empty queue runs
	// it at once. At most ThreadStoreInfo.max_queued_runs wait per thread: one more is a
	// *ThreadQueueFullError. Answers are never queued (a running thread's are a
	// *ThreadNotSuspendedError).
	BusyEnqueue = threadlinev1.BusyStrategy_BUSY_STRATEGY_ENQUEUE
	// BusyInterrupt stops the running turn and runs next. With a run holding the thread it waits
	// first in the queue (after earlier BusyInterrupt requests, before every BusyEnqueue one) and
	// the holder is asked to stop as Threads.Cancel asks it: it ends CANCELLED with its progress
	// committed (its caller gets that CANCELLED result), then this request runs on its head. A
	// holder that is itself a BusyInterrupt request is not stopped: they run in arrival order. A
	// thread no run holds runs it at once, ahead of a waiting queue. Otherwise as BusyEnqueue: the
	// queue's bound, answers never queued.
	BusyInterrupt = threadlinev1.BusyStrategy_BUSY_STRATEGY_INTERRUPT
	// BusyRollback is BusyInterrupt that also throws the interrupted turn away: queued in one line
	// with the BusyInterrupt requests (by arrival), it stops the holder the same way (it ends
	// CANCELLED, its candidate committed), then, before this request runs, the head goes back to
	// where the interrupted request began: a ROLLED_BACK checkpoint copying it, as Threads.Rollback
	// writes one (the discarded checkpoints stay listed). Nothing is copied unless that request
	// committed something and every checkpoint since is its own. So this request answers as if the
	// interrupted turn never happened. Its Answers may answer the batch that request began from.
	BusyRollback = threadlinev1.BusyStrategy_BUSY_STRATEGY_ROLLBACK
)

// Short names for the values of QueuedRunKind.
const (
	// QueuedEnqueued is the QueuedRunKind of a request a BusyEnqueue run queued: it waits for
	// every request accepted before it.
	QueuedEnqueued = threadlinev1.QueuedRunKind_QUEUED_RUN_KIND_ENQUEUED
	// QueuedInterrupting is the QueuedRunKind of a request a BusyInterrupt run queued: it waits
	// after the earlier interrupting requests, before every QueuedEnqueued one; the run it
	// interrupts was asked to stop.
	QueuedInterrupting = threadlinev1.QueuedRunKind_QUEUED_RUN_KIND_INTERRUPTING
	// QueuedRollingBack is the QueuedRunKind of a request a BusyRollback run queued: it waits in
	// one line with the QueuedInterrupting requests, by arrival; the run it interrupts was asked to
	// stop, and that run's commits are discarded before it runs.
	QueuedRollingBack = threadlinev1.QueuedRunKind_QUEUED_RUN_KIND_ROLLING_BACK
)

// Fixed texts of the server's core (LIVE §5.3, §5.4): what the model sees in place of a tool
// call's result when the call was settled without running. Compare a result's content with them
// to tell these apart from a host's own denials and results.
const (
	// UnansweredApprovalMessage is the denial a pending approval gets when a prompt without
	// answers continues a SUSPENDED thread and the call is known never to have started: the
	// model sees it as that call's result.
	UnansweredApprovalMessage = "Not approved: the thread continued without an answer."
	// NotExecutedToolResult is the result of a call known not to have started whose tool is no
	// longer available.
	NotExecutedToolResult = "The tool call was not executed: its tool is no longer available."
)

// Text is a plain text prompt for RunSpec.Prompt.
//
//	spec := &threadline.RunSpec{Prompt: threadline.Text("hello")}
func Text(prompt string) *threadlinev1.RunSpec_Text {
	return &threadlinev1.RunSpec_Text{Text: prompt}
}
