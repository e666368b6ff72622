#!/usr/bin/env bash
# The module layering written in README ("Architecture"): which module may include
# which. Each module folder is scanned for #include lines that reach a module it must
# not depend on; every offending line is printed and the exit status is 1.
#
#   core/      -> nothing of the project
#   planner/   -> core (sim only as a cost oracle)
#   sim/       -> core
#   runtime/   -> core
#   experiments/, tests/ -> anything
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || { echo "check-layering: no such folder: $root" >&2; exit 2; }

declare -A forbidden=(
  [core]="planner sim runtime experiments"
  [planner]="runtime experiments"
  [sim]="planner runtime experiments"
  [runtime]="planner sim experiments"
)
status=0
for module in core planner sim runtime; do
  [ -d "$module" ] || continue
  for other in ${forbidden[$module]}; do
    hits=$(grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<]$other/" "$module" \
             --include='*.h' --include='*.cc' --include='*.cu' --include='*.cuh' 2>/dev/null)
    if [ -n "$hits" ]; then
      printf 'layering: %s/ includes %s/, which it must not depend on:\n%s\n' \
        "$module" "$other" "$(sed 's/^/  /' <<<"$hits")"
      status=1
    fi
  done
done
[ $status -eq 0 ] && echo "layering: ok"
exit $status
