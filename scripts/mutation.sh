#!/usr/bin/env bash
# Mutation testing of polyloop's decision code (docs/explanation/mutation-testing.md).
#
#   scripts/mutation.sh              the whole run: every group of [tool.polyloop-mutation] in
#                                    pyproject.toml, then the hand-written reordering mutants.
#                                    Under an hour on 2 cores.
#   scripts/mutation.sh --slice      the CI slice: the group `slice` (classification and verdict
#                                    functions), a few minutes.
#   scripts/mutation.sh --group NAME one group.
#
# Each group runs mutmut in a scratch copy of the working tree (tracked and new files) with the
# group's modules and fast tests, so runs never share a cache and never touch mutants/. A run
# fails on a mutant no test kills that is not listed in scripts/mutation-equivalent.txt, and on
# a mutant of the mutated modules that no group ran. The per-group results are kept in
# $MUTATION_RESULTS (default .mutation-results/) for `mutmut show`-free reading.
#
# MUTATION_JOBS (default 2) is mutmut's number of workers; everything runs under nice.
# Needs the dev extra (mutmut 3): pip install -e '.[dev]'.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs="${MUTATION_JOBS:-2}"
equivalent="$PWD/scripts/mutation-equivalent.txt"
child="$PWD/scripts/mutation-killed-in-a-child.txt"
check="$PWD/scripts/mutation_check.py"
results="${MUTATION_RESULTS:-$PWD/.mutation-results}"

usage() {
  echo "usage: scripts/mutation.sh [--slice | --group NAME]" >&2
  exit 2
}

run_group() {  # run_group NAME: mutmut over one group in a scratch copy; results in $results/NAME.txt
  local name="$1" work start
  local -a patterns
  mapfile -t patterns < <(python3 "$check" patterns "$name")
  work="$(mktemp -d)"
  start=$SECONDS
  git ls-files -z --cached --others --exclude-standard | tar -cf - --null -T - | tar -xf - -C "$work"
  python3 "$check" configure "$name" "$work/pyproject.toml"
  (
    cd "$work"
    nice -n 19 mutmut run --max-children "$jobs" "${patterns[@]}" >"$work/mutmut.log" 2>&1 || {
      tail -n 60 "$work/mutmut.log" >&2
      echo "mutmut failed in group $name (log above)" >&2
      exit 1
    }
    mutmut results --all True
  ) >"$results/$name.txt"
  # mutmut show needs the scratch copy; keep each surviving mutant's change beside the results.
  (
    cd "$work"
    grep -E ': (survived|no tests|timeout|suspicious|segfault|skipped)$' "$results/$name.txt" |
      sed -E 's/^\s*([^:]+):.*/\1/' | while read -r mutant; do mutmut show "$mutant"; done
  ) >"$results/$name.survivors.diff" 2>&1 || true
  rm -rf "$work"
  echo "group $name: $((SECONDS - start)) s"
}

mkdir -p "$results"
case "${1:-}" in
  --slice)
    [ $# -eq 1 ] || usage
    rm -f "$results"/*.txt
    run_group slice
    python3 "$check" check "$equivalent" --child "$child" "$results/slice.txt"
    ;;
  --group)
    [ $# -eq 2 ] || usage
    rm -f "$results/$2.txt"
    run_group "$2"
    python3 "$check" check "$equivalent" --child "$child" "$results/$2.txt"
    ;;
  "")
    rm -f "$results"/*.txt
    status=0
    mapfile -t groups < <(python3 "$check" groups)
    for name in "${groups[@]}"; do run_group "$name"; done
    files=()
    for name in "${groups[@]}"; do files+=("$results/$name.txt"); done
    python3 "$check" check "$equivalent" --child "$child" "${files[@]}" || status=1
    nice -n 19 python3 scripts/reorder_mutants.py || status=1
    echo "whole run: $SECONDS s"
    exit "$status"
    ;;
  *) usage ;;
esac
