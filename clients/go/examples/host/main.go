// Command host is a small Threadline host: it runs a prompt on one thread, asks on the terminal
// to approve or deny the calls that need approval, executes the client tool it declares itself
// (get_time), and resumes until the run ends. The thread is kept in a file or by the server.
//
//	threadline serve &                       # prints "listening on 127.0.0.1:50051"
//	go run ./examples/host "hello"
//	go run ./examples/host "delete notes.txt"
//	go run ./examples/host 'client:get_time {"zone":"Europe/Paris"}'
//	go run ./examples/host -state other.binpb -fork "lookup grpc"
//	go run ./examples/host -state lead.json -agent demo-lead "ask-child delete old.txt"
//
//	go run ./examples/host -thread thread_mine "delete notes.txt"   # the server keeps the thread
//	go run ./examples/host -thread thread_mine "count"              # same thread, by its ID only
//	go run ./examples/host -thread thread_mine                      # answer what it waits on
//	go run ./examples/host -thread thread_mine -start "sleep 3"     # run in the background, follow it
//	go run ./examples/host -thread thread_mine -join run-…          # follow a run (or replay it)
//	go run ./examples/host -thread thread_mine -watch               # print the thread's changes
//
// With -state (HarnessService) the host owns the thread: after every run it writes the state to
// the file, proto3 JSON when its name ends in .json, binary protobuf otherwise. When the parent
// asks for a Host-managed child (demo-lead's reviewer), the host runs the child on a thread of its
// own, kept in a file beside the parent's (lead.<child thread ID>.json), answers the child's
// approvals here too, and answers the parent with the child's result.
//
// With -thread (ThreadService) the host keeps nothing: the server stores the thread under that ID
// (created on first use) with its pending batch, so a later session, from anywhere, answers what
// is pending by running the host again without a prompt. -start starts the turn in the background
// (the server runs it to its end with no client, even if this host goes away), prints its run ID,
// then its events and how it ended. -join prints the events of one of its runs, live or finished,
// from another terminal or machine (the SDK reconnects a broken stream); -watch prints every change
// of the thread until Ctrl-C.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	threadline "github.com/threadline-dev/threadline/clients/go"
)

// getTime is the client tool this host declares in every run and executes itself.
var getTime = &threadline.ClientTool{
	Name:                 "get_time",
	Description:          "The current time in an IANA time zone, e.g. Europe/Paris.",
	ParametersJsonSchema: `{"type":"object","properties":{"zone":{"type":"string","description":"IANA time zone; default UTC"}}}`,
}

