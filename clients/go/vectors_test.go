package threadline_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	threadline "github.com/threadline-dev/threadline/clients/go"
	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// The golden vectors of tests/vectors/ (DESIGN "Tests"): messages the server produced, which
// every client must decode and write back: `*.binpb` to identical bytes, `*.json` (proto3 JSON
// with the .proto field names) to the same parsed JSON value.

func TestGoldenVectors(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "tests", "vectors")
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		t.Skipf("%s does not exist yet", dir)
	}
	if len(vectorFiles(t, dir)) == 0 {
		t.Skipf("no *.binpb or *.json vectors in %s yet", dir)
	}
	checkVectors(t, dir)
}

// TestVectorCheckItself writes vectors of a real suspended run, each named after the message it
// holds, and checks them, so the check itself is known to work whatever vectors exist.
func TestVectorCheckItself(t *testing.T) {
	c, ctx := newClient(t)
	res := run(t, c, ctx, &threadline.RunSpec{Prompt: threadline.Text("delete notes.txt")}, threadline.StatusSuspended)
	dir := t.TempDir()
	for name, msg := range map[string]proto.Message{
		"harness_state_suspended":         res.GetState(),
		"deferred_tool_requests_approval": res.GetDeferred(),
		"run_result_suspended":            res,
		"streams/run_event_result.v1":     &threadline.RunEvent{Sequence: 7, Event: &threadlinev1.RunEvent_Result{Result: res}},
	} {
		for _, f := range []threadline.Format{threadline.Binary, threadline.JSON} {
			data, err := threadline.Marshal(msg, f)
			if err != nil {
				t.Fatal(err)
			}
			ext := map[threadline.Format]string{threadline.Binary: ".binpb", threadline.JSON: ".json"}[f]
			path := filepath.Join(dir, filepath.FromSlash(name)+ext)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := len(vectorFiles(t, dir)); n != 8 {
		t.Fatalf("%d vector files", n)
	}
	if got := vectorType(t, nil, "x/run_event_result.v1.json").Descriptor().Name(); got != "RunEvent" {
		t.Errorf("run_event_result.v1.json holds a %s", got)
	}
	checkVectors(t, dir)
}

// checkVectors decodes and re-encodes every vector under dir.
func checkVectors(t *testing.T, dir string) {
	t.Helper()
	manifest := readManifest(t, dir)
	for _, rel := range vectorFiles(t, dir) {
		t.Run(rel, func(t *testing.T) {
			mt := vectorType(t, manifest, rel)
			data, err := os.ReadFile(filepath.Join(dir, rel))
			if err != nil {
				t.Fatal(err)
			}
			f := threadline.Binary
			if strings.HasSuffix(rel, ".json") {
				f = threadline.JSON
			}
			msg := mt.New().Interface()
			if err := threadline.Unmarshal(data, msg, f); err != nil {
				t.Fatal(err)
			}
			again, err := threadline.Marshal(msg, f)
			if err != nil {
				t.Fatal(err)
			}
			if f == threadline.Binary {
				if !bytes.Equal(again, data) {
					t.Errorf("re-encoded bytes differ:\n got %x\nwant %x", again, data)
				}
				return
			}
			var got, want any
			if err := json.Unmarshal(again, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("re-encoded JSON differs:\n got %s\nwant %s", again, data)
			}
		})
	}
}

// manifestName is the file of tests/vectors/ that names each vector's message type.
const manifestName = "manifest.json"

// vectorFiles lists the *.binpb and *.json files under dir, relative to it, sorted.
func vectorFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if path == filepath.Join(dir, manifestName) {
			return nil
		}
		if strings.HasSuffix(path, ".binpb") || strings.HasSuffix(path, ".json") {
			rel, err := filepath.Rel(dir, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// vectorType is the message a vector holds. tests/vectors/manifest.json maps each vector's name
// without extension to the message's full name ("fresh_state": "threadline.v1.HarnessState");
// without a manifest, the name itself says: the longest snake_case name of a threadline.v1
// message it starts with (`harness_state_suspended.binpb` holds a HarnessState).
func vectorType(t *testing.T, manifest map[string]string, rel string) protoreflect.MessageType {
	t.Helper()
	stem := strings.TrimSuffix(strings.TrimSuffix(rel, ".binpb"), ".json")
	if manifest != nil {
		name, ok := manifest[stem]
		if !ok {
			t.Fatalf("%s is not in manifest.json", rel)
		}
		mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name))
		if err != nil {
			t.Fatalf("manifest.json: %s: %v", rel, err)
		}
		return mt
	}
	base := filepath.Base(stem)
	var best protoreflect.MessageType
	bestLen := 0
	for name, mt := range contractMessages(t) {
		if (base == name || strings.HasPrefix(base, name+"_") || strings.HasPrefix(base, name+".")) && len(name) > bestLen {
			best, bestLen = mt, len(name)
		}
	}
	if best == nil {
		t.Fatalf("no threadline.v1 message matches the vector name %s", rel)
	}
	return best
}

// readManifest reads dir/manifest.json, or returns nil when there is none.
func readManifest(t *testing.T, dir string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, manifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", manifestName, err)
	}
	return m
}

// contractMessages maps the snake_case name of every top-level threadline.v1 message to its type.
func contractMessages(t *testing.T) map[string]protoreflect.MessageType {
	t.Helper()
	out := map[string]protoreflect.MessageType{}
	for _, fd := range []protoreflect.FileDescriptor{
		threadlinev1.File_threadline_v1_state_proto,
		threadlinev1.File_threadline_v1_deferred_proto,
		threadlinev1.File_threadline_v1_run_proto,
		threadlinev1.File_threadline_v1_events_proto,
		threadlinev1.File_threadline_v1_harness_service_proto,
	} {
		msgs := fd.Messages()
		for i := range msgs.Len() {
			mt, err := protoregistry.GlobalTypes.FindMessageByName(msgs.Get(i).FullName())
			if err != nil {
				t.Fatal(err)
			}
			out[snake(string(msgs.Get(i).Name()))] = mt
		}
	}
	return out
}

// snake turns a message name into snake_case: HarnessState -> harness_state.
func snake(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// TestCheckpointDeltaVector rebuilds the history of the golden delta candidate from its
// documented base, the history of `state_full` (the state the recorded stream continued).
func TestCheckpointDeltaVector(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "tests", "vectors")
	if _, err := os.Stat(filepath.Join(dir, "checkpoint_delta.binpb")); os.IsNotExist(err) {
		t.Skip("no checkpoint_delta vector yet")
	}
	read := func(name string, m proto.Message) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := threadline.Unmarshal(data, m, threadline.Binary); err != nil {
			t.Fatal(err)
		}
	}
	var base threadline.HarnessState
	var ev threadline.RunEvent
	read("state_full.binpb", &base)
	read("checkpoint_delta.binpb", &ev)

	state := ev.GetCheckpointCandidate().GetState()
	if d := ev.GetCheckpointCandidate().GetHistoryDelta(); d == nil || state.GetMessageHistory().GetData() != "" {
		t.Fatalf("the vector is not a delta candidate: %v", ev.GetCheckpointCandidate())
	}
	data, err := threadline.RebuildHistory(base.GetMessageHistory().GetData(), &ev)
	if err != nil {
		t.Fatal(err)
	}
	if n := messageCount(t, data); n != state.GetMessageHistory().GetMessageCount() {
		t.Errorf("%d messages rebuilt, message_count %d", n, state.GetMessageHistory().GetMessageCount())
	}

	// The rebuilt state is one the server accepts.
	complete := proto.CloneOf(state)
	complete.MessageHistory.Data = data
	c, ctx := newClient(t)
	if _, err := c.ValidateState(ctx, complete); err != nil {
		t.Errorf("ValidateState of the rebuilt candidate: %v", err)
	}

	// From any other base it does not rebuild.
	for _, other := range []string{"[]", " " + base.GetMessageHistory().GetData()} {
		if _, err := threadline.RebuildHistory(other, &ev); !errors.Is(err, threadline.ErrCheckpointDelta) {
			t.Errorf("rebuilt from a %d-byte base: err %v, want ErrCheckpointDelta", len(other), err)
		}
	}
}

