package threadline_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	threadline "github.com/threadline-dev/threadline/clients/go"
)

// TestExampleHost builds examples/host and drives it like a person at a terminal.
func TestExampleHost(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "host")
	if out, err := exec.Command("go", "build", "-o", bin, "./examples/host").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	state := filepath.Join(dir, "thread.json")
	host := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"-addr", serverAddr, "-state", state}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Env = append(os.Environ(), "THREADLINE_TOKEN=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("host %v: %v\n%s", args, err, out)
		}
		return string(out)
	}

	out := host("", "hello")
	if !strings.Contains(out, "You said: hello") {
		t.Errorf("first run:\n%s", out)
	}
	saved, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	first, err := threadline.UnmarshalState(saved, threadline.JSON)
	if err != nil {
		t.Fatal(err)
	}

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
	saved, err = os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	last, err := threadline.UnmarshalState(saved, threadline.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if last.GetThreadId() != first.GetThreadId() {
		t.Errorf("thread %q, want %q", last.GetThreadId(), first.GetThreadId())
	}
	if last.GetMessageHistory().GetMessageCount() <= first.GetMessageHistory().GetMessageCount() {
		t.Error("history did not grow")
	}
}
