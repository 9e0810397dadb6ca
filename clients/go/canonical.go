package threadline

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Binary encoding in field-number order.
//
// The Python (upb) and TypeScript (protobuf-es) encoders write a message's fields in field-number
// order, so their bytes agree. Go's proto.Marshal, even with Deterministic, writes the fields of a
// oneof after every other field ("to preserve compatibility with historic wire output"), so a
// CallResult or ApprovalResult with metadata comes out in a different order. Both decode to the
// same message, but the golden vectors promise identical bytes in every language, and a host may
// hash or compare stored envelopes. marshalCanonical writes what the other languages write:
// fields by number, packed repeated scalars, map entries by key, unknown fields last.

func marshalCanonical(m proto.Message) ([]byte, error) {
	return appendMessage(nil, m.ProtoReflect())
}

func appendMessage(b []byte, m protoreflect.Message) ([]byte, error) {
	type field struct {
		fd protoreflect.FieldDescriptor
		v  protoreflect.Value
	}
	var fields []field
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		fields = append(fields, field{fd, v})
		return true
	})
	slices.SortFunc(fields, func(x, y field) int { return cmp.Compare(x.fd.Number(), y.fd.Number()) })
	var err error
	for _, f := range fields {
		switch {
		case f.fd.IsList():
			b, err = appendList(b, f.fd, f.v.List())
		case f.fd.IsMap():
			b, err = appendMap(b, f.fd, f.v.Map())
		default:
			b, err = appendField(b, f.fd, f.v)
		}
		if err != nil {
			return nil, err
		}
	}
	return append(b, m.GetUnknown()...), nil
}

func appendField(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) ([]byte, error) {
	if fd.Kind() == protoreflect.GroupKind {
		b = protowire.AppendTag(b, fd.Number(), protowire.StartGroupType)
		b, err := appendMessage(b, v.Message())
		if err != nil {
			return nil, err
		}
		return protowire.AppendTag(b, fd.Number(), protowire.EndGroupType), nil
	}
	b = protowire.AppendTag(b, fd.Number(), wireType(fd.Kind()))
	return appendValue(b, fd, v)
}

func appendList(b []byte, fd protoreflect.FieldDescriptor, list protoreflect.List) ([]byte, error) {
	if fd.IsPacked() {
		var packed []byte
		for i := range list.Len() {
			var err error
			if packed, err = appendValue(packed, fd, list.Get(i)); err != nil {
				return nil, err
			}
		}
		b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
		return protowire.AppendBytes(b, packed), nil
	}
	for i := range list.Len() {
		var err error
		if b, err = appendField(b, fd, list.Get(i)); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func appendMap(b []byte, fd protoreflect.FieldDescriptor, m protoreflect.Map) ([]byte, error) {
	var keys []protoreflect.MapKey
	m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		keys = append(keys, k)
		return true
	})
	slices.SortFunc(keys, compareKeys)
	for _, k := range keys {
		entry, err := appendField(nil, fd.MapKey(), k.Value())
		if err != nil {
			return nil, err
		}
		if entry, err = appendField(entry, fd.MapValue(), m.Get(k)); err != nil {
			return nil, err
		}
		b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
		b = protowire.AppendBytes(b, entry)
	}
	return b, nil
}

func compareKeys(x, y protoreflect.MapKey) int {
	switch x.Interface().(type) {
	case bool:
		if x.Bool() == y.Bool() {
			return 0
		}
		if !x.Bool() {
			return -1
		}
		return 1
	case int32, int64:
		return cmp.Compare(x.Int(), y.Int())
	case uint32, uint64:
		return cmp.Compare(x.Uint(), y.Uint())
	default:
		return cmp.Compare(x.String(), y.String())
	}
}

func appendValue(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) ([]byte, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protowire.AppendVarint(b, protowire.EncodeBool(v.Bool())), nil
	case protoreflect.EnumKind:
		return protowire.AppendVarint(b, uint64(int64(v.Enum()))), nil
	case protoreflect.Int32Kind, protoreflect.Int64Kind:
		return protowire.AppendVarint(b, uint64(v.Int())), nil
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return protowire.AppendVarint(b, protowire.EncodeZigZag(v.Int())), nil
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		return protowire.AppendVarint(b, v.Uint()), nil
	case protoreflect.Sfixed32Kind:
		return protowire.AppendFixed32(b, uint32(v.Int())), nil
	case protoreflect.Fixed32Kind:
		return protowire.AppendFixed32(b, uint32(v.Uint())), nil
	case protoreflect.FloatKind:
		return protowire.AppendFixed32(b, math.Float32bits(float32(v.Float()))), nil
	case protoreflect.Sfixed64Kind:
		return protowire.AppendFixed64(b, uint64(v.Int())), nil
	case protoreflect.Fixed64Kind:
		return protowire.AppendFixed64(b, v.Uint()), nil
	case protoreflect.DoubleKind:
		return protowire.AppendFixed64(b, math.Float64bits(v.Float())), nil
	case protoreflect.StringKind:
		return protowire.AppendString(b, v.String()), nil
	case protoreflect.BytesKind:
		return protowire.AppendBytes(b, v.Bytes()), nil
	case protoreflect.MessageKind:
		inner, err := appendMessage(nil, v.Message())
		if err != nil {
			return nil, err
		}
		return protowire.AppendBytes(b, inner), nil
	default:
		return nil, fmt.Errorf("threadline: cannot encode field %s of kind %v", fd.FullName(), fd.Kind())
	}
}

func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.BoolKind, protoreflect.EnumKind,
		protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Uint32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Uint64Kind:
		return protowire.VarintType
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	default:
		return protowire.BytesType
	}
}
