package threadline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	threadline "github.com/threadline-dev/threadline/clients/go"
	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// Shell environments, each test against a server of its own started with
// `--mount work=local:<fresh temp dir>` (and --allow-root-shell as root, as in CI). The demo
// agent's shell words (server/demo.py): `shell <command>` runs it to the end, `shell-bg <command>`
// leaves it running after the 5 s initial wait, `shell-wait [out [err]]` discovers the thread's
// newest command, waits up to 10 s for it to finish and reads it from those offsets. The answer
// quotes the last tool result: `Tool results: <tool>: <result JSON>`.

var allActions = []string{
	"environment.shell.exec",
	"environment.process.list",
	"environment.process.inspect",
	"environment.process.read_output",
	"environment.process.wait",
	"environment.process.write_stdin",
	"environment.process.close_stdin",
	"environment.process.signal",
	"environment.process.kill",
}

var (
	reference = regexp.MustCompile(`^proc-([0-9a-f]{8})-[1-9][0-9]{0,5}$`)
	hex32     = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

const (
	waitsForGo = `sh -c 'echo started; while [ ! -e go ]; do sleep 0.05; done; echo finished'`
	pollBound  = 30 * time.Second // for a broken server, not a measure
)

type mounted struct {
	addr, root string
	stop       func()
}

// mountedServer starts a server with the mount "work" at a fresh directory.
func mountedServer(t *testing.T) mounted {
	t.Helper()
	root := tempRoot(t)
	addr, stop := shellServer(t, "--mount", "work=local:"+root)
	return mounted{addr: addr, root: root, stop: stop}
}

// tempRoot is a fresh temp dir with its symlinks resolved (a command's pwd prints it so).
func tempRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// shellServer starts a server of the test's own with args (and --allow-root-shell as root);
// stop stops it once, and the test's end does if nothing did.
func shellServer(t *testing.T, args ...string) (addr string, stop func()) {
	t.Helper()
	if os.Getenv("THREADLINE_ADDR") != "" {
		t.Skip("THREADLINE_ADDR is set: this test starts a server of its own")
	}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-root-shell") // root needs the explicit opt-in
	}
	stopServer, addr, err := startServer(args...)
	if err != nil {
		t.Fatal(err)
	}
	stop = sync.OnceFunc(stopServer)
	t.Cleanup(stop)
	return addr, stop
}

// page is one stream's page of a shell tool result.
type page struct {
	Text              string `json:"text"`
	StartOffset       int    `json:"start_offset"`
	NextOffset        int    `json:"next_offset"`
	ObservationClosed bool   `json:"observation_closed"`
}

// toolResult is the part of a shell tool result the tests read.
type toolResult struct {
	OK        bool   `json:"ok"`
	ProcessID string `json:"process_id"`
	Status    struct {
		Phase    string `json:"phase"`
		ExitCode *int   `json:"exit_code"`
	} `json:"status"`
	Stdout    page              `json:"stdout"`
	Processes []json.RawMessage `json:"processes"`
	Missing   []json.RawMessage `json:"missing"`
	HasMore   *bool             `json:"has_more"`
	Raw       map[string]any    `json:"-"`
}

// quoted is the result of tool that a COMPLETED run's answer quotes.
func quoted(t *testing.T, res *threadline.RunResult, tool string) toolResult {
	t.Helper()
	text := output(t, res)
	body, ok := strings.CutPrefix(text, "Tool results: "+tool+": ")
	if !ok {
		t.Fatalf("answer %q does not quote %s", text, tool)
	}
	var r toolResult
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("%s result %q: %v", tool, body, err)
	}
	if err := json.Unmarshal([]byte(body), &r.Raw); err != nil {
		t.Fatal(err)
	}
	if !r.OK {
		t.Fatalf("%s failed: %s", tool, body)
	}
	return r
}