func main() {
	addr := flag.String("addr", envOr("THREADLINE_ADDR", "127.0.0.1:50051"), "server address host:port")
	statePath := flag.String("state", "thread.json", "file holding the thread's state (.json = proto3 JSON, else binary)")
	token := flag.String("token", os.Getenv("THREADLINE_TOKEN"), "bearer token, for a server started with --token")
	useTLS := flag.Bool("tls", false, "connect over TLS (system roots)")
	fork := flag.Bool("fork", false, "fork the stored thread into a new one (which the file then holds) before running")
	threadID := flag.String("thread", "", "keep no file: run the thread the server keeps under this ID (created on first use)")
	agent := flag.String("agent", "", "the agent to run (default: the server's default agent); with -thread, when the thread is created")
	start := flag.Bool("start", false, "with -thread and a prompt: start the turn in the background, print its run ID, then its events and result")
	join := flag.String("join", "", "with -thread: print the events of this run (a run ID, or \"latest\"), live or finished, instead of running")
	watch := flag.Bool("watch", false, "with -thread: print the thread's changes until Ctrl-C, instead of running")
	flag.Usage = func() {
		out := flag.CommandLine.Output()
		name := filepath.Base(os.Args[0])
		fmt.Fprintf(out, "usage: %s [flags] PROMPT\n       %s -thread ID [flags] [PROMPT]\n       %s -thread ID -start PROMPT\n       %s -thread ID -join RUN | -watch\n", name, name, name, name)
		flag.PrintDefaults()
	}
	flag.Parse()
	stateSet := false
	flag.Visit(func(f *flag.Flag) { stateSet = stateSet || f.Name == "state" || f.Name == "fork" })
	switch {
	case *threadID != "" && (stateSet || flag.NArg() > 1),
		*threadID == "" && (flag.NArg() != 1 || *join != "" || *watch),
		(*join != "" || *watch) && (flag.NArg() > 0 || (*join != "" && *watch)),
		*start && (*threadID == "" || flag.NArg() != 1 || *join != "" || *watch):
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	h := &host{statePath: *statePath, agent: *agent, in: bufio.NewScanner(os.Stdin)}
	opts := []threadline.Option{}
	if *token != "" {
		opts = append(opts, threadline.WithToken(*token))
	}
	if *useTLS {
		opts = append(opts, threadline.WithTLS(nil))
	}
	var err error
	switch {
	case *start:
		err = h.startThread(ctx, *addr, opts, *threadID, flag.Arg(0))
	case *join != "":
		err = follow(ctx, *addr, opts, *threadID, *join)
	case *watch:
		err = watchThread(ctx, *addr, opts, *threadID)
	case *threadID != "":
		err = h.runThread(ctx, *addr, opts, *threadID, flag.Arg(0))
	default:
		err = h.run(ctx, *addr, opts, flag.Arg(0), *fork)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		if r := threadline.ReasonOf(err); r != "" {
			fmt.Fprintln(os.Stderr, "reason:", r)
		}
		os.Exit(1)
	}
}

type host struct {
	statePath string
	agent     string
	in        *bufio.Scanner
	client    *threadline.Client // set with -state, where the host runs children itself
}

func (h *host) run(ctx context.Context, addr string, opts []threadline.Option, prompt string, fork bool) error {
	c, err := threadline.Dial(addr, opts...)
	if err != nil {
		return err
	}
	defer c.Close()

	state, err := h.load()
	if err != nil {
		return err
	}
	if state != nil && fork {
		if state, err = c.ForkState(ctx, state, ""); err != nil {
			return fmt.Errorf("fork: %w", err)
		}
		fmt.Printf("forked into %s\n", state.GetThreadId())
	}

	h.client = c
	result, err := h.drive(ctx, &threadline.RunSpec{Agent: h.agent, PreviousState: state, Prompt: threadline.Text(prompt)})
	if err != nil {
		return err
	}
	if err := report(result); err != nil {
		return err
	}
	fmt.Printf("(thread %s saved to %s)\n", result.GetThreadId(), h.statePath)
	return nil
}

// drive runs spec, saving every state, and answers and resumes (with spec's agent and lineage)
// for as long as the thread suspends.
func (h *host) drive(ctx context.Context, spec *threadline.RunSpec) (*threadline.RunResult, error) {
	for {
		spec.ClientTools = []*threadline.ClientTool{getTime} // declared in every run, resumes too
		result, err := h.stream(ctx, h.client, spec)
		if err != nil {
			return nil, err
		}
		if result.GetState() != nil {
			if err := h.save(result.GetState()); err != nil {
				return nil, err
			}
		}
		if result.GetStatus() != threadline.StatusSuspended {
			return result, nil
		}
		answers, err := h.answer(ctx, result.GetDeferred())
		if err != nil {
			return nil, err
		}
		next := threadline.Resume(result, answers)
		next.Agent, next.Lineage = spec.GetAgent(), spec.GetLineage()
		spec = next
	}
}

// runChild runs the child a parent's call asks for on its own thread, in a file beside the
// parent's (an existing file means the child exists: it continues), until the child ends, then
// answers the call with the child's result.
func (h *host) runChild(ctx context.Context, answers *threadline.Answers, call *threadline.DeferredToolCall) error {
	request := call.GetChild()
	ext := filepath.Ext(h.statePath)
	child := &host{statePath: strings.TrimSuffix(h.statePath, ext) + "." + request.GetThreadId() + ext, in: h.in, client: h.client}
	fmt.Printf("\n[child %s: agent %s on %s, kept in %s]\n", request.GetSubagentName(), request.GetAgent(), request.GetThreadId(), child.statePath)
	state, err := child.load()
	if err == nil && state == nil {
		state, err = h.client.NewState(ctx, request.GetThreadId())
	}
	if err != nil {
		return err
	}
	result, err := child.drive(ctx, threadline.ForChild(request, threadline.Continue(state, request.GetInput())))
	if err != nil {
		return err
	}
	fmt.Printf("[child %s ended %v]\n", request.GetThreadId(), result.GetStatus())
	return answers.AnswerChild(call, result)
}

// runThread drives the thread the server keeps under threadID: it creates it if missing,
// answers what it waits on (a batch an earlier session left), then runs prompt, answering for as
// long as it suspends. Nothing is saved here: the server commits every turn and keeps the
// pending batch, should the answer never come.
func (h *host) runThread(ctx context.Context, addr string, opts []threadline.Option, threadID, prompt string) error {
	c, err := threadline.Dial(addr, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	threads := c.Threads()

	thread, err := h.thread(ctx, threads, threadID)
	if err != nil {
		return err
	}
	if thread.GetPending() == nil && prompt == "" {
		return errors.New("give a prompt (nothing is pending to answer)")
	}

	var result *threadline.RunResult
	var revision int64
	if pending := thread.GetPending(); pending != nil {
		// A batch left by an earlier session (or another host): answer it first.
		fmt.Printf("%d deferred call(s) wait for an answer\n", len(pending.GetApprovals())+len(pending.GetCalls()))
		answers, err := h.answer(ctx, pending)
		if err != nil {
			return err
		}
		if result, revision, err = h.driveThread(ctx, threads, threadID, &threadline.ThreadRun{Answers: answers.Results()}); err != nil {
			return err
		}
	}
	if prompt != "" {
		if result, revision, err = h.driveThread(ctx, threads, threadID, &threadline.ThreadRun{Text: prompt}); err != nil {
			return err
		}
	}
	if err := report(result); err != nil {
		return err
	}
	fmt.Printf("(thread %s kept by the server, now at revision %d)\n", threadID, revision)
	return nil
}

// thread returns the thread the server keeps under threadID, creating it if missing.
func (h *host) thread(ctx context.Context, threads *threadline.Threads, threadID string) (*threadline.Thread, error) {
	thread, err := threads.Get(ctx, threadID, false)
	var missing *threadline.ThreadNotFoundError
	switch {
	case errors.As(err, &missing):
		if thread, err = threads.Create(ctx, &threadline.CreateThread{ThreadID: threadID, Agent: h.agent}); err != nil {
			return nil, fmt.Errorf("create: %w", err)
		}
		fmt.Printf("created %s\n", thread.GetThreadId())
	case err != nil:
		return nil, err
	default:
		fmt.Printf("%s is at revision %d, %v\n", thread.GetThreadId(), thread.GetRevision(), thread.GetStatus())
	}
	return thread, nil
}

// startThread starts prompt on the thread in the background (the server runs it to its end with no
// client), prints its run ID, then its events as they are written (a join of its request, which
// follows a next attempt if its server is lost) and how it ended. Ctrl-C stops the printing, not
// the run: -join latest follows it again.
func (h *host) startThread(ctx context.Context, addr string, opts []threadline.Option, threadID, prompt string) error {
	c, err := threadline.Dial(addr, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	threads := c.Threads()
	if _, err := h.thread(ctx, threads, threadID); err != nil {
		return err
	}
	started, err := threads.StartRun(ctx, threadID, &threadline.ThreadRun{Text: prompt, ClientTools: []*threadline.ClientTool{getTime}})
	if err != nil {
		return err
	}
	fmt.Printf("started %s (request %s) from revision %d\n", started.RunID(), started.RequestID(), started.Revision())
	s := started.Events(ctx, nil)
	for s.Receive() {
		ev := s.Msg()
		fmt.Printf("%4d %s%s\n", ev.GetSequence(), kindOf(ev), detail(ev))
	}
	if err := s.Err(); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "host: events:", err) // the outcome is still readable
	}
	s.Close()
	outcome, err := started.Result(ctx)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Printf("(run %s goes on; -join latest follows it)\n", started.RunID())
		}
		return err
	}
	fmt.Printf("(run %s: revision %d)\n", outcome.Result.GetRunId(), outcome.Revision)
	if outcome.Result.GetStatus() == threadline.StatusSuspended {
		fmt.Printf("(suspended: run the host again with -thread %s to answer)\n", threadID)
		return nil
	}
	return report(outcome.Result)
}

