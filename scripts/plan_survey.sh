#!/usr/bin/env bash
# Plans every model file in a folder (`fusetune plan`, no GPU) and prints one line per model: its
# kernel group families, or the error that stopped it. For checking how much of a model
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
  if timeout "${FUSETUNE_SURVEY_TIMEOUT:-600}" "$ROOT/build/fusetune" plan --model "$model" --out "$work/$name" \
      > "$work/plan.json" 2> "$work/err"; then
    planned=$((planned + 1))
    echo "ok     $name: $(python3 -c 'import json, sys; print(" ".join(g["family"] for g in json.load(open(sys.argv[1]))["groups"]))' "$work/plan.json")"
  else
    refused=$((refused + 1))
    reason=$(grep -m1 '^error' "$work/err" || grep -v '^$' "$work/err" | tail -1)  # past any warnings
    echo "error  $name: $reason"
  fi
  rm -rf "${work:?}/$name"
done
echo "$planned planned, $refused refused"
