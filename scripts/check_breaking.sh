#!/usr/bin/env bash
# `buf breaking` of the work tree against the previous commit, the contract's FILE rules (buf.yaml).
# Runs in the git repository of the current directory; scripts/check_contract.sh calls it, with buf
# on PATH.
#
# The per-language file options every .proto sets (docs/sdks.md, "The contract") changed once from
# their defaults, before any release, when they were set, which FILE_SAME_<OPTION> flags. That change is
# waived mechanically, not by a standing `except`: only when the baseline sets none of these
# options (it predates them), and only those rules. Every later baseline sets them, so from the
# next commit on the whole FILE category applies again, to these options too.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
step() { printf '==> %s\n' "$*"; }

file_options=(csharp_namespace go_package java_multiple_files java_outer_classname java_package
  objc_class_prefix php_namespace ruby_package)

# On the commit that adds the contract, HEAD~1 has no proto/ and `buf breaking` would fail with
# "had no .proto files" (TOOLCHAIN §3); with no HEAD~1 at all (a shallow or one-commit clone)
# there is nothing to compare either.
if ! git rev-parse --verify --quiet 'HEAD~1^{commit}' >/dev/null ||
  [ -z "$(git ls-tree -d HEAD~1 proto 2>/dev/null)" ]; then
  step "buf breaking skipped: HEAD~1 is missing or has no proto/"
  exit 0
fi

if git grep -q -E "^option ($(IFS='|' && echo "${file_options[*]}")) =" HEAD~1 -- proto; then
  step "buf breaking --against .git#ref=HEAD~1"
  exec buf breaking --against '.git#ref=HEAD~1'
fi

step "buf breaking --against .git#ref=HEAD~1, waiving FILE_SAME_* of the file options HEAD~1 predates"
rc=0
found=$(buf breaking --against '.git#ref=HEAD~1' --error-format json) || rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 100 ]; then # 100: violations found; anything else: no check ran
  printf '%s\n' "$found" >&2
  exit "$rc"
fi
FOUND="$found" WAIVED="$(printf 'FILE_SAME_%s ' "${file_options[@]^^}")" python - <<'PY'
import json
import os
import sys

waived = set(os.environ["WAIVED"].split())
kept = [v for v in map(json.loads, os.environ["FOUND"].splitlines()) if v["type"] not in waived]
for v in kept:
    print(f"{v['path']}:{v.get('start_line', 0)}:{v.get('start_column', 0)}:{v['message']} ({v['type']})")
sys.exit(1 if kept else 0)
PY