// driveThread runs one turn of the thread, then answers and runs again for as long as it suspends.
func (h *host) driveThread(ctx context.Context, threads *threadline.Threads, threadID string, run *threadline.ThreadRun) (*threadline.RunResult, int64, error) {
	for {
		run.ClientTools = []*threadline.ClientTool{getTime} // declared in every run, resumes too
		s := threads.Stream(ctx, threadID, run)
		show(s)
		outcome, err := s.Collect()
		s.Close()
		if err != nil {
			return nil, 0, err
		}
		if outcome.Result.GetStatus() != threadline.StatusSuspended {
			return outcome.Result, outcome.Revision, nil
		}
		answers, err := h.answer(ctx, outcome.Result.GetDeferred())
		if err != nil {
			return nil, 0, err
		}
		run = &threadline.ThreadRun{Answers: answers.Results()}
	}
}

// follow prints every event of one run of the thread (runID, or "latest": the running one, else
// the last), from its first, as they are written, then how it ended.
func follow(ctx context.Context, addr string, opts []threadline.Option, threadID, runID string) error {
	c, err := threadline.Dial(addr, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	join := threadline.JoinRun{RunID: runID}
	if runID == "latest" {
		join.RunID = ""
	}
	s := c.Threads().JoinRun(ctx, threadID, join)
	defer s.Close()
	for s.Receive() {
		ev := s.Msg()
		fmt.Printf("%4d %s%s\n", ev.GetSequence(), kindOf(ev), detail(ev))
	}
	outcome, err := s.Collect()
	if err != nil {
		return err
	}
	fmt.Printf("(run %s: revision %d)\n", s.RunID(), outcome.Revision)
	return report(outcome.Result)
}

// kindOf names an event's case, e.g. "tool_call".
func kindOf(ev *threadline.RunEvent) string {
	m := ev.ProtoReflect()
	if fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("event")); fd != nil {
		return string(fd.Name())
	}
	return "?"
}

