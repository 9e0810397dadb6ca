#!/usr/bin/env bash
# Check the contract the way CI does: lint, formatting, freshly generated code, and (from the second
# commit that has proto/ on) no breaking change against the previous commit. Exits non-zero on the
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

# On the commit that adds the contract, HEAD~1 has no proto/ and `buf breaking` would fail with
# "had no .proto files" (TOOLCHAIN §3); with no HEAD~1 at all (a shallow or one-commit clone)
# there is nothing to compare either.
if git rev-parse --verify --quiet 'HEAD~1^{commit}' >/dev/null &&
  [ -n "$(git ls-tree -d HEAD~1 proto 2>/dev/null)" ]; then
  step "buf breaking --against .git#ref=HEAD~1"
  buf breaking --against '.git#ref=HEAD~1'
else
  step "buf breaking skipped: HEAD~1 is missing or has no proto/"
fi
step "contract OK"
