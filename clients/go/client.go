package threadline

import (
	"context"
	"crypto/tls"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// Default per-call timeouts. They apply only when the caller's context has no deadline of its
// own, so nothing waits forever by default; WithTimeout and WithRunTimeout change them.
const (
	// DefaultTimeout bounds the envelope and info calls (NewState, ForkState, ...).
	DefaultTimeout = 30 * time.Second
	// DefaultRunTimeout bounds Run and a whole StreamRun stream.
	DefaultRunTimeout = 10 * time.Minute
	// DefaultMaxMessageBytes is the largest message the client sends or receives, the server's
	// own default (`--max-message-bytes`). gRPC's default of 4 MiB would refuse a result whose
	// state carries a long history.
	DefaultMaxMessageBytes = 64 << 20
	// DefaultMaxEventsPerMessage is how many events one StreamRun response may carry unless
	// WithMaxEventsPerMessage says otherwise.
	DefaultMaxEventsPerMessage = 64
)

// Option configures a Client in Dial.
type Option func(*options)

type options struct {
	tls         *tls.Config
	token       string
	timeout     time.Duration
	runTimeout  time.Duration
	maxMessage  int
	maxEvents   uint32
	dialOptions []grpc.DialOption
}

// WithTLS connects over TLS with cfg; a nil cfg uses the system roots. Without it the client
// connects in plaintext, which suits a server on loopback.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) {
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		o.tls = cfg
	}
}

// WithToken sends token as a bearer token (`authorization: Bearer <token>`) on every call, for a
// server started with --token. Over plaintext it is sent in the clear: use it with WithTLS unless
// the server is on loopback.
func WithToken(token string) Option {
	return func(o *options) { o.token = token }
}

// WithTimeout sets the timeout of the envelope and info calls whose context has no deadline
// (default DefaultTimeout). Zero means no timeout.
func WithTimeout(d time.Duration) Option {
	return func(o *options) { o.timeout = d }
}

// WithRunTimeout sets the timeout of Run and StreamRun calls whose context has no deadline
// (default DefaultRunTimeout). Zero means no timeout. An expired timeout cancels the run on the
// server and ends the call with codes.DeadlineExceeded; there is no result.
func WithRunTimeout(d time.Duration) Option {
	return func(o *options) { o.runTimeout = d }
}

// WithMaxMessageBytes sets the largest message the client sends or receives (default
// DefaultMaxMessageBytes). A larger one fails with codes.ResourceExhausted and no reason.
func WithMaxMessageBytes(n int) Option {
	return func(o *options) { o.maxMessage = n }
}

// WithMaxEventsPerMessage sets how many events one StreamRun response may carry (default
// DefaultMaxEventsPerMessage). The server packs events that are ready at once into one response
// and never holds an event back to fill one, so a reader that falls behind gets fewer, larger
// messages. 0 or 1 turns packing off; the server takes at most 256. RunStream hands out one
// event at a time either way.
func WithMaxEventsPerMessage(n uint32) Option {
	return func(o *options) { o.maxEvents = n }
}

// WithDialOptions passes extra options to grpc.NewClient, e.g. interceptors or message size
// limits. They are applied after the SDK's own; the host's interceptors run before the SDK's,
// which adds the trace context (see Tracing in the README), so a span one of them starts is the
// one the server continues.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOptions = append(o.dialOptions, opts...) }
}

// Client calls a Threadline server. It is safe for concurrent use; Close it when done.
type Client struct {
	conn       *grpc.ClientConn
	svc        threadlinev1.HarnessServiceClient
	timeout    time.Duration
	runTimeout time.Duration
	maxEvents  uint32
}

// Dial creates a client for the server at addr ("host:port"). Like grpc.NewClient it does not
// connect yet: the first call does, so an unreachable server shows up as that call's
// codes.Unavailable error.
func Dial(addr string, opts ...Option) (*Client, error) {
	o := options{
		timeout:    DefaultTimeout,
		runTimeout: DefaultRunTimeout,
		maxMessage: DefaultMaxMessageBytes,
		maxEvents:  DefaultMaxEventsPerMessage,
	}
	for _, opt := range opts {
		opt(&o)
	}
	dial := make([]grpc.DialOption, 0, 5+len(o.dialOptions))
	dial = append(dial, grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(o.maxMessage),
		grpc.MaxCallSendMsgSize(o.maxMessage),
	))
	if o.tls != nil {
		dial = append(dial, grpc.WithTransportCredentials(credentials.NewTLS(o.tls)))
	} else {
		dial = append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if o.token != "" {
		dial = append(dial, grpc.WithPerRPCCredentials(bearer{token: o.token, secure: o.tls != nil}))
	}
	dial = append(dial, o.dialOptions...)
	dial = append(dial, traceInterceptors()...) // last: after any interceptor of the host's
	conn, err := grpc.NewClient(addr, dial...)
	if err != nil {
		return nil, err
	}
	return &Client{
		conn:       conn,
		svc:        threadlinev1.NewHarnessServiceClient(conn),
		timeout:    o.timeout,
		runTimeout: o.runTimeout,
		maxEvents:  o.maxEvents,
	}, nil
}

// Close closes the connection. Calls in flight fail with codes.Canceled.
func (c *Client) Close() error {
	return c.conn.Close()
}

