#!/usr/bin/env bash
# The whole test suite, as CI runs it (after scripts/setup.sh): lint and format, strict typing,
# the contract (buf lint/format/generate/breaking), then every test against real servers on loopback.
#
#   bash scripts/setup.sh && bash scripts/test.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export PATH="$root/.venv/bin:$root/node_modules/.bin:$(go env GOPATH)/bin:$PATH"
step() { printf '==> %s\n' "$*"; }

step "ruff check / ruff format --check"
ruff check --output-format concise .
ruff format --check .

step "mypy --strict harness server, and the Python SDK with its own config"
mypy --strict harness server
mypy --config-file clients/python/pyproject.toml clients/python/src/threadline_client

bash scripts/check_contract.sh

step "pytest"
python -m pytest -q tests

step "Python SDK: pytest clients/python (its scenario suite starts its own server)"
python -m pytest -q clients/python

step "TypeScript SDK: typecheck, npm test (its scenario suite starts its own server)"
(cd clients/typescript && npm run --silent typecheck && npm test)

step "Go SDK: go vet, go test (its scenario suite starts its own server)"
(cd clients/go && go vet ./... && go test ./...)
