#!/usr/bin/env bash
# GPU suite (run on a machine with an NVIDIA GPU): builds fusetune, runs it end to end on the
# models of issue 2 and checks each result, then runs a search with a planted faulting and a
# planted hanging candidate and checks that both are recorded while the search goes on, and
# builds and verifies a model whose two GEMM groups run gemm_tma in one configuration.
# It also searches every GEMM and reduction candidate over small irregular models
# (tests/gpu/models: transposes, batches, a broadcast batch, N = 1, edges; strided, contiguous,
# whole and size-1 reductions) and requires every candidate to pass the check.
#   bash tests/gpu/run.sh                        # planted, tma_twins, families, full-size shared models
#   FUSETUNE_GPU_QUICK=1 bash tests/gpu/run.sh   # planted and one small model (smoke test)
# Environment: OUT (where the summary and gpu_results.tgz go; default the scratch folder: give
# each invocation its own), FUSETUNE_MODELS_DIR (default ../shared/models), FUSETUNE_DEPS_DIR (offline
# header folder), FUSETUNE_GPU_MODELS (space-separated subset; "toplevel" is ./model.py;
# paths ending in .py are relative to the repository, e.g. tuner/tests/data/small_twins.py),
# FUSETUNE_GPU_FAMILY_MODELS (space-separated subset of tests/gpu/models, without .py),
# FUSETUNE_GPU_SEARCH_MODELS (shared models for the "searches" stage, or paths ending in .py
# relative to the repository, e.g. tests/gpu/bench/gemm_epilogue_cost.py: the search alone, each
# group's five fastest candidates and its final's winner in the summary, no extension build,
# verify or profile),
# FUSETUNE_GPU_ARGS (extra fusetune options), FUSETUNE_GPU_STAGES (default
# "planted tma_twins families models"; "searches" is extra), FUSETUNE_GPU_WORK (scratch), FUSETUNE_GPU_MODEL_TIMEOUT (seconds
# one fusetune run may take before it is stopped and counted as failed, its log kept; default
# no limit), FUSETUNE_GPU_REQUIRE (a text the GPU's name must contain, e.g. H200 for runs that
# measure the issues' H200 bars: on another card the suite stops before building, with status 3).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MODELS_DIR=${FUSETUNE_MODELS_DIR:-$ROOT/../shared/models}
WORK=${FUSETUNE_GPU_WORK:-/tmp/fusetune_gpu}
BUILD=$ROOT/build-gpu
RESULTS=${OUT:-$WORK}  # where the summary and the archive go
MODEL_TIMEOUT=${FUSETUNE_GPU_MODEL_TIMEOUT:-0}  # seconds per fusetune run (0: no limit)
mkdir -p "$WORK" "$RESULTS"

if [[ -n "${FUSETUNE_GPU_REQUIRE:-}" ]]; then
  card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  if [[ "$card" != *"$FUSETUNE_GPU_REQUIRE"* ]]; then
    echo "the GPU is $card, not the $FUSETUNE_GPU_REQUIRE that FUSETUNE_GPU_REQUIRE asks for: nothing run" | tee "$RESULTS/gpu_summary.txt"
    exit 3
  fi
fi

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DFUSETUNE_TESTS=OFF ${FUSETUNE_DEPS_DIR:+-DFUSETUNE_DEPS_DIR=$FUSETUNE_DEPS_DIR} >"$WORK/cmake.log" 2>&1 \
  && cmake --build "$BUILD" >>"$WORK/cmake.log" 2>&1 || { cat "$WORK/cmake.log"; exit 1; }
FT=$BUILD/fusetune
failures=0
summary="$RESULTS/gpu_summary.txt"
: >"$summary"

# Everything a reviewer needs from this run, in one archive: logs, best.json, generated sources.
# Rewritten after every model, so that a run cut short keeps what finished.
archive() {
  (cd "$WORK" && tar czf "$RESULTS/gpu_results.tgz.tmp" --exclude='*/.fusetune/cache' --exclude='*/.fusetune/tensors' \
    --exclude='*/extension/build' --exclude='*.so' --exclude='*/.fusetune/job_*' */run.log */.fusetune/*.log */results \
    */model_new.py */extension 2>/dev/null; mv "$RESULTS/gpu_results.tgz.tmp" "$RESULTS/gpu_results.tgz")
}

fresh_run() {  # out_dir model_file: an empty run folder holding the model as model.py
  rm -rf "$1"; mkdir -p "$1"
  cp "$2" "$1/model.py"
}

