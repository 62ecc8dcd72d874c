#!/usr/bin/env bash
# Mutation testing of polyloop's decision code (docs/explanation/mutation-testing.md).
#
#   scripts/mutation.sh            the whole run: mutmut over the modules of [tool.mutmut] in
#                                  pyproject.toml (in mutants/, cached between runs), then the
#                                  hand-written reordering mutants. Under an hour on 2 cores.
#   scripts/mutation.sh --slice    the CI slice: the classification and verdict functions
#                                  ([tool.polyloop-mutation-slice]), in a scratch copy, a few
#                                  minutes; fails on a mutant no test kills that is not listed
#                                  in scripts/mutation-equivalent.txt.
#
# MUTATION_JOBS (default 2) is mutmut's number of workers; everything runs under nice.
# Needs the dev extra (mutmut 3): pip install -e '.[dev]'.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs="${MUTATION_JOBS:-2}"
equivalent="$PWD/scripts/mutation-equivalent.txt"
check="$PWD/scripts/mutation_check.py"

if [ "${1:-}" = "--slice" ]; then
  mapfile -t patterns < <(python3 "$check" slice-patterns)
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  # The working tree as it is (tracked and new files), without mutmut's own cache.
  git ls-files -z --cached --others --exclude-standard | tar -cf - --null -T - | tar -xf - -C "$work"
  python3 "$check" configure-slice "$work/pyproject.toml"
  (
    cd "$work"
    nice -n 19 mutmut run --max-children "$jobs" "${patterns[@]}" >"$work/mutmut.log" 2>&1 || {
      tail -n 60 "$work/mutmut.log"
      echo "mutmut failed (log above)" >&2
      exit 1
    }
    mutmut results --all True
  ) | python3 "$check" check "$equivalent" "${patterns[@]}"
  exit
fi

if [ $# -gt 0 ]; then
  echo "usage: scripts/mutation.sh [--slice]" >&2
  exit 2
fi
nice -n 19 mutmut run --max-children "$jobs"
status=0
mutmut results --all True | python3 "$check" check "$equivalent" '*' || status=1
nice -n 19 python3 scripts/reorder_mutants.py || status=1
exit "$status"