// localState is the decoded state of a threadline_local entry.
type localState struct {
	Backend  string `json:"backend"`
	Scope    string `json:"scope"`
	Commands []struct {
		ID        string `json:"id"`
		StartedAt string `json:"started_at"`
	} `json:"commands"`
}

// workEntry checks the "work" entry of a state and decodes its state_json.
func workEntry(t *testing.T, state *threadline.HarnessState) localState {
	t.Helper()
	var found []*threadlinev1.EnvironmentState
	for _, e := range state.GetEnvironmentStates() {
		if e.GetMountName() == "work" {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("environment states %v: want one work entry", state.GetEnvironmentStates())
	}
	e := found[0]
	if e.GetProviderKey() != "threadline_local" || e.GetStateVersion() != "1" {
		t.Fatalf("work entry %v", e)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(e.GetStateJson()), &keys); err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range keys {
			if !yield(k) {
				return
			}
		}
	})
	if !slices.Equal(names, []string{"backend", "commands", "scope"}) {
		t.Fatalf("state_json keys %v", names)
	}
	var s localState
	if err := json.Unmarshal([]byte(e.GetStateJson()), &s); err != nil {
		t.Fatal(err)
	}
	if !hex32.MatchString(s.Backend) || !hex32.MatchString(s.Scope) {
		t.Fatalf("state_json %s", e.GetStateJson())
	}
	return s
}

func shellWait(t *testing.T, c *threadline.Client, ctx context.Context, state *threadline.HarnessState, offsets ...int) *threadline.RunResult {
	t.Helper()
	words := []string{"shell-wait"}
	for _, o := range offsets {
		words = append(words, strconv.Itoa(o))
	}
	return run(t, c, ctx, threadline.Continue(state, strings.Join(words, " ")), threadline.StatusCompleted)
}

// startInBackground is run 1 of a new thread: `shell-bg command`, still running when it ends.
func startInBackground(t *testing.T, c *threadline.Client, ctx context.Context, command string) (*threadline.RunResult, toolResult) {
	t.Helper()
	res := run(t, c, ctx, &threadline.RunSpec{Prompt: threadline.Text("shell-bg " + command)}, threadline.StatusCompleted)
	started := quoted(t, res, "shell_exec")
	if !reference.MatchString(started.ProcessID) || started.Status.Phase != "running" {
		t.Fatalf("shell_exec result %v: want a running command with a reference", started.Raw)
	}
	return res, started
}

func TestShellServerInfo(t *testing.T) {
	t.Parallel()
	srv := mountedServer(t)
	c, ctx := dialAt(t, srv.addr)
	info, err := c.ServerInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var agent *threadlinev1.AgentInfo
	for _, a := range info.GetAgents() {
		if a.GetName() == "default" {
			agent = a
		}
	}
	if agent == nil || len(agent.GetMounts()) != 1 {
		t.Fatalf("agents %v: want default with one mount", info.GetAgents())
	}
	m := agent.GetMounts()[0]
	if m.GetName() != "work" || m.GetProviderKey() != "threadline_local" || !m.GetProcessCapable() || !slices.Equal(m.GetActions(), allActions) {
		t.Errorf("mount %v", m)
	}
	providers := info.GetEnvironmentProviders()
	if len(providers) != 1 || providers[0].GetProviderKey() != "threadline_local" || !slices.Equal(providers[0].GetStateVersions(), []string{"1"}) {
		t.Errorf("environment providers %v", providers)
	}
	tools := map[string]*threadlinev1.ToolInfo{}
	for _, tool := range agent.GetTools() {
		tools[tool.GetName()] = tool
	}
	for _, name := range []string{"shell_exec", "shell_info", "shell_wait", "shell_input", "shell_signal"} {
		tool := tools[name]
		retryable := name == "shell_info" || name == "shell_wait"
		category := threadlinev1.ToolCategory_TOOL_CATEGORY_PLAIN
		if retryable {
			category = threadlinev1.ToolCategory_TOOL_CATEGORY_RECOVERY_RETRYABLE
		}
		if tool == nil || tool.GetCategory() != category || tool.GetRecoveryRetryable() != retryable {
			t.Errorf("tool %s = %v: want category %v, recovery_retryable %v", name, tool, category, retryable)
		}
	}
}

