package threadline

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"unicode"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Domain is the google.rpc.ErrorInfo domain of every error the server raises on purpose.
const Domain = "threadline"

// Reasons: the ErrorInfo reason of a server error, which is the core's stable error code in
// UPPER_SNAKE. Branch on these (with ReasonOf), not on messages. The server's catalogue
// (docs/errors.md) is the full list; reasons added later arrive as new strings.
const (
	// INVALID_ARGUMENT
	ReasonInputEmpty                     = "INPUT_EMPTY"
	ReasonInputInvalid                   = "INPUT_INVALID"
	ReasonToolRecoveryInvalid            = "TOOL_RECOVERY_INVALID"
	ReasonStateInvalid                   = "STATE_INVALID"
	ReasonDeferredResumeInvalid          = "DEFERRED_RESUME_INVALID"
	ReasonDeferredRequestInvalid         = "DEFERRED_REQUEST_INVALID"
	ReasonDeferredRequestDuplicate       = "DEFERRED_REQUEST_DUPLICATE"
	ReasonDeferredRequestCategoryOverlap = "DEFERRED_REQUEST_CATEGORY_OVERLAP"
	ReasonDeferredRequestsEmpty          = "DEFERRED_REQUESTS_EMPTY"
	ReasonDeferredMetadataInvalid        = "DEFERRED_METADATA_INVALID"
	ReasonDeferredResultsIncomplete      = "DEFERRED_RESULTS_INCOMPLETE"
	ReasonDeferredApprovalInvalid        = "DEFERRED_APPROVAL_INVALID"
	ReasonDeferredResultsInvalid         = "DEFERRED_RESULTS_INVALID"
	ReasonForkThreadIDConflict           = "FORK_THREAD_ID_CONFLICT"
	ReasonClientToolInvalid              = "CLIENT_TOOL_INVALID"
	ReasonAgentUnknown                   = "AGENT_UNKNOWN"
	ReasonHistoryDigestMismatch          = "HISTORY_DIGEST_MISMATCH"
	ReasonRequestUndecodable             = "REQUEST_UNDECODABLE"
	// An environment state of the server's own provider is malformed (metadata "mount").
	ReasonEnvironmentStateInvalid = "ENVIRONMENT_STATE_INVALID"
	// RunSpec.Lineage is malformed (metadata "field").
	ReasonChildLineageInvalid = "CHILD_LINEAGE_INVALID"

	// FAILED_PRECONDITION
	ReasonSchemaVersionUnsupported = "SCHEMA_VERSION_UNSUPPORTED"
	ReasonHistoryFormatUnsupported = "HISTORY_FORMAT_UNSUPPORTED"
	ReasonStateStoreMissing        = "STATE_STORE_MISSING"
	ReasonDeferredStateRequired    = "DEFERRED_STATE_REQUIRED"
	ReasonDeferredRequestMissing   = "DEFERRED_REQUEST_MISSING"
	ReasonDeferredRequestCompleted = "DEFERRED_REQUEST_COMPLETED"
	ReasonDeferredRequestMismatch  = "DEFERRED_REQUEST_MISMATCH"
	ReasonDeferredStateInvalid     = "DEFERRED_STATE_INVALID"
	ReasonDeferredSurfaceMismatch  = "DEFERRED_SURFACE_MISMATCH"
	// An environment state of the server's own provider has a version it does not read
	// (metadata "mount", "received", "supported").
	ReasonEnvironmentStateVersionUnsupported = "ENVIRONMENT_STATE_VERSION_UNSUPPORTED"
	// A deferred resume answers a Host-managed child request with something other than its child
	// answer or a failure (metadata "tool_call_id").
	ReasonChildResultInvalid = "CHILD_RESULT_INVALID"
	// RunSpec.Lineage.ParentAgent declares no host-mode child SubagentName whose agent is
	// RunSpec.Agent (metadata "parent_agent", "subagent", "agent"); a server reason.
	ReasonChildEdgeUnknown = "CHILD_EDGE_UNKNOWN"

	// RESOURCE_EXHAUSTED
	ReasonDeferredRequestsTooLarge = "DEFERRED_REQUESTS_TOO_LARGE"
	ReasonRunLimitReached          = "RUN_LIMIT_REACHED"
	ReasonResponseTooLarge         = "RESPONSE_TOO_LARGE"
	// --max-followers joins, attached retries and watches already follow runs on this replica
	// (metadata "limit"); a server reason, typed *FollowerLimitReachedError.
	ReasonFollowerLimitReached = "FOLLOWER_LIMIT_REACHED"

	// UNAVAILABLE
	ReasonServerShuttingDown = "SERVER_SHUTTING_DOWN"

	// ThreadService (threads)
	ReasonThreadNotFound     = "THREAD_NOT_FOUND"
	ReasonCheckpointNotFound = "CHECKPOINT_NOT_FOUND"
	ReasonRunNotFound        = "RUN_NOT_FOUND"
	ReasonThreadExists       = "THREAD_EXISTS"
	ReasonRequestIDReused    = "REQUEST_ID_REUSED"
	ReasonThreadNotSuspended = "THREAD_NOT_SUSPENDED"
	ReasonRequestInterrupted = "REQUEST_INTERRUPTED"
	ReasonThreadBusy         = "THREAD_BUSY"
	ReasonThreadQueueFull    = "THREAD_QUEUE_FULL"
	ReasonRevisionConflict   = "REVISION_CONFLICT"
	ReasonLeaseLost          = "LEASE_LOST"
	ReasonStoreUnavailable   = "STORE_UNAVAILABLE"
	ReasonListenerTooSlow    = "LISTENER_TOO_SLOW"
	ReasonRunAttemptLost     = "RUN_ATTEMPT_LOST"
	ReasonRunEventsExpired   = "RUN_EVENTS_EXPIRED"

	// UNAUTHENTICATED
	ReasonTokenMissing = "TOKEN_MISSING"
	ReasonTokenInvalid = "TOKEN_INVALID"

	// INTERNAL
	ReasonInternalError    = "INTERNAL_ERROR"
	ReasonRunResultMissing = "RUN_RESULT_MISSING"
	ReasonRunCleanupFailed = "RUN_CLEANUP_FAILED"
)