// TestStateEnvironmentVector reads state_environment with the SDK's state decoding: the server's
// own threadline_local entry, and a docker entry the SDK carries byte for byte.
func TestStateEnvironmentVector(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "tests", "vectors")
	binary, err := os.ReadFile(filepath.Join(dir, "state_environment.binpb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []threadline.Format{threadline.Binary, threadline.JSON} {
		t.Run(f.String(), func(t *testing.T) {
			name := map[threadline.Format]string{threadline.Binary: "state_environment.binpb", threadline.JSON: "state_environment.json"}[f]
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			state, err := threadline.UnmarshalState(data, f)
			if err != nil {
				t.Fatal(err)
			}
			entries := state.GetEnvironmentStates()
			if len(entries) != 2 {
				t.Fatalf("%d environment states, want 2", len(entries))
			}
			work, box := entries[0], entries[1]
			if work.GetMountName() != "work" || work.GetProviderKey() != "threadline_local" || work.GetStateVersion() != "1" {
				t.Errorf("work entry %v", work)
			}
			var local map[string]json.RawMessage
			if err := json.Unmarshal([]byte(work.GetStateJson()), &local); err != nil {
				t.Fatal(err)
			}
			var commands []map[string]string
			if err := json.Unmarshal(local["commands"], &commands); err != nil {
				t.Fatal(err)
			}
			if len(local) != 3 || local["backend"] == nil || local["scope"] == nil || len(commands) != 2 {
				t.Errorf("work state_json %s: want backend, commands (two), scope", work.GetStateJson())
			}
			if box.GetMountName() != "box" || box.GetProviderKey() != "docker" || box.GetStateVersion() != "1.0" || box.GetStateJson() != `{"container":"c-1"}` {
				t.Errorf("box entry %v", box)
			}
			// The SDK's re-encoding carries the entry it cannot read byte for byte.
			boxBytes, err := threadline.Marshal(box, threadline.Binary)
			if err != nil {
				t.Fatal(err)
			}
			again, err := threadline.MarshalState(state, threadline.Binary)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(binary, boxBytes) || !bytes.Contains(again, boxBytes) {
				t.Errorf("the box entry's bytes %x are not carried unchanged", boxBytes)
			}
			reread, err := threadline.UnmarshalState(again, threadline.Binary)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(reread.GetEnvironmentStates()[1], box) {
				t.Errorf("re-read box entry %v", reread.GetEnvironmentStates()[1])
			}
		})
	}
}