check_run() {  # name out_dir: best.json must have a winner per group and a passing verification
  python3 - "$1" "$2/results/best.json" "$summary" <<'PY'
import json, sys
name, path, summary = sys.argv[1:4]
b = json.load(open(path))
e2e = b.get("end_to_end", {})
ok = all(g.get("best") for g in b["groups"]) and e2e.get("verify", {}).get("ok") is True
t = e2e.get("profile", {}).get("timings", {})
s = e2e.get("profile", {}).get("speedup", {})
groups = "; ".join("%s %s %s %.4g ms (%.0f%% roofline, %d cand, %.1f s)" % (
    g["id"], g["family"], g["best"]["name"], g["best"]["time_ms"]["median"], g["best"].get("roofline_pct", 0),
    len(g["candidates"]), g["search"]["wall_s"]) for g in b["groups"])
r = e2e.get("profile", {}).get("speedup_per_round", {})
line = ("%-22s %s tune %.1fs | eager %.3f compile %.3f compile_tf32 %.3f fusetune %.3f ms | x%.2f vs compile, x%.2f vs "
        "compile_tf32 (per round x%.2f, x%.2f) | %s") % (
    name, "PASS" if ok else "FAIL", b["tuning_wall_s"], t.get("eager", {}).get("median", 0), t.get("compile", {}).get("median", 0),
    t.get("compile_tf32", {}).get("median", 0), t.get("fusetune", {}).get("median", 0), s.get("vs_compile", 0),
    s.get("vs_compile_tf32", 0), r.get("vs_compile", 0), r.get("vs_compile_tf32", 0), groups)
open(summary, "a").write(line + "\n")
print(line)
sys.exit(0 if ok else 1)
PY
}

run_model() {  # name model_file [extra fusetune options]
  local name=$1 model=$2; shift 2
  local out=$WORK/$name
  fresh_run "$out" "$model"
  echo "=== $name"
  local rc=0
  timeout "$MODEL_TIMEOUT" "$FT" --model "$out/model.py" --arch sm_90 --out "$out" --workers 16 "$@" >"$out/run.log" 2>&1 || rc=$?
  if [ $rc -eq 0 ] && check_run "$name" "$out"; then
    :
  else
    local why="see run.log"
    [ $rc -eq 124 ] && why="stopped by FUSETUNE_GPU_MODEL_TIMEOUT=${MODEL_TIMEOUT}s; see run.log"
    echo "$name FAILED ($why)"; tail -30 "$out/run.log"; failures=$((failures + 1))
    echo "$name FAIL ($why)" >>"$summary"
  fi
  archive
}

search_model() {  # name model_file [extra fusetune options]: the search alone, kernel times only
  local name=$1 model=$2; shift 2
  local out=$WORK/search_$name
  fresh_run "$out" "$model"
  echo "=== search $name"
  timeout "$MODEL_TIMEOUT" "$FT" search --model "$out/model.py" --arch sm_90 --out "$out" --workers 16 "$@" >"$out/run.log" 2>&1
  python3 - "$name" "$out/results/best.json" "$summary" <<'PY'
import json, sys
name, path, summary = sys.argv[1:4]
try:
    b = json.load(open(path))
except OSError:
    b = {"groups": []}
ok = bool(b["groups"]) and all(g.get("best") for g in b["groups"])
fastest = lambda g: sorted((c for c in g["candidates"] if c["status"] == "ok"), key=lambda c: c["time_ms"]["median"])[:5]
final = lambda g: "; final: %s" % g["search"]["final"]["winner"] if "final" in g["search"] else ""
groups = " | ".join("%s %s (%d cand, %.1f s): %s%s" % (g["id"], g["family"], len(g["candidates"]), g["search"]["wall_s"],
    ", ".join("%s %.4g ms" % (c["name"], c["time_ms"]["median"]) for c in fastest(g)), final(g)) for g in b["groups"])
line = "search %-15s %s %s" % (name, "PASS" if ok else "FAIL", groups)
open(summary, "a").write(line + "\n")
print(line)
sys.exit(0 if ok else 1)
PY
  [ $? -eq 0 ] || { failures=$((failures + 1)); tail -20 "$out/run.log"; }
  archive
}

planted() {  # a search over a space with a faulting and a hanging candidate must record both
  local out=$WORK/planted
  rm -rf "$out"; mkdir -p "$out"
  sed 's/rows, cols = 8192, 65536/rows, cols = 1000, 777/' "$MODELS_DIR/elementwise_chain.py" >"$out/model.py"
  echo "=== planted fault and hang"
  "$FT" search --model "$out/model.py" --arch sm_90 --out "$out" --timeout 5 \
      --templates "$ROOT/tests/gpu/planted" --configs "$ROOT/tests/gpu/planted/configs" >"$out/run.log" 2>&1
  python3 - "$out/results/best.json" "$summary" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
status = {c["name"]: c["status"] for c in b["groups"][0]["candidates"]}
ok = (status.get("elementwise_block256_vec2_ilp1_math0") == "fault" and status.get("elementwise_block128_vec2_ilp1_math0") == "timeout"
      and sum(s == "ok" for s in status.values()) == len(status) - 2 and b["groups"][0]["best"])
line = "planted                %s %s" % ("PASS" if ok else "FAIL", status)
open(sys.argv[2], "a").write(line + "\n")
print(line)
sys.exit(0 if ok else 1)
PY
  [ $? -eq 0 ] || { failures=$((failures + 1)); tail -30 "$out/run.log"; }
}

