package threadline_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	threadline "github.com/threadline-dev/threadline/clients/go"
	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

func sampleState() *threadline.HarnessState {
	return &threadline.HarnessState{
		SchemaVersion: "1",
		ThreadId:      "thread_0123456789abcdef0123456789abcdef",
		MessageHistory: &threadlinev1.MessageHistory{
			Format:        "pydantic-ai.model-messages+json",
			FormatVersion: "1",
			Data:          "[]",
			MessageCount:  0,
			Sha256:        bytes.Repeat([]byte{0xab}, 32),
		},
		CapabilityStates: []*threadlinev1.CapabilityState{
			{CapabilityId: "demo.counter", Version: "1", DataJson: `{"value":2}`},
			{CapabilityId: "a.first", Version: "1", DataJson: `{}`},
		},
		ExtraJson: `{"z":1,"a":2}`,
	}
}

func TestStateRoundTrip(t *testing.T) {
	for _, f := range []threadline.Format{threadline.Binary, threadline.JSON} {
		t.Run(f.String(), func(t *testing.T) {
			data, err := threadline.MarshalState(sampleState(), f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := threadline.UnmarshalState(data, f)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, sampleState()) {
				t.Errorf("round trip changed the state:\n got %v\nwant %v", got, sampleState())
			}
		})
	}
}

func TestStateJSONUsesProtoNames(t *testing.T) {
	data, err := threadline.MarshalState(sampleState(), threadline.JSON)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"schema_version", "thread_id", "message_history", "capability_states", "extra_json"} {
		if _, ok := v[key]; !ok {
			t.Errorf("key %q missing from %s", key, data)
		}
	}
	// Repeated, never map: namespace order survives.
	caps := v["capability_states"].([]any)
	if got := caps[0].(map[string]any)["capability_id"]; got != "demo.counter" {
		t.Errorf("first capability = %v", got)
	}
}

func TestBinaryKeepsUnknownFields(t *testing.T) {
	data, err := threadline.MarshalState(sampleState(), threadline.Binary)
	if err != nil {
		t.Fatal(err)
	}
	// Field 99, varint 1: what a newer server might add.
	data = append(data, 0x98, 0x06, 0x01)
	state, err := threadline.UnmarshalState(data, threadline.Binary)
	if err != nil {
		t.Fatal(err)
	}
	again, err := threadline.MarshalState(state, threadline.Binary)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Errorf("unknown field lost: %x != %x", again, data)
	}
}

func TestUnmarshalStateErrors(t *testing.T) {
	_, err := threadline.UnmarshalState([]byte(`{"thread_id": 5}`), threadline.JSON)
	if err == nil || !strings.Contains(err.Error(), "threadline.v1.HarnessState") {
		t.Errorf("err = %v", err)
	}
	if _, err := threadline.UnmarshalState(nil, threadline.Format(7)); err == nil {
		t.Error("unknown format accepted")
	}
}

func TestAnswers(t *testing.T) {
	batch := &threadline.DeferredToolRequests{
		Approvals: []*threadline.DeferredToolCall{{ToolCallId: "a1", Kind: threadline.KindApproval}, {ToolCallId: "a2", Kind: threadline.KindApproval}},
		Calls:     []*threadline.DeferredToolCall{{ToolCallId: "c1", Kind: threadline.KindExternal}},
	}
	answers := threadline.NewAnswers(batch).AnsweredBy("alice")
	answers.Approve("a1").Deny("a2", "not today")
	if p := answers.Pending(); len(p) != 1 || p[0].GetToolCallId() != "c1" {
		t.Fatalf("Pending() = %v", p)
	}
	if err := answers.Return("c1", map[string]string{"time": "12:00"}); err != nil {
		t.Fatal(err)
	}
	if p := answers.Pending(); len(p) != 0 {
		t.Errorf("Pending() = %v", p)
	}
	spec := threadline.Resume(&threadline.RunResult{State: sampleState(), Deferred: batch}, answers)
	resume := spec.GetDeferredResume()
	if resume.GetRequests() != batch || !proto.Equal(spec.GetPreviousState(), sampleState()) {
		t.Error("Resume lost the batch or the state")
	}
	results := resume.GetResults()
	got := []string{
		results.GetApprovals()[0].GetToolCallId(),
		results.GetApprovals()[1].GetDenied().GetMessage(),
		results.GetCalls()[0].GetValueJson(),
		results.GetCalls()[0].GetAnsweredBy(),
	}
	want := []string{"a1", "not today", `{"time":"12:00"}`, "alice"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("results = %v, want %v", got, want)
	}
}