// Error is an error status the server (or gRPC itself) returned: its code and message, and the
// google.rpc.ErrorInfo and google.rpc.BadRequest details parsed from the status. Every call of a
// Client returns its RPC errors as *Error; use errors.As, or ReasonOf and CodeOf, which look
// through wrapping.
//
// Errors gRPC raises itself (an unreachable server, a message-size limit, a cancelled context)
// have a code but no reason.
type Error struct {
	status     *status.Status
	info       *errdetails.ErrorInfo
	violations []*errdetails.BadRequest_FieldViolation
}

// FromError converts an error returned by the generated client (a gRPC status error) into an
// *Error. It returns nil for nil; an error that carries no status becomes an *Error with
// codes.Unknown whose message is err's text.
func FromError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	st := status.Convert(err)
	e = &Error{status: st}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if e.info == nil {
				e.info = d
			}
		case *errdetails.BadRequest:
			e.violations = append(e.violations, d.GetFieldViolations()...)
		}
	}
	return e
}

// Error returns "<code>: <REASON>: <message>", e.g.
// "failed_precondition: SCHEMA_VERSION_UNSUPPORTED: ...". The reason is left out when there is none.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(codeName(e.Code()))
	if r := e.Reason(); r != "" {
		b.WriteString(": ")
		b.WriteString(r)
	}
	if m := e.Message(); m != "" {
		b.WriteString(": ")
		b.WriteString(m)
	}
	return b.String()
}

// Code returns the gRPC status code.
func (e *Error) Code() codes.Code { return e.status.Code() }

// Message returns the status message, without code or reason. The server writes it for people;
// branch on Reason instead.
func (e *Error) Message() string { return e.status.Message() }

// Reason returns the ErrorInfo reason (e.g. ReasonSchemaVersionUnsupported), or "" when the
// status carries no ErrorInfo.
func (e *Error) Reason() string { return e.info.GetReason() }

