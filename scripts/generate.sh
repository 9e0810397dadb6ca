#!/usr/bin/env bash
# Regenerate every file derived from the contract: the protobuf/gRPC code of buf.gen.yaml
# (Python server, Python/Go/TypeScript SDKs), the TypeScript google.rpc types of
# buf.gen.googleapis.yaml, and proto/threadline/v1/history.schema.json. Run scripts/setup.sh first.
# The output is deterministic: running it twice leaves no diff.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export PATH="$root/.venv/bin:$root/node_modules/.bin:$(go env GOPATH)/bin:$PATH"

# betterproto2's compiler prints one "Writing <file>" line per file; keep only real messages.
buf generate 2> >(grep -v '^Writing ' >&2)
buf generate --template buf.gen.googleapis.yaml
python scripts/history_schema.py
