package threadline

import (
	"bytes"
	"crypto/sha256"
	"errors"

	threadlinev1 "github.com/threadline-dev/threadline/clients/go/gen/threadline/v1"
)

// Checkpoint candidates in CHECKPOINT_FORM_DELTA. StreamRun asks for that form whenever a spec
// wants checkpoints and leaves the form open, because full candidates each repeat the whole
// history: a run's candidates together grow with the square of its length. RunStream rebuilds
// every delta candidate's `message_history.data` before handing it out, so hosts still see
// complete states.

// ErrCheckpointDelta is what errors.Is matches in the *ProtocolError of a checkpoint candidate
// whose `history_delta` does not rebuild its history: no `state.message_history` to rebuild,
// `keep_bytes` beyond the base's length, or rebuilt data whose SHA-256 is not the state's
// `message_history.sha256`. A conforming server never sends one. It ends the stream and cancels
// the run; the error's message names the candidate's sequence.
var ErrCheckpointDelta = errors.New("threadline: checkpoint candidate's history delta does not rebuild its history")

// emptyHistory is the base of a stream's first delta candidate when the spec has no previous state.
const emptyHistory = "[]"

// withDeltaCheckpoints returns spec, or a copy of it with CHECKPOINT_FORM_DELTA when it asks for
// checkpoints and leaves the form unspecified. The copy is shallow (its fields point to spec's
// values, the previous state's history included) and spec itself is not changed: a host may
// reuse its spec in several calls, or hold it elsewhere.
func withDeltaCheckpoints(spec *RunSpec) *RunSpec {
	if !spec.GetCheckpoints() || spec.GetCheckpointForm() != threadlinev1.CheckpointForm_CHECKPOINT_FORM_UNSPECIFIED {
		return spec
	}
	out := &RunSpec{}
	src, dst := spec.ProtoReflect(), out.ProtoReflect()
	for fd, v := range src.Range {
		dst.Set(fd, v)
	}
	dst.SetUnknown(src.GetUnknown())
	out.CheckpointForm = threadlinev1.CheckpointForm_CHECKPOINT_FORM_DELTA
	return out
}

// firstHistoryBase is what the first delta candidate of a stream for spec edits: the previous
// state's `message_history.data` exactly as sent, or "[]" without a previous state.
func firstHistoryBase(spec *RunSpec) string {
	if spec.GetPreviousState() == nil {
		return emptyHistory
	}
	return spec.GetPreviousState().GetMessageHistory().GetData()
}

// rebuildHistory returns the `message_history.data` of ev's checkpoint candidate, whose
// `history_delta` edits base, after checking it against the state's digest. ev must be a
// candidate with a history delta. The error is a *ProtocolError matching ErrCheckpointDelta.
func rebuildHistory(base string, ev *RunEvent) (string, error) {
	broken := func(why string, args ...any) error {
		return protocolError(ErrCheckpointDelta, "the checkpoint candidate at sequence %d does not rebuild: "+why,
			append([]any{ev.GetSequence()}, args...)...)
	}
	cc := ev.GetCheckpointCandidate()
	history := cc.GetState().GetMessageHistory()
	if history == nil {
		return "", broken("its history_delta has no state.message_history to rebuild")
	}
	keep := cc.GetHistoryDelta().GetKeepBytes()
	if keep > uint64(len(base)) {
		return "", broken("its history_delta keeps %d bytes of a base that has %d", keep, len(base))
	}
	data := base[:keep] + cc.GetHistoryDelta().GetAppend()
	sum := sha256.Sum256([]byte(data))
	if !bytes.Equal(sum[:], history.GetSha256()) {
		return "", broken("its rebuilt history does not match message_history.sha256")
	}
	return data, nil
}

// candidateHistory completes the checkpoint candidates of one stream, keeping the history data
// of the last one as the base of the next delta.
type candidateHistory struct {
	base string
}

// complete fills in the history data of ev when it is a delta candidate. Any other event passes
// unchanged; a full candidate only becomes the next base.
func (h *candidateHistory) complete(ev *RunEvent) error {
	cc := ev.GetCheckpointCandidate()
	if cc == nil {
		return nil
	}
	if cc.GetHistoryDelta() == nil {
		h.base = cc.GetState().GetMessageHistory().GetData()
		return nil
	}
	data, err := rebuildHistory(h.base, ev)
	if err != nil {
		return err
	}
	cc.GetState().GetMessageHistory().Data = data // rebuildHistory checked that it is there
	h.base = data
	return nil
}
