#!/usr/bin/env bash
# Whether the extension runs the kernel the tuner timed: for each group of a finished fusetune
# run, the winner's registers and SASS size as NVRTC built it (the tuner's cache) and as nvcc
# built it (the extension). Run on the GPU machine after `fusetune`:
#   bash tests/gpu/bench/builds.sh OUT_DIR
set -euo pipefail
OUT=$1
python3 - "$OUT" <<'PY'
import glob, json, os, re, subprocess, sys
out = sys.argv[1]
so = glob.glob(os.path.join(out, "extension", "**", "cuda_extension*.so"), recursive=True)
def usage(path):  # {mangled kernel: "REG:.. STACK:.. SHARED:.. LOCAL:.."}
    text = subprocess.run(["cuobjdump", "-res-usage", path], capture_output=True, text=True).stdout
    return dict(re.findall(r"Function (\S+):\n\s*(REG:\d+ STACK:\d+ SHARED:\d+ LOCAL:\d+)", text))
def sass_size(path, kernel):
    text = subprocess.run(["cuobjdump", "-sass", "-fun", kernel, path], capture_output=True, text=True).stdout
    return len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", text, re.M))
ext = usage(so[0]) if so else {}
for g in json.load(open(os.path.join(out, "results", "best.json")))["groups"]:
    name = g["best"]["name"]
    for meta in glob.glob(os.path.join(out, ".fusetune", "cache", "*.json")):
        m = json.load(open(meta))
        if m.get("name") != name or not m.get("ok"):
            continue
        cubin, kernel = meta[:-5] + ".cubin", m["lowered"]
        print(g["id"], name)
        print("  nvrtc:", usage(cubin).get(kernel), "sass", sass_size(cubin, kernel))
        print("  nvcc: ", ext.get(kernel), "sass", sass_size(so[0], kernel) if so else None)
        break
PY
