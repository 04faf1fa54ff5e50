#!/usr/bin/env bash
# Which cuDNN engine configurations eager PyTorch and torch.compile run for a model: one forward
# of each with cuDNN's API log on (CUDNN_LOGLEVEL_DBG=3), the log written gzipped to OUT_DIR, and
# the engine, knob choices and tensor shapes of each executed plan printed. Compare them with the
# engine and knobs of a fusetune run's cuDNN candidates in its best.json. Run on the GPU machine:
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
    echo "=== $name $mode: the engine, knobs and tensors of each executed plan the log describes"
    # Within a cudnnBackendExecute entry, each distinct line once (a later call of the same plan
    # is logged without its description).
    awk '/function cudnnBackendExecute\(\) called/ { inb = 1; n++; delete seen; head = "execute " n ":"; next }
         /function cudnnBackend/ { inb = 0 }
         inb && /engine_id|CUDNN_KNOB_TYPE_|dimA|strideA/ {
           line = $0; sub(/^i! +/, "", line); sub(/type=[a-z_]+; /, "", line)
           if (head != "") { print head; head = "" }
           if (!(line in seen)) { seen[line] = 1; print "  " line }
         }' "$log"
    gzip -f "$log"
  done
done
