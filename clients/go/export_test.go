package threadline

// RebuildHistory lets the tests of package threadline_test rebuild a delta checkpoint
// candidate's history outside a stream (the golden vector).
var RebuildHistory = rebuildHistory

// ThreadErr lets the tests turn a status into the threads' typed errors without a server.
var ThreadErr = threadErr

// RunSpecOf lets the tests read the ThreadRunSpec a ThreadRun sends on a thread.
var RunSpecOf = (*ThreadRun).spec