// Service returns the generated client on the same connection, for calls this package does not
// wrap. Its errors are plain gRPC statuses; FromError turns one into an *Error.
func (c *Client) Service() threadlinev1.HarnessServiceClient {
	return c.svc
}

// Run runs spec and returns only the terminal result. A run that fails after it started is not an
// error: check result.GetStatus(). Errors before the run starts are *Error values; a response
// without its result is a *ProtocolError.
func (c *Client) Run(ctx context.Context, spec *RunSpec) (*RunResult, error) {
	ctx, cancel := withDefaultTimeout(ctx, c.runTimeout)
	defer cancel()
	resp, err := c.svc.Run(ctx, &threadlinev1.RunRequest{Spec: spec})
	if err != nil {
		return nil, wrap(err)
	}
	if resp.GetResult() == nil {
		return nil, missing("RunResponse.result")
	}
	return resp.GetResult(), nil
}

// NewState returns the envelope of a new, empty thread. An empty threadID lets the server
// generate one (`thread_<32 lowercase hex>`); use the generated client's NewState to start from a
// history or capability states.
func (c *Client) NewState(ctx context.Context, threadID string) (*HarnessState, error) {
	ctx, cancel := withDefaultTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.svc.NewState(ctx, &threadlinev1.NewStateRequest{ThreadId: threadID})
	if err != nil {
		return nil, wrap(err)
	}
	if resp.GetState() == nil {
		return nil, missing("NewStateResponse.state")
	}
	return resp.GetState(), nil
}

// ForkState branches a thread from the checkpoint state: a new thread with the same history,
// capability states, refs and extra keys (environment states are cleared). An empty threadID lets
// the server generate one; state's own thread ID fails with ReasonForkThreadIDConflict.
func (c *Client) ForkState(ctx context.Context, state *HarnessState, threadID string) (*HarnessState, error) {
	ctx, cancel := withDefaultTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.svc.ForkState(ctx, &threadlinev1.ForkStateRequest{State: state, ThreadId: threadID})
	if err != nil {
		return nil, wrap(err)
	}
	if resp.GetState() == nil {
		return nil, missing("ForkStateResponse.state")
	}
	return resp.GetState(), nil
}

// ValidatedState is the answer of ValidateState: the same state in both of its stored forms.
type ValidatedState struct {
	// State is the envelope as the server re-encoded it; store this form.
	State *HarnessState
	// JSON is the harness state JSON (`HarnessState.model_dump_json()` of the core),
	// byte-identical for equal states.
	JSON string
}

// ValidateState checks state exactly as a run would (versions, history digest, shape) and
// returns it in both forms. An invalid state is an *Error, e.g. ReasonSchemaVersionUnsupported.
func (c *Client) ValidateState(ctx context.Context, state *HarnessState) (*ValidatedState, error) {
	return c.validate(ctx, &threadlinev1.ValidateStateRequest{
		Source: &threadlinev1.ValidateStateRequest_State{State: state},
	})
}

// ValidateStateJSON is ValidateState for a state stored as harness state JSON.
func (c *Client) ValidateStateJSON(ctx context.Context, stateJSON string) (*ValidatedState, error) {
	return c.validate(ctx, &threadlinev1.ValidateStateRequest{
		Source: &threadlinev1.ValidateStateRequest_StateJson{StateJson: stateJSON},
	})
}

func (c *Client) validate(ctx context.Context, req *threadlinev1.ValidateStateRequest) (*ValidatedState, error) {
	ctx, cancel := withDefaultTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.svc.ValidateState(ctx, req)
	if err != nil {
		return nil, wrap(err)
	}
	if resp.GetState() == nil {
		return nil, missing("ValidateStateResponse.state")
	}
	return &ValidatedState{State: resp.GetState(), JSON: resp.GetStateJson()}, nil
}

// RemainingDeferred returns the part of an accepted resume that state's history has not yet
// incorporated, or nil when nothing remains.
func (c *Client) RemainingDeferred(ctx context.Context, resume *DeferredToolResume, state *HarnessState) (*DeferredToolResume, error) {
	ctx, cancel := withDefaultTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.svc.RemainingDeferred(ctx, &threadlinev1.RemainingDeferredRequest{Resume: resume, State: state})
	if err != nil {
		return nil, wrap(err)
	}
	return resp.GetRemaining(), nil
}

// ServerInfo describes what the server supports: state versions, history formats, agents (with
// their tools and shell mounts, AgentInfo.Mounts), limits, and the environment providers whose
// state versions it reads (EnvironmentProviders).
func (c *Client) ServerInfo(ctx context.Context) (*threadlinev1.GetServerInfoResponse, error) {
	ctx, cancel := withDefaultTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.svc.GetServerInfo(ctx, &threadlinev1.GetServerInfoRequest{})
	if err != nil {
		return nil, wrap(err)
	}
	return resp, nil
}

// missing is the *ProtocolError of a response without a field the contract requires.
func missing(field string) *ProtocolError {
	return protocolError(nil, "the server's response has no %s", field)
}

// withDefaultTimeout bounds ctx by d unless ctx already has a deadline or d is zero.
func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if ctx == nil {
		panic(errors.New("threadline: nil context"))
	}
	if _, ok := ctx.Deadline(); ok || d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// bearer sends a bearer token with every call.
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is false over plaintext so a token also works with a loopback server.
func (b bearer) RequireTransportSecurity() bool { return b.secure }
