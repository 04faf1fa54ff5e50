#!/usr/bin/env bash
# Plans every model file in a folder (`fusetune plan`, no GPU) and prints one line per model: its
# kernel groups, the distinct kernels among them (the others run one of these: best.json's
# same_as) by family, or the error that stopped it. For checking how much of a model
# collection (e.g. KernelBench's levels) fusetune lowers: bash scripts/plan_survey.sh DIR
# (FUSETUNE_SURVEY_TIMEOUT: seconds per model, default 600; capture runs the model's get_inputs()
# on the CPU, which takes a while for large inputs).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: plan_survey.sh DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
planned=0 refused=0
for model in "$dir"/*.py; do
  name=$(basename "$model" .py)
  timeout "${FUSETUNE_SURVEY_TIMEOUT:-600}" "$ROOT/build/fusetune" plan --model "$model" --out "$work/$name" \
    > "$work/plan.json" 2> "$work/err"
  rc=$?
  if [ "$rc" = 0 ]; then
    planned=$((planned + 1))
    echo "ok     $name: $(python3 -c '
import collections, json, sys
groups = json.load(open(sys.argv[1]))["groups"]
searched = [g for g in groups if "same_as" not in g]
families = collections.Counter(g["family"] for g in searched)
print("%d groups, %d distinct kernels (%s)" % (len(groups), len(searched), ", ".join("%s %d" % f for f in sorted(families.items()))))' "$work/plan.json")"
  else
    refused=$((refused + 1))
    if [ "$rc" = 124 ]; then
      reason="not planned within ${FUSETUNE_SURVEY_TIMEOUT:-600} s"
    else
      reason=$(grep -m1 '^error' "$work/err" || grep -v '^$' "$work/err" | tail -1)  # past any warnings
    fi
    echo "error  $name: $reason"
  fi
  rm -rf "${work:?}/$name"
done
echo "$planned planned, $refused refused"
