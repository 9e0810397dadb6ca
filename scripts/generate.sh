#!/usr/bin/env bash
# Regenerate every file derived from the contract: the protobuf/gRPC code of buf.gen.yaml
# (Python server, Python/Go/TypeScript SDKs), the contract's descriptor set with its comments (what
# the server's reflection serves), the TypeScript google.rpc types of buf.gen.googleapis.yaml, and
# proto/threadline/v1/history.schema.json. Run scripts/setup.sh first.
# The output is deterministic: running it twice leaves no diff.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export PATH="$root/.venv/bin:$root/node_modules/.bin:$(go env GOPATH)/bin:$PATH"

# betterproto2's compiler prints one "Writing <file>" line per file, and protoc warns that the
# service files' import of google/rpc/error_details.proto is unused (on purpose: buf.yaml says why);
# keep only real messages.
buf generate 2> >(grep -v -e '^Writing ' -e ': warning: Import google/rpc/error_details.proto is unused\.$' >&2)
# What the server's reflection serves: every file of the workspace (the contract, and the google.rpc
# details its error statuses carry, which grpcurl decodes by reflection) with imports and comments,
# which protoc's Python output leaves out. Shipped in the `threadline` package; written after
# `buf generate`, whose `clean: true` empties gen/python first.
buf build --as-file-descriptor-set -o gen/python/threadline/v1/descriptors.binpb
buf generate --template buf.gen.googleapis.yaml
python scripts/history_schema.py
