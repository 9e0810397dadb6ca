package threadline_test

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	threadline "github.com/threadline-dev/threadline/clients/go"
	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

func TestBinaryWritesFieldsByNumber(t *testing.T) {
	// A oneof (field 2) before plain fields (6, 7): Python and TypeScript write 1, 2, 6, 7.
	msg := &threadlinev1.CallResult{
		ToolCallId:   "c1",
		Result:       &threadlinev1.CallResult_ValueJson{ValueJson: "1"},
		MetadataJson: "{}",
		AnsweredBy:   "bob",
	}
	var want []byte
	want = protowire.AppendTag(want, 1, protowire.BytesType)
	want = protowire.AppendString(want, "c1")
	want = protowire.AppendTag(want, 2, protowire.BytesType)
	want = protowire.AppendString(want, "1")
	want = protowire.AppendTag(want, 6, protowire.BytesType)
	want = protowire.AppendString(want, "{}")
	want = protowire.AppendTag(want, 7, protowire.BytesType)
	want = protowire.AppendString(want, "bob")

	got, err := threadline.Marshal(msg, threadline.Binary)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Marshal = %x, want %x", got, want)
	}
}

func TestBinaryMatchesProtoWithoutOneofs(t *testing.T) {
	limit := int64(0)
	flag := false
	for _, msg := range []proto.Message{
		sampleState(),
		&threadlinev1.UsageLimits{RequestLimit: &limit, CountTokensBeforeRequest: &flag, TotalTokensLimit: proto.Int64(-3)},
		&threadlinev1.RunUsage{Requests: 2, AudioSeconds: 1.5, Details: []*threadlinev1.UsageDetail{{Name: "x", Value: 1}}, Cost: "0.1"},
		&threadlinev1.GetServerInfoResponse{SchemaVersions: []string{"1", "2"}, Limits: &threadlinev1.ServerLimits{MaxMessageBytes: 1 << 26}},
		&threadlinev1.PartStart{PartIndex: 3, Kind: threadlinev1.PartKind_PART_KIND_TOOL_CALL, ToolName: "t"},
	} {
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := threadline.Marshal(msg, threadline.Binary)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%T: Marshal = %x, proto.Marshal = %x", msg, got, want)
		}
	}
}

func TestBinaryRoundTripsOneofs(t *testing.T) {
	for _, msg := range []proto.Message{
		&threadlinev1.RunSpec{Prompt: &threadlinev1.RunSpec_Text{Text: ""}, PreviousState: sampleState(), Checkpoints: true, RequestId: "r"},
		&threadlinev1.RunSpec{Prompt: &threadlinev1.RunSpec_Parts{Parts: &threadlinev1.PromptParts{Parts: []*threadlinev1.PromptPart{
			{Content: &threadlinev1.PromptPart_Text{Text: "look"}},
			{Content: &threadlinev1.PromptPart_Binary{Binary: &threadlinev1.BinaryContent{MediaType: "image/png", Data: []byte{0, 1}}}},
		}}}},
		&threadlinev1.RunEvent{ThreadId: "t", Sequence: 9, OccurredAt: timestamppb.New(timestamppb.Now().AsTime()),
			Event: &threadlinev1.RunEvent_Result{Result: &threadlinev1.RunResult{Status: threadline.StatusCompleted, OutputJson: `"x"`}}},
		&threadlinev1.ApprovalResult{ToolCallId: "a", Decision: &threadlinev1.ApprovalResult_Approved{
			Approved: &threadlinev1.ToolApproved{OverrideArgsJson: proto.String("")}}, AnsweredBy: "z"},
	} {
		data, err := threadline.Marshal(msg, threadline.Binary)
		if err != nil {
			t.Fatal(err)
		}
		back := msg.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(data, back); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(back, msg) {
			t.Errorf("%T: round trip gave %v, want %v", msg, back, msg)
		}
	}
}