func TestShellCommandCompletesInItsCall(t *testing.T) {
	t.Parallel()
	srv := mountedServer(t)
	c, ctx := dialAt(t, srv.addr)
	res := run(t, c, ctx, &threadline.RunSpec{Prompt: threadline.Text("shell printf hello")}, threadline.StatusCompleted)
	done := quoted(t, res, "shell_exec")
	if done.ProcessID != "" || done.Status.Phase != "exited" || done.Status.ExitCode == nil || *done.Status.ExitCode != 0 {
		t.Errorf("shell_exec result %v: want exited 0 with no reference", done.Raw)
	}
	if done.Stdout.Text != "hello" || done.Stdout.NextOffset != 5 || !done.Stdout.ObservationClosed {
		t.Errorf("stdout %+v", done.Stdout)
	}
	// A final-at-once result retains nothing, so the mount has no scope to export (ENVIRONMENT §9.2).
	if n := len(res.GetState().GetEnvironmentStates()); n != 0 {
		t.Errorf("%d environment states, want none", n)
	}
}

func TestShellBackgroundCommandFoundByLaterRunNotByFork(t *testing.T) {
	t.Parallel()
	srv := mountedServer(t)
	c, ctx := dialAt(t, srv.addr)
	first, started := startInBackground(t, c, ctx, waitsForGo)
	if started.Stdout.Text != "started\n" {
		t.Errorf("run 1 stdout %+v", started.Stdout)
	}
	entry := workEntry(t, first.GetState())
	if len(entry.Commands) != 1 {
		t.Fatalf("work entry %+v: want one command", entry)
	}

	// Run 2 discovers the command under a reference of its own (after the demo's 10 s wait: the
	// command waits for go) and reads it from offset 0.
	second := shellWait(t, c, ctx, first.GetState())
	seen := quoted(t, second, "shell_wait")
	m1, m2 := reference.FindStringSubmatch(started.ProcessID), reference.FindStringSubmatch(seen.ProcessID)
	if m2 == nil || m2[1] == m1[1] {
		t.Errorf("run 2 reference %q, run 1 %q: want another run's tag", seen.ProcessID, started.ProcessID)
	}
	if seen.Status.Phase != "running" || seen.Stdout.Text != "started\n" || seen.Stdout.StartOffset != 0 || seen.Stdout.NextOffset != 8 {
		t.Errorf("run 2 result %v", seen.Raw)
	}
	if again := workEntry(t, second.GetState()); again.Scope != entry.Scope || again.Backend != entry.Backend || len(again.Commands) != 1 || again.Commands[0] != entry.Commands[0] {
		t.Errorf("run 2 work entry %+v, run 1 %+v", again, entry)
	}

	if err := os.WriteFile(filepath.Join(srv.root, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	state := second.GetState()
	var finished *toolResult
	for deadline := time.Now().Add(pollBound); finished == nil; {
		later := shellWait(t, c, ctx, state, seen.Stdout.NextOffset)
		p := quoted(t, later, "shell_wait")
		state = later.GetState()
		if p.Stdout.StartOffset != 8 {
			t.Fatalf("page from %d, want 8", p.Stdout.StartOffset)
		}
		if p.Status.Phase != "running" && p.Stdout.ObservationClosed {
			finished = &p
			break
		}
		if p.Stdout.Text != "" && p.Stdout.Text != "finished\n" {
			t.Fatalf("stdout from 8 = %q", p.Stdout.Text)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command did not finish within %v", pollBound)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if finished.Status.Phase != "exited" || *finished.Status.ExitCode != 0 || finished.Stdout.Text != "finished\n" || finished.Stdout.NextOffset != 17 {
		t.Errorf("finished result %v", finished.Raw)
	}
	if workEntry(t, state).Scope != entry.Scope {
		t.Error("the scope changed")
	}

	// Reads never consume: the same offsets give the same bytes again.
	if p := quoted(t, shellWait(t, c, ctx, state, 8), "shell_wait").Stdout; p.Text != "finished\n" || p.NextOffset != 17 {
		t.Errorf("read from 8 again: %+v", p)
	}
	if p := quoted(t, shellWait(t, c, ctx, state), "shell_wait").Stdout; p.Text != "started\nfinished\n" || p.NextOffset != 17 {
		t.Errorf("read from 0 again: %+v", p)
	}

	// A fork starts with no environment state, so it reaches none of its parent's commands.
	forked, err := c.ForkState(ctx, state, "")
	if err != nil {
		t.Fatal(err)
	}
	if forked.GetThreadId() == first.GetThreadId() || len(forked.GetEnvironmentStates()) != 0 {
		t.Fatalf("fork %s has %d environment states", forked.GetThreadId(), len(forked.GetEnvironmentStates()))
	}
	onFork := shellWait(t, c, ctx, forked)
	found := quoted(t, onFork, "shell_info")
	if found.Processes == nil || len(found.Processes) != 0 || found.Missing != nil || found.HasMore == nil || *found.HasMore {
		t.Errorf("shell_info on the fork: %v", found.Raw)
	}
	if n := len(onFork.GetState().GetEnvironmentStates()); n != 0 {
		t.Errorf("the fork's run exported %d environment states", n)
	}
}

// processGone reports whether pid no longer runs (gone, or a zombie nobody has reaped yet).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	if _, err := os.Stat("/proc/self"); err != nil {
		return false // no /proc to tell a zombie apart: it still exists
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return os.IsNotExist(err) // gone between the two looks
	}
	// "<pid> (<comm>) <state> ...": a zombie has exited; only its reaping is left.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	fields := strings.Fields(rest)
	return len(fields) > 0 && fields[0] == "Z"
}

func TestShellServerStopKillsWhatItStillRan(t *testing.T) {
	t.Parallel()
	srv := mountedServer(t)
	c, ctx := dialAt(t, srv.addr)
	startInBackground(t, c, ctx, "echo $$ > pid; sleep 300")
	data, err := os.ReadFile(filepath.Join(srv.root, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if processGone(pid) {
		t.Fatalf("pid %d is not running before the server stops", pid)
	}
	_ = c.Close()
	srv.stop() // SIGTERM
	for deadline := time.Now().Add(pollBound); !processGone(pid); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still runs %v after the server stopped", pid, pollBound)
		}
	}
}

func TestShellBrokenLocalEntryIsRefusedBeforeTheRun(t *testing.T) {
	t.Parallel()
	srv := mountedServer(t)
	c, ctx := dialAt(t, srv.addr)
	for _, tc := range []struct {
		name, json, version string
		code                codes.Code
		reason              string
	}{
		{"invalid", `{"backend": "nope"}`, "1", codes.InvalidArgument, threadline.ReasonEnvironmentStateInvalid},
		{"version", `{}`, "9", codes.FailedPrecondition, threadline.ReasonEnvironmentStateVersionUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, err := c.NewState(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			state.EnvironmentStates = []*threadlinev1.EnvironmentState{{
				MountName: "work", ProviderKey: "threadline_local", StateVersion: tc.version, StateJson: tc.json,
			}}
			_, err = c.Run(ctx, threadline.Continue(state, "shell printf hello"))
			e := threadline.FromError(err)
			if e == nil || e.Code() != tc.code || e.Reason() != tc.reason || e.Metadata()["mount"] != "work" {
				t.Fatalf("err = %v, want %v %s for mount work", err, tc.code, tc.reason)
			}
			if tc.name == "version" && (e.Metadata()["received"] != "9" || e.Metadata()["supported"] != "1") {
				t.Errorf("metadata %v", e.Metadata())
			}
		})
	}
}

// mountsFile declares the mounts of TestShellMountsFromConfigFile: work for default only, with an
// environment variable of its own, and quick for demo-lead only, foreground commands only. The
// roots are relative to the file.
const mountsFile = `
[mounts.work]
root = "work"
agents = ["default"]
env = { GREETING = "hello from the file" }

[mounts.quick]
root = "quick"
agents = ["demo-lead"]
actions = ["environment.shell.exec"]
`

func TestShellMountsFromConfigFile(t *testing.T) {
	t.Parallel()
	dir := tempRoot(t)
	for _, name := range []string{"work", "quick"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "threadline.toml")
	if err := os.WriteFile(file, []byte(mountsFile), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, _ := shellServer(t, "--config", file)
	c, ctx := dialAt(t, addr)

	// Each agent lists only its own mounts, and only the shell tools their actions offer.
	agents := agentsByName(t, c, ctx)
	shellTools := []string{"shell_exec", "shell_info", "shell_wait", "shell_input", "shell_signal"}
	for _, tc := range []struct {
		agent          string
		mount          string // "" for none
		actions        []string
		processCapable bool
		tools          []string
	}{
		{"default", "work", allActions, true, shellTools},
		{lead, "quick", []string{"environment.shell.exec"}, false, []string{"shell_exec"}},
		{reviewer, "", nil, false, nil},
	} {
		a := agents[tc.agent]
		if a == nil {
			t.Errorf("agents %v: no %s", agents, tc.agent)
			continue
		}
		mounts := a.GetMounts()
		if tc.mount == "" {
			if len(mounts) != 0 {
				t.Errorf("%s mounts %v, want none", tc.agent, mounts)
			}
		} else if len(mounts) != 1 || mounts[0].GetName() != tc.mount || mounts[0].GetProviderKey() != "threadline_local" ||
			!slices.Equal(mounts[0].GetActions(), tc.actions) || mounts[0].GetProcessCapable() != tc.processCapable {
			t.Errorf("%s mounts %v, want %s with %v, process_capable %v", tc.agent, mounts, tc.mount, tc.actions, tc.processCapable)
		}
		var tools []string
		for _, tool := range a.GetTools() {
			if slices.Contains(shellTools, tool.GetName()) {
				tools = append(tools, tool.GetName())
			}
		}
		slices.Sort(tools)
		if want := slices.Sorted(slices.Values(tc.tools)); !slices.Equal(tools, want) {
			t.Errorf("%s shell tools %v, want %v", tc.agent, tools, want)
		}
	}

	// The mount's env reaches default's command.
	greeted := quoted(t, run(t, c, ctx, &threadline.RunSpec{Prompt: threadline.Text(`shell printf "$GREETING"`)}, threadline.StatusCompleted), "shell_exec")
	if greeted.Status.Phase != "exited" || greeted.Stdout.Text != "hello from the file" {
		t.Errorf("default's shell_exec result %v", greeted.Raw)
	}
	// demo-lead's command runs in its own mount, quick, found relative to the file.
	where := quoted(t, run(t, c, ctx, &threadline.RunSpec{Agent: lead, Prompt: threadline.Text("shell pwd")}, threadline.StatusCompleted), "shell_exec")
	if where.ProcessID != "" || where.Status.Phase != "exited" || where.Stdout.Text != filepath.Join(dir, "quick")+"\n" {
		t.Errorf("demo-lead's shell_exec result %v: want pwd %s/quick", where.Raw, dir)
	}
	// demo-reviewer has no mount, so no shell tool to call.
	res := run(t, c, ctx, &threadline.RunSpec{Agent: reviewer, Prompt: threadline.Text("shell printf x")}, threadline.StatusCompleted)
	if text := output(t, res); text != "This server has no shell: start it with --mount NAME=local:ROOT." {
		t.Errorf("demo-reviewer answered %q", text)
	}
}