// Domain returns the ErrorInfo domain (Domain for the server's own errors), or "".
func (e *Error) Domain() string { return e.info.GetDomain() }

// Metadata returns a copy of the ErrorInfo metadata, e.g. {"received": "999", "supported": "1"}
// for ReasonSchemaVersionUnsupported. Values that are not strings on the server arrive as
// canonical JSON text. It is nil when the status carries no ErrorInfo.
func (e *Error) Metadata() map[string]string {
	if e.info == nil {
		return nil
	}
	return maps.Clone(e.info.GetMetadata())
}

// FieldViolations returns the google.rpc.BadRequest field violations, whose Field is a path of
// proto field names such as "spec.previous_state.thread_id".
func (e *Error) FieldViolations() []*errdetails.BadRequest_FieldViolation {
	return e.violations
}

// Details returns every detail of the status, including kinds this package does not parse.
func (e *Error) Details() []any { return e.status.Details() }

// GRPCStatus returns the underlying status, so status.FromError and status.Code work on an
// *Error (and on errors wrapping one).
func (e *Error) GRPCStatus() *status.Status { return e.status }

// ReasonOf returns the ErrorInfo reason of err, looking through wrapping, or "" when err is not
// (and does not wrap) an *Error with a reason.
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason()
	}
	return ""
}

// CodeOf returns the gRPC code of err, looking through wrapping: codes.OK for nil, and
// codes.Unknown for errors that did not come from an RPC.
func CodeOf(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return codes.Unknown
}

// ProtocolError reports that the server's answer broke the contract: the SDK found it, and the
// server sent no such status. A stream that ended without its terminal result, a response
// without events or without a field the contract requires, a checkpoint delta that does not
// rebuild to its SHA-256: a conforming server never causes one, so retrying will not help; it
// points to a bug in the server or in something between the two.
//
// It is a kind of *Error: its code is codes.Internal (as gRPC reports protocol violations), it has
// no reason, metadata or details, and Message says what broke. It wraps that *Error, so
// errors.As(err, &e) with an *Error, CodeOf, ReasonOf and status.Code treat it like any other;
// errors.As with a *ProtocolError tells the two apart. errors.Is also matches ErrNoResult,
// ErrNoEvent or ErrCheckpointDelta when that is what broke.
type ProtocolError struct {
	err  *Error
	kind error // ErrNoResult, ErrNoEvent, ErrCheckpointDelta, or nil
}

// protocolError returns a *ProtocolError of kind (nil for none) whose message is format's.
func protocolError(kind error, format string, args ...any) *ProtocolError {
	return &ProtocolError{err: &Error{status: status.New(codes.Internal, fmt.Sprintf(format, args...))}, kind: kind}
}

// Error returns "internal: <message>", as an *Error without a reason writes itself.
func (e *ProtocolError) Error() string { return e.err.Error() }

// Code returns codes.Internal.
func (e *ProtocolError) Code() codes.Code { return e.err.Code() }

// Message returns what broke, e.g. "the stream ended without its terminal result".
func (e *ProtocolError) Message() string { return e.err.Message() }

// Reason returns "": the server sent no ErrorInfo.
func (e *ProtocolError) Reason() string { return "" }

// GRPCStatus returns the codes.Internal status the error stands for, so status.Code works on it.
func (e *ProtocolError) GRPCStatus() *status.Status { return e.err.GRPCStatus() }

// Unwrap returns the *Error it is, and the sentinel of what broke if there is one.
func (e *ProtocolError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.err}
	}
	return []error{e.err, e.kind}
}

// wrap returns err as an *Error, keeping a nil error nil.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	return FromError(err)
}

// codeName writes a code the way the gRPC spec names it, in lower case: FailedPrecondition ->
// "failed_precondition".
func codeName(c codes.Code) string {
	if c > codes.Unauthenticated {
		return c.String() // "Code(17)"
	}
	var b strings.Builder
	for i, r := range c.String() {
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
