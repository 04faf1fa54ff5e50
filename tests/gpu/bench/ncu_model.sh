#!/usr/bin/env bash
# Hardware counters (Nsight Compute) for the kernels of a finished fusetune run and for
# torch.compile's kernels on the same inputs: one forward of each inside a profiler range, after
# warm-up outside it. A model file instead of a run folder profiles eager PyTorch and torch.compile
# alone. Run on the GPU machine (a Firecracker one: ncu reads counters there):
#   bash tests/gpu/bench/ncu_model.sh OUT_DIR|MODEL.py [...]
# NCU_DETAILS (default "--print-details all": each section's breakdown tables too; empty for the
# summary alone). NCU_TF32=1: torch.compile (and eager) with TF32 matmuls, as compile_tf32 in
# profile, instead of PyTorch's defaults. NCU_KERNEL: a regex; only the kernels it matches.
# NCU_REPORT: a report path (without .ncu-rep) to write instead of printing, with the source
# counters (stall samples per instruction) too; then print its SASS page with
#   ncu -i REPORT.ncu-rep --page source --csv --print-source sass
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
for out in "$@"; do
  echo "=== ncu $(basename "$out")"
  ncu --clock-control none --profile-from-start off --target-processes all \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
      --section WarpStateStats --section SchedulerStats ${NCU_DETAILS---print-details all} \
      ${NCU_KERNEL:+-k "regex:$NCU_KERNEL"} ${NCU_REPORT:+-o "$NCU_REPORT" --section SourceCounters} \
      python3 - "$out" "$HERE/../../../tuner/py" <<'PY' 2>&1 | grep -v "^==PROF=="
import os, sys
import torch
out, pkg = sys.argv[1:3]
sys.path.insert(0, pkg)
from fusetune_py.common import build_inputs, build_model, load_module, pytorch_default_precision
from fusetune_py.verify import build_new, load_pair
if out.endswith(".py"):  # no fusetune run: eager PyTorch takes ModelNew's place
    module = load_module(out, "fusetune_user_model")
    model = build_model(module, 0)[0].cuda()
    model_new, name = model, "eager"
else:
    module, new_module = load_pair(os.path.join(out, "model.py"), os.path.join(out, "model_new.py"))
    model = build_model(module, 0)[0].cuda()
    model_new, name = build_new(module, new_module, 0, torch.device("cuda")), "fusetune"
compiled = torch.compile(model)
inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in build_inputs(module, 1)]
pytorch_default_precision()  # torch.compile as profile times it
if os.environ.get("NCU_TF32") == "1":
    torch.backends.cuda.matmul.allow_tf32 = True
with torch.no_grad():
    for _ in range(3):
        model_new(*inputs), compiled(*inputs)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    print(name + ":"); model_new(*inputs); torch.cuda.synchronize()
    print("torch.compile:"); compiled(*inputs); torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
PY
done
