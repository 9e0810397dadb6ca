package threadline_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serverAddr is the "host:port" of the server every test and example talks to: THREADLINE_ADDR,
// or a `threadline serve --port 0` that TestMain starts and stops.
var serverAddr string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if addr := os.Getenv("THREADLINE_ADDR"); addr != "" {
		serverAddr = addr
		return m.Run()
	}
	stop, addr, err := startServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "threadline tests:", err)
		return 1
	}
	defer stop()
	serverAddr = addr
	return m.Run()
}

// startServer starts `<repo>/.venv/bin/threadline serve --port 0 [args]` and returns the
// address from its first stdout line ("listening on <host>:<port>").
func startServer(args ...string) (stop func(), addr string, err error) {
	stop, addr, _, err = startServerEnv(nil, args...)
	return stop, addr, err
}

// startServerEnv is startServer with env added to the server's environment; it also returns
// the file that collects the server's stderr (its logs), removed by stop.
func startServerEnv(env []string, args ...string) (stop func(), addr, logPath string, err error) {
	_, stop, addr, logPath, err = startServerCmd(env, args...)
	return stop, addr, logPath, err
}

// startKillable is startServer that also returns kill, which ends the server with SIGKILL: a
// crash (stop still cleans up after it).
func startKillable(args ...string) (stop, kill func(), addr string, err error) {
	cmd, stop, addr, _, err := startServerCmd(nil, args...)
	if err != nil {
		return nil, nil, "", err
	}
	return stop, func() { _ = cmd.Process.Kill() }, addr, nil
}

// startServerCmd is startServerEnv, with the server's process.
func startServerCmd(env []string, args ...string) (cmd *exec.Cmd, stop func(), addr, logPath string, err error) {
	root, err := repoRoot()
	if err != nil {
		return nil, nil, "", "", err
	}
	bin := filepath.Join(root, ".venv", "bin", "threadline")
	logs, err := os.CreateTemp("", "threadline-server-*.log")
	if err != nil {
		return nil, nil, "", "", err
	}
	// Every server of the suite keeps its threads in memory unless the caller names a store.
	base := []string{"serve", "--port", "0"}
	if !slices.Contains(args, "--store") {
		base = append(base, "--store", "memory")
	}
	cmd = exec.Command(bin, append(base, args...)...)
	cmd.Dir = root
	// The server reads its token from THREADLINE_TOKEN when --token is not given: only the
	// arguments decide here.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "THREADLINE_TOKEN=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, "", "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, "", "", fmt.Errorf("start %s (set THREADLINE_ADDR to use a running server): %w", bin, err)
	}
	var logTail string
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if data, err := os.ReadFile(logs.Name()); err == nil {
			logTail = string(data[max(0, len(data)-4000):])
		}
		_ = logs.Close()
		_ = os.Remove(logs.Name())
	}

	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, r) // keep the pipe drained for the server's lifetime
	}()
	select {
	case line := <-lines:
		if addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on "); ok {
			return cmd, stop, addr, logs.Name(), nil
		}
		stop()
		return nil, nil, "", "", fmt.Errorf("server's first line is %q, not \"listening on <host>:<port>\"; its log:\n%s", line, logTail)
	case <-time.After(60 * time.Second):
		stop()
		return nil, nil, "", "", fmt.Errorf("server did not print its address within 60s; its log:\n%s", logTail)
	}
}

// repoRoot walks up from the working directory to the folder holding pyproject.toml.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "pyproject.toml")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no pyproject.toml above the working directory; set THREADLINE_ADDR")
		}
		dir = parent
	}
}
