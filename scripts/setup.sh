#!/usr/bin/env bash
# Install everything the project needs, from a fresh clone on a fresh machine (Debian 12 with
# python3 >= 3.11, node 20 / npm, Go 1.26; only package registries reachable: apt installs jq and
# postgresql where missing). Idempotent: a second run skips what is already in place and finishes in
# seconds.
#
#   bash scripts/setup.sh
#
# Afterwards put the tools first on PATH (scripts/generate.sh and scripts/check_contract.sh do it
# themselves):
#   export PATH="$PWD/.venv/bin:$PWD/node_modules/.bin:$(go env GOPATH)/bin:$PATH"
set -euo pipefail

# Go tools, pinned: the versions verified to install with Go 1.26 (TOOLCHAIN §4, §7).
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
GRPCURL_VERSION=v1.9.4

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
step() { printf '==> %s\n' "$*"; }

# --- System tools the tests use: jq and curl (the grpcurl and HTTP walkthroughs), Debian's Chromium (the browser
# tests) and PostgreSQL (the store's tests start
# throwaway clusters with its initdb/pg_ctl; the server itself needs no database server by default) ---
apt_packages=()
command -v jq >/dev/null 2>&1 || apt_packages+=(jq)
command -v curl >/dev/null 2>&1 || apt_packages+=(curl)  # docs/http.md's walkthrough
[ -x /usr/bin/chromium ] || apt_packages+=(chromium)      # the browser tests (playwright-core drives it; no download)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || apt_packages+=(postgresql)
if [ ${#apt_packages[@]} -gt 0 ]; then
  step "apt-get install ${apt_packages[*]}"
  as_root=$([ "$(id -u)" -eq 0 ] || echo sudo)  # CI runs as root; a developer's machine may need sudo
  $as_root apt-get update -qq
  $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_packages[@]}" >/dev/null
fi

# --- Python: .venv at the repo root, the project (editable) with its dev tools -------------------
if [ ! -x .venv/bin/python ]; then
  step "creating .venv"
  python3 -m venv .venv
fi
step "pip install -e '.[dev]'"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
if [ -f clients/python/pyproject.toml ]; then
  step "pip install -e clients/python"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e clients/python
fi

# --- Node: the root generators (protoc-gen-es) and the TypeScript SDK ---------------------------
npm_ci() {  # npm ci in $1, skipped when node_modules was installed after the lock file last changed
  local dir=$1
  if [ -f "$dir/node_modules/.package-lock.json" ] && [ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
    return
  fi
  step "npm ci in $dir"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
}
npm_ci .
if [ -f clients/typescript/package.json ]; then
  npm_ci clients/typescript
fi

# --- Go: protoc plugins and grpcurl into $(go env GOPATH)/bin, then the Go SDK's modules ---------
gobin="$(go env GOPATH)/bin"
go_install() {  # go_install <binary> <package@version> <version check command...>
  local bin=$1 pkg=$2 version
  shift 2
  version=${pkg##*@v}
  if [ -x "$gobin/$bin" ] && "$@" 2>/dev/null | grep -qE "[ v]${version//./\\.}([[:space:]]|\$)"; then
    return
  fi
  step "go install $pkg"
  GOBIN="$gobin" go install "$pkg"
}
go_install protoc-gen-go "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION" \
  "$gobin/protoc-gen-go" --version
go_install protoc-gen-go-grpc "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION" \
  "$gobin/protoc-gen-go-grpc" --version
# grpcurl built by `go install` has no version string; its module version is in the build info.
go_install grpcurl "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION" \
  go version -m "$gobin/grpcurl"
if [ -f clients/go/go.mod ]; then
  step "go mod download in clients/go"
  (cd clients/go && go mod download)
fi

step "done; tools: .venv/bin, node_modules/.bin, $gobin"
