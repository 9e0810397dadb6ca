package threadline

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Format is an encoding in which a host stores envelopes and other messages.
type Format int

const (
	// Binary is the protobuf wire format with fields in field-number order, the bytes the
	// server and the Python and TypeScript SDKs write for the same message (Go's own
	// proto.Marshal puts oneof fields last). Fields unknown to this SDK version are kept, so a
	// state from a newer server survives a round trip.
	Binary Format = iota
	// JSON is proto3 JSON with the .proto field names (`thread_id`, `message_history`), as the
	// golden vectors and grpcurl write it. Compare two encodings as parsed JSON values, not as
	// bytes: the bytes of protojson output are not stable. Unmarshalling rejects unknown fields.
	JSON
)

// String returns "binary" or "json".
func (f Format) String() string {
	switch f {
	case Binary:
		return "binary"
	case JSON:
		return "json"
	default:
		return fmt.Sprintf("Format(%d)", int(f))
	}
}

var (
	jsonMarshal     = protojson.MarshalOptions{UseProtoNames: true}
	binaryUnmarshal = proto.UnmarshalOptions{}
	jsonUnmarshal   = protojson.UnmarshalOptions{}
)

// MarshalState encodes a state envelope for storage, e.g. a RunResult's state.
func MarshalState(state *HarnessState, f Format) ([]byte, error) {
	return Marshal(state, f)
}

// UnmarshalState decodes an envelope MarshalState (or any Threadline SDK) wrote in format f.
// It checks only the encoding: the server checks versions and history when the state is used
// (or at once with Client.ValidateState).
func UnmarshalState(data []byte, f Format) (*HarnessState, error) {
	state := &HarnessState{}
	if err := Unmarshal(data, state, f); err != nil {
		return nil, err
	}
	return state, nil
}

// Marshal encodes any Threadline message (a state, a deferred batch, a result) in format f.
func Marshal(m proto.Message, f Format) ([]byte, error) {
	switch f {
	case Binary:
		return marshalCanonical(m)
	case JSON:
		return jsonMarshal.Marshal(m)
	default:
		return nil, fmt.Errorf("threadline: unknown format %v", f)
	}
}

// Unmarshal decodes data in format f into m, replacing its contents.
func Unmarshal(data []byte, m proto.Message, f Format) error {
	var err error
	switch f {
	case Binary:
		err = binaryUnmarshal.Unmarshal(data, m)
	case JSON:
		err = jsonUnmarshal.Unmarshal(data, m)
	default:
		return fmt.Errorf("threadline: unknown format %v", f)
	}
	if err != nil {
		return fmt.Errorf("threadline: decode %s %s: %w", f, m.ProtoReflect().Descriptor().FullName(), err)
	}
	return nil
}
