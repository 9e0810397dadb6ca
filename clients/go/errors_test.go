package threadline_test

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	threadline "github.com/threadline-dev/threadline/clients/go"
)

func richStatus(t *testing.T) error {
	t.Helper()
	st, err := status.New(codes.FailedPrecondition, "schema_version \"999\" is not supported").WithDetails(
		&errdetails.ErrorInfo{
			Reason:   threadline.ReasonSchemaVersionUnsupported,
			Domain:   threadline.Domain,
			Metadata: map[string]string{"received": "999", "supported": "1"},
		},
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: "spec.previous_state.schema_version", Description: "unsupported"},
		}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestErrorFromStatus(t *testing.T) {
	e := threadline.FromError(richStatus(t))
	if e.Code() != codes.FailedPrecondition {
		t.Errorf("Code() = %v", e.Code())
	}
	if e.Reason() != threadline.ReasonSchemaVersionUnsupported || e.Domain() != threadline.Domain {
		t.Errorf("Reason(), Domain() = %q, %q", e.Reason(), e.Domain())
	}
	if got := e.Metadata(); got["received"] != "999" || got["supported"] != "1" {
		t.Errorf("Metadata() = %v", got)
	}
	if v := e.FieldViolations(); len(v) != 1 || v[0].GetField() != "spec.previous_state.schema_version" {
		t.Errorf("FieldViolations() = %v", v)
	}
	want := `failed_precondition: SCHEMA_VERSION_UNSUPPORTED: schema_version "999" is not supported`
	if e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
	if status.Code(e) != codes.FailedPrecondition {
		t.Errorf("status.Code(*Error) = %v", status.Code(e))
	}
}

func TestReasonOfLooksThroughWrapping(t *testing.T) {
	err := fmt.Errorf("load thread: %w", threadline.FromError(richStatus(t)))
	if got := threadline.ReasonOf(err); got != threadline.ReasonSchemaVersionUnsupported {
		t.Errorf("ReasonOf = %q", got)
	}
	if got := threadline.CodeOf(err); got != codes.FailedPrecondition {
		t.Errorf("CodeOf = %v", got)
	}
	var e *threadline.Error
	if !errors.As(err, &e) {
		t.Fatal("errors.As found no *Error")
	}
}

func TestReasonOfOtherErrors(t *testing.T) {
	plain := errors.New("disk full")
	if threadline.ReasonOf(plain) != "" || threadline.CodeOf(plain) != codes.Unknown {
		t.Errorf("plain error: reason %q, code %v", threadline.ReasonOf(plain), threadline.CodeOf(plain))
	}
	if threadline.ReasonOf(nil) != "" || threadline.CodeOf(nil) != codes.OK {
		t.Error("nil error has a reason or a code")
	}
	// A status without ErrorInfo (e.g. gRPC's own message-size limit) has a code, no reason.
	e := threadline.FromError(status.Error(codes.ResourceExhausted, "message too large"))
	if e.Reason() != "" || e.Metadata() != nil || e.Code() != codes.ResourceExhausted {
		t.Errorf("bare status: %v", e)
	}
	if e.Error() != "resource_exhausted: message too large" {
		t.Errorf("Error() = %q", e.Error())
	}
	if threadline.FromError(nil) != nil {
		t.Error("FromError(nil) != nil")
	}
}
