#!/usr/bin/env bash
# Check the contract the way CI does: lint, formatting, freshly generated code, and (from the second
# commit that has proto/ on) no breaking change against the previous commit (scripts/check_breaking.sh). Exits non-zero on the
# first failure. Run scripts/setup.sh first.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export PATH="$root/.venv/bin:$root/node_modules/.bin:$(go env GOPATH)/bin:$PATH"
step() { printf '==> %s\n' "$*"; }

step "buf lint"
buf lint

step "buf format --diff --exit-code"
buf format --diff --exit-code

step "generate, then check that nothing changed"
bash scripts/generate.sh
generated=(
  gen/python
  clients/python/src/threadline_client/_gen
  clients/go/gen
  clients/typescript/src/gen
  clients/typescript/src/googleapis
  proto/threadline/v1/history.schema.json
)
if ! git diff --exit-code --stat -- "${generated[@]}"; then
  echo "generated code is stale: run scripts/generate.sh and commit the result" >&2
  exit 1
fi
untracked=$(git ls-files --others --exclude-standard -- "${generated[@]}")
if [ -n "$untracked" ]; then
  printf 'generated files not committed:\n%s\n' "$untracked" >&2
  exit 1
fi

bash scripts/check_breaking.sh
step "contract OK"
