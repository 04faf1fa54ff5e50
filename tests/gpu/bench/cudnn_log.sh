#!/usr/bin/env bash
# Which cuDNN engine configurations eager PyTorch and torch.compile run for a model: one forward
# of each with cuDNN's API log on (CUDNN_LOGLEVEL_DBG=3), the log written gzipped to OUT_DIR, and
# the engine global indices and knob choices it names printed. Compare them with the engine and
# knobs of a fusetune run's cuDNN candidates in its best.json. Run on the GPU machine:
#   bash tests/gpu/bench/cudnn_log.sh OUT_DIR MODEL.py [MODEL.py...]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
out=$1; shift
mkdir -p "$out"
for model in "$@"; do
  name=$(basename "$model" .py)
  for mode in eager compile; do
    log=$out/cudnn_${name}_$mode.log
    CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG=$log python3 - "$model" "$mode" "$HERE/../../../tuner/py" <<'PY'
import sys
import torch
model_path, mode, pkg = sys.argv[1:4]
sys.path.insert(0, pkg)
from fusetune_py.common import build_inputs, build_model, load_module, pytorch_default_precision
module = load_module(model_path, "fusetune_user_model")
model = build_model(module, 0)[0].cuda()
run = torch.compile(model) if mode == "compile" else model
inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in build_inputs(module, 1)]
pytorch_default_precision()
with torch.no_grad():
    run(*inputs)
torch.cuda.synchronize()
PY
    echo "=== $name $mode: engine global indices and knob choices in the log"
    grep -E -A3 "CUDNN_ATTR_ENGINE_GLOBAL_INDEX|CUDNN_ATTR_KNOB_CHOICE_KNOB_(TYPE|VALUE)" "$log" | grep -E "INDEX|KNOB|val" | sort | uniq -c | sort -rn | head -30 || true
    gzip -f "$log"
  done
done