// detail is what -join prints after an event's kind.
func detail(ev *threadline.RunEvent) string {
	switch {
	case ev.GetRunStarted() != nil:
		return " " + ev.GetRunId()
	case ev.GetToolCall() != nil:
		return fmt.Sprintf(" %s(%s)", ev.GetToolCall().GetToolName(), ev.GetToolCall().GetArgsJson())
	case ev.GetToolResult() != nil:
		r := ev.GetToolResult()
		return fmt.Sprintf(" %s %s: %s", r.GetToolName(), strings.TrimPrefix(r.GetOutcome().String(), "TOOL_OUTCOME_"), r.GetContentJson())
	case ev.GetThreadCommitted() != nil:
		return fmt.Sprintf(" revision %d", ev.GetThreadCommitted().GetRevision())
	case ev.GetEventsOmitted() != nil:
		o := ev.GetEventsOmitted()
		return fmt.Sprintf(" %d..%d %s", o.GetFirstSequence(), ev.GetSequence(), strings.TrimPrefix(o.GetReason().String(), "OMISSION_REASON_"))
	case ev.GetResult() != nil:
		return " " + strings.TrimPrefix(ev.GetResult().GetStatus().String(), "RUN_STATUS_")
	}
	return ""
}

// watchThread prints the thread's snapshot, then each change, until Ctrl-C or its deletion.
func watchThread(ctx context.Context, addr string, opts []threadline.Option, threadID string) error {
	c, err := threadline.Dial(addr, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	for u, err := range c.Threads().WatchThread(ctx, threadID) {
		if err != nil {
			return err
		}
		var kinds []string
		for _, k := range u.GetChanges() {
			kinds = append(kinds, strings.TrimPrefix(k.String(), "THREAD_CHANGE_"))
		}
		th := u.GetThread()
		line := fmt.Sprintf("%d %s: %s at revision %d", u.GetChangeSequence(), strings.Join(kinds, ","),
			strings.TrimPrefix(th.GetStatus().String(), "THREAD_STATUS_"), th.GetRevision())
		if lease := th.GetLease(); lease != nil {
			line += ", run " + lease.GetRunId()
		}
		fmt.Println(line)
	}
	return nil
}

// report says how the last run ended: nil for COMPLETED, printing its output.
func report(result *threadline.RunResult) error {
	switch result.GetStatus() {
	case threadline.StatusCompleted:
		var text string
		if json.Unmarshal([]byte(result.GetOutputJson()), &text) != nil {
			text = result.GetOutputJson() // a structured output: print its JSON
		}
		fmt.Printf("\n%s\n", text)
		return nil
	case threadline.StatusFailed:
		f := result.GetFailure()
		return fmt.Errorf("run failed: %s: %s (retry hint %v)", f.GetCode(), f.GetMessage(), f.GetRetryHint())
	default:
		return fmt.Errorf("run ended %v", result.GetStatus())
	}
}

// stream runs spec, printing the tool activity as it happens, and returns the terminal result.
func (h *host) stream(ctx context.Context, c *threadline.Client, spec *threadline.RunSpec) (*threadline.RunResult, error) {
	s := c.StreamRun(ctx, spec)
	defer s.Close()
	show(s)
	if err := s.Err(); err != nil {
		return nil, err
	}
	return s.Result(), nil
}

// show reads a stream's events, printing the tool activity as it happens.
func show(s interface {
	Receive() bool
	Msg() *threadline.RunEvent
}) {
	for s.Receive() {
		ev := s.Msg()
		switch {
		case ev.GetRunStarted() != nil:
			fmt.Printf("[run %s on %s]\n", ev.GetRunId(), ev.GetThreadId())
		case ev.GetToolCall() != nil:
			fmt.Printf("  -> %s(%s)\n", ev.GetToolCall().GetToolName(), ev.GetToolCall().GetArgsJson())
		case ev.GetToolResult() != nil:
			r := ev.GetToolResult()
			fmt.Printf("  <- %s %s: %s\n", r.GetToolName(), strings.TrimPrefix(r.GetOutcome().String(), "TOOL_OUTCOME_"), r.GetContentJson())
		}
	}
}

// answer asks about every approval on the terminal, runs every client tool call and, with -state,
// every child the batch asks for.
func (h *host) answer(ctx context.Context, batch *threadline.DeferredToolRequests) (*threadline.Answers, error) {
	answers := threadline.NewAnswers(batch).AnsweredBy(envOr("USER", "host"))
	for _, call := range answers.Approvals() {
		fmt.Printf("\nThe model wants to run %s(%s). Approve? [y/N] ", call.GetToolName(), call.GetArgsJson())
		if yes(h.readLine()) {
			answers.Approve(call.GetToolCallId())
			continue
		}
		fmt.Print("Reason for the model (optional): ")
		answers.Deny(call.GetToolCallId(), h.readLine())
	}
	for _, call := range answers.Calls() {
		if call.GetChild() != nil && h.client != nil {
			if err := h.runChild(ctx, answers, call); err != nil {
				return nil, err
			}
			continue
		}
		if call.GetToolName() != getTime.GetName() {
			answers.Fail(call.GetToolCallId(), "this host does not run "+call.GetToolName())
			continue
		}
		now, err := runGetTime(call.GetArgsJson())
		if err != nil {
			answers.Retry(call.GetToolCallId(), err.Error())
			continue
		}
		fmt.Printf("  (host ran get_time: %s)\n", now)
		if err := answers.Return(call.GetToolCallId(), now); err != nil {
			return nil, err
		}
	}
	return answers, nil
}

func runGetTime(argsJSON string) (string, error) {
	var args struct {
		Zone string `json:"zone"`
	}
	if argsJSON != "" {
		if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
			return "", fmt.Errorf("arguments are not a JSON object: %v", err)
		}
	}
	if args.Zone == "" {
		args.Zone = "UTC"
	}
	loc, err := time.LoadLocation(args.Zone)
	if err != nil {
		return "", fmt.Errorf("unknown time zone %q", args.Zone)
	}
	return time.Now().In(loc).Format("2006-01-02 15:04 MST"), nil
}

func (h *host) readLine() string {
	if !h.in.Scan() {
		return "" // stdin closed: deny, with the default message
	}
	return strings.TrimSpace(h.in.Text())
}

func yes(s string) bool {
	s = strings.ToLower(s)
	return s == "y" || s == "yes"
}

func (h *host) format() threadline.Format {
	if strings.HasSuffix(h.statePath, ".json") {
		return threadline.JSON
	}
	return threadline.Binary
}

// load reads the stored state; nil when there is none yet (the first run starts a thread).
func (h *host) load() (*threadline.HarnessState, error) {
	data, err := os.ReadFile(h.statePath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return threadline.UnmarshalState(data, h.format())
}

// save replaces the stored state atomically, so an interrupted write never loses the thread.
func (h *host) save(state *threadline.HarnessState) error {
	data, err := threadline.MarshalState(state, h.format())
	if err != nil {
		return err
	}
	tmp := h.statePath + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, h.statePath)
}

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}