tma_twins() {  # two groups' kernels of one gemm_tma configuration, each with its own launch state
  local configs=$WORK/tma_twins_configs  # configs/ with gemm_tma cut to one config, every other family to none
  rm -rf "$configs"; mkdir -p "$configs"
  python3 - "$ROOT/configs" "$configs" <<'PY'
import json, os, sys
src, dst = sys.argv[1:3]
for name in os.listdir(src):
    space = json.load(open(os.path.join(src, name)))
    if space["family"] == "gemm_tma":
        space["params"] = {"BM": [128], "BN": [128], "STAGES": [4], "GROUP_M": [8], "PINGPONG": [0], "CLUSTER": [2]}
    else:
        space["constraints"] = ["%s < 0" % next(iter(space["params"]))]
    json.dump(space, open(os.path.join(dst, name), "w"))
PY
  run_model tma_twins "$ROOT/tests/gpu/tma_twins.py" --configs "$configs" --timeout 10
}

families() {  # every candidate of every GEMM and row family must be correct on irregular shapes
  for model in "$ROOT"/tests/gpu/models/*.py; do
    local name out
    case " ${FUSETUNE_GPU_FAMILY_MODELS:-$(basename "$model" .py)} " in *" $(basename "$model" .py) "*) ;; *) continue ;; esac
    name=family_$(basename "$model" .py)
    out=$WORK/$name
    fresh_run "$out" "$model"
    echo "=== $name"
    # MODEL.args beside a model: extra options for its search (a precision policy, tolerances).
    "$FT" search --model "$out/model.py" --arch sm_90 --out "$out" --workers 16 --timeout 10 \
      $(cat "${model%.py}.args" 2>/dev/null) >"$out/run.log" 2>&1
    python3 - "$name" "$out/results/best.json" "$summary" <<'PY'
import collections, json, sys
name, path, summary = sys.argv[1:4]
try:
    b = json.load(open(path))
except OSError:
    b = {"groups": []}
# "unavailable": a library algorithm rank beyond what its heuristic offers for this shape.
bad = [(c["name"], c["status"], c.get("error", "")[:200]) for g in b["groups"] for c in g["candidates"]
       if c["status"] not in ("ok", "unavailable")]
count = collections.Counter(c["family"] for g in b["groups"] for c in g["candidates"] if c["status"] == "ok")
families = {c["family"] for g in b["groups"] for c in g["candidates"]}
ok = bool(b["groups"]) and not bad and all(count[f] > 0 for f in families)
line = "%-22s %s ok candidates per family %s, not ok: %s" % (name, "PASS" if ok else "FAIL", dict(count), bad[:5])
open(summary, "a").write(line + "\n")
print(line)
sys.exit(0 if ok else 1)
PY
    [ $? -eq 0 ] || { failures=$((failures + 1)); tail -20 "$out/run.log"; }
  done
}

if [ -n "${FUSETUNE_GPU_QUICK:-}" ]; then
  planted
  run_model small_linear "$ROOT/tuner/tests/data/small_linear.py" --budget-candidates 8
else
  for stage in ${FUSETUNE_GPU_STAGES:-planted tma_twins families models}; do
    case $stage in
      planted) planted ;;
      tma_twins) tma_twins ;;
      families) families ;;
      models)
        for m in ${FUSETUNE_GPU_MODELS:-elementwise_chain gemm_bias_gelu_scale gemm_relu_residual matmul_square matmul_transposed_a matvec bmm_scale mlp3 sum_middle_dim softmax_rows logsumexp_rows rmsnorm_channels linear_softmax groupnorm linear_layernorm_silu smooth_l1_loss maxpool2d avgpool3d cumsum_rows argmin_last_dim cross_entropy batchnorm_train conv2d_relu_bias depthwise_conv2d conv_transpose2d_tanh conv1d_dilated conv3d_groupnorm_mean resblock attention tests/gpu/models/hidden_state.py}; do
          case $m in
            toplevel) run_model "$m" "$ROOT/model.py" ${FUSETUNE_GPU_ARGS:-} ;;
            *.py) run_model "$(basename "$m" .py)" "$ROOT/$m" ${FUSETUNE_GPU_ARGS:-} ;;
            *) run_model "$m" "$MODELS_DIR/$m.py" ${FUSETUNE_GPU_ARGS:-} ;;
          esac
        done ;;
      searches)
        for m in ${FUSETUNE_GPU_SEARCH_MODELS:-}; do
          case $m in
            *.py) search_model "$(basename "$m" .py)" "$ROOT/$m" ${FUSETUNE_GPU_ARGS:-} ;;
            *) search_model "$m" "$MODELS_DIR/$m.py" ${FUSETUNE_GPU_ARGS:-} ;;
          esac
        done ;;
      *) echo "unknown stage $stage"; exit 2 ;;
    esac
  done
fi
archive
echo; cat "$summary"
echo "$(grep -c PASS "$summary") passed, $failures failed"
[ "$failures" -eq 0 ]
