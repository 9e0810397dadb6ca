package threadline_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	threadline "github.com/threadline-dev/threadline/clients/go"
)

// buildHost builds examples/host into dir.
func buildHost(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "host")
	if out, err := exec.Command("go", "build", "-o", bin, "./examples/host").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runHost runs the host bin against the suite's server, in dir ("" for the test's own), with
// stdin as what the person at the terminal types, and returns what it printed.
func runHost(t *testing.T, bin, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-addr", serverAddr}, args...)...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), "THREADLINE_TOKEN=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("host %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// savedState reads the state the host saved to path (proto3 JSON).
func savedState(t *testing.T, path string) *threadline.HarnessState {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	state, err := threadline.UnmarshalState(data, threadline.JSON)
	if err != nil {
		t.Fatal(err)
	}
	return state
}

// TestExampleHost builds examples/host and drives it like a person at a terminal.
func TestExampleHost(t *testing.T) {
	dir := t.TempDir()
	bin := buildHost(t, dir)
	state := filepath.Join(dir, "thread.json")
	host := func(stdin string, args ...string) string {
		t.Helper()
		return runHost(t, bin, "", stdin, append([]string{"-state", state}, args...)...)
	}

	out := host("", "hello")
	if !strings.Contains(out, "You said: hello") {
		t.Errorf("first run:\n%s", out)
	}
	first := savedState(t, state)

	out = host("y\n", "delete notes.txt")
	if !strings.Contains(out, "Approve? [y/N]") || !strings.Contains(out, "Deleted notes.txt.") {
		t.Errorf("approval:\n%s", out)
	}
	out = host("n\nplease keep it\n", "delete b.txt")
	if !strings.Contains(out, "DENIED") || !strings.Contains(out, "Tool results: delete_file: please keep it") {
		t.Errorf("denial:\n%s", out)
	}
	out = host("", `client:get_time {"zone":"UTC"}`)
	if !strings.Contains(out, "host ran get_time") || !strings.Contains(out, "Tool results: get_time: ") {
		t.Errorf("client tool:\n%s", out)
	}

	// Every run continued the thread the file holds.
	last := savedState(t, state)
	if last.GetThreadId() != first.GetThreadId() {
		t.Errorf("thread %q, want %q", last.GetThreadId(), first.GetThreadId())
	}
	if last.GetMessageHistory().GetMessageCount() <= first.GetMessageHistory().GetMessageCount() {
		t.Error("history did not grow")
	}
}

// TestExampleHostThread drives examples/host -thread, which keeps no file: the server keeps the
// thread, found by its ID alone in every session.
func TestExampleHostThread(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	bin := buildHost(t, t.TempDir())
	work := t.TempDir() // the host's working directory, which must stay empty
	id := freshID("host")
	host := func(stdin string, args ...string) string {
		t.Helper()
		return runHost(t, bin, work, stdin, append([]string{"-thread", id}, args...)...)
	}

	out := host("", "hello")
	if !strings.Contains(out, "created "+id) || !strings.Contains(out, "You said: hello") {
		t.Errorf("first run:\n%s", out)
	}
	first := mustGet(t, th, ctx, id)

	out = host("y\n", "delete notes.txt")
	if !strings.Contains(out, "is at revision") || !strings.Contains(out, "Approve? [y/N]") || !strings.Contains(out, "Deleted notes.txt.") {
		t.Errorf("approval:\n%s", out)
	}
	out = host("n\nplease keep it\n", "delete b.txt")
	if !strings.Contains(out, "DENIED") || !strings.Contains(out, "Tool results: delete_file: please keep it") {
		t.Errorf("denial:\n%s", out)
	}
	out = host("", `client:get_time {"zone":"UTC"}`)
	if !strings.Contains(out, "host ran get_time") || !strings.Contains(out, "Tool results: get_time: ") {
		t.Errorf("client tool:\n%s", out)
	}

	// A batch another session left pending is answered by running the host without a prompt.
	left := mustRun(t, th, ctx, id, &threadline.ThreadRun{Text: "delete later.txt"})
	if left.Result.GetStatus() != threadline.StatusSuspended {
		t.Fatalf("status %v, want suspended", left.Result.GetStatus())
	}
	out = host("y\n")
	if !strings.Contains(out, "1 deferred call(s) wait for an answer") || !strings.Contains(out, "Deleted later.txt.") {
		t.Errorf("answering the pending batch:\n%s", out)
	}

	last := mustGet(t, th, ctx, id)
	if last.GetStatus() != threadline.ThreadIdle || last.GetRevision() <= first.GetRevision() {
		t.Errorf("thread %v at revision %d (was %d): want idle and moved on", last.GetStatus(), last.GetRevision(), first.GetRevision())
	}
	if !strings.Contains(out, fmt.Sprintf("now at revision %d", last.GetRevision())) {
		t.Errorf("the host did not report revision %d:\n%s", last.GetRevision(), out)
	}
	if files, err := os.ReadDir(work); err != nil || len(files) != 0 {
		t.Errorf("the host wrote %v (%v): want no state file", files, err)
	}
	if err := th.Delete(ctx, id, 0); err != nil {
		t.Error(err)
	}
}

// TestExampleHostChild drives examples/host -agent demo-lead: the parent asks for its
// Host-managed child, which the host runs on a thread of its own file, asking about the child's
// approval at the terminal, then answers the parent.
func TestExampleHostChild(t *testing.T) {
	dir := t.TempDir()
	bin := buildHost(t, dir)
	state := filepath.Join(dir, "lead.json")
	out := runHost(t, bin, "", "y\n", "-state", state, "-agent", "demo-lead", "ask-child delete old.txt")
	childFiles, err := filepath.Glob(filepath.Join(dir, "lead.thread_*.json"))
	if err != nil || len(childFiles) != 1 {
		t.Fatalf("child state files %v (%v)\n%s", childFiles, err, out)
	}
	child := savedState(t, childFiles[0])
	if filepath.Base(childFiles[0]) != "lead."+child.GetThreadId()+".json" {
		t.Errorf("child file %s holds thread %s", childFiles[0], child.GetThreadId())
	}
	for _, want := range []string{
		"[child reviewer: agent demo-reviewer on " + child.GetThreadId(),
		"Approve? [y/N]",
		"Deleted old.txt.",
		"[child " + child.GetThreadId() + " ended RUN_STATUS_COMPLETED]",
		`Tool results: delegate: {"execution_id":"` + child.GetThreadId() + `","subagent":"reviewer","status":"completed","output":"Tool results: delete_file: Deleted old.txt."}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	parent := savedState(t, state)
	if parent.GetThreadId() == child.GetThreadId() || !strings.Contains(out, "(thread "+parent.GetThreadId()+" saved to "+state+")") {
		t.Errorf("parent state %v:\n%s", parent.GetThreadId(), out)
	}
}

// TestExampleHostJoinAndWatch drives examples/host -join (the events of a run, live or finished)
// and -watch (the thread's changes, until interrupted).
func TestExampleHostJoinAndWatch(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	bin := buildHost(t, t.TempDir())
	id := mustCreate(t, th, ctx, nil).GetThreadId()

	watch := exec.Command(bin, "-addr", serverAddr, "-thread", id, "-watch")
	watch.Env = append(os.Environ(), "THREADLINE_TOKEN=")
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = watch.Process.Kill(); _ = watch.Wait() }()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		for r := bufio.NewScanner(stdout); r.Scan(); {
			lines <- r.Text()
		}
	}()
	var printed []string
	until := func(want string) {
		t.Helper()
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("-watch ended before %q:\n%s", want, strings.Join(printed, "\n"))
				}
				printed = append(printed, line)
				if strings.Contains(line, want) {
					return
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("-watch printed no %q in 20 s:\n%s", want, strings.Join(printed, "\n"))
			}
		}
	}
	until(" SNAPSHOT: IDLE at revision ")

	outcome := mustRun(t, th, ctx, id, &threadline.ThreadRun{Text: "lookup grpc"})
	until("RUN_ENDED")
	if all := strings.Join(printed, "\n"); !strings.Contains(all, "RUN_STARTED") || !strings.Contains(all, "COMMITTED") {
		t.Errorf("-watch printed:\n%s", all)
	}
	_ = watch.Process.Signal(os.Interrupt)
	for range lines {
	}
	if err := watch.Wait(); err != nil {
		t.Errorf("-watch after Ctrl-C: %v", err)
	}

	out := runHost(t, bin, "", "", "-thread", id, "-join", outcome.Result.GetRunId())
	for _, want := range []string{"   0 run_started " + outcome.Result.GetRunId(), " tool_call lookup(", " thread_committed revision ", " result COMPLETED",
		fmt.Sprintf("(run %s: revision %d)", outcome.Result.GetRunId(), outcome.Revision)} {
		if !strings.Contains(out, want) {
			t.Errorf("-join output lacks %q:\n%s", want, out)
		}
	}
	if latest := runHost(t, bin, "", "", "-thread", id, "-join", "latest"); latest != out {
		t.Errorf("-join latest:\n%s\nwant\n%s", latest, out)
	}
}

// TestExampleHostStart drives examples/host -start: the turn starts in the background, the host
// prints its run ID, then its events (a join of its request) and how it ended.
func TestExampleHostStart(t *testing.T) {
	c, ctx := newClient(t)
	th := c.Threads()
	bin := buildHost(t, t.TempDir())
	id := mustCreate(t, th, ctx, nil).GetThreadId()

	out := runHost(t, bin, "", "", "-thread", id, "-start", "lookup grpc")

	head := mustGet(t, th, ctx, id)
	checkpoint, err := th.Checkpoint(ctx, id, head.GetRevision())
	if err != nil {
		t.Fatal(err)
	}
	runID := checkpoint.GetRunId()
	for _, want := range []string{"started " + runID + " (request req-", ") from revision 1", "   0 run_started " + runID, " tool_call lookup(",
		" thread_committed revision ", " result COMPLETED", fmt.Sprintf("(run %s: revision %d)", runID, head.GetRevision())} {
		if !strings.Contains(out, want) {
			t.Errorf("-start output lacks %q:\n%s", want, out)
		}
	}
}
