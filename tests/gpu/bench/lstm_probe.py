# Whether the recurrent family pays (docs/PERF.md, twenty-ninth session): its kernel
# (templates/recurrent.cuh, through lstm_probe.cu) on tests/gpu/bench/lstm_hn.py (KernelBench's 36_LSTMHn: batch 10,
# 512 steps, 6 layers of 256 units, fp32), checked against the model run in float64, then timed
# with the timing protocol of `fusetune profile` (fusetune_py.verify.time_interleaved) beside the
# model eager (cuDNN's LSTM), torch.compile, and torch.compile with TF32 matmuls. The probe's time
# includes packing the weights (one torch.cat per call, as a generated ModelNew would have to).
# Each unit count U whose blocks fit the GPU at once is tried. On the GPU machine, from the repository root:
#   PYTHONPATH=tuner/py python3 tests/gpu/bench/lstm_probe.py
import ctypes
import importlib.util
import os
import subprocess
import sys

import torch

from fusetune_py import verify

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(os.environ.get("TMPDIR", "/tmp"), "lstm_probe.so")


def load_model():
    spec = importlib.util.spec_from_file_location("lstm_hn", os.path.join(HERE, "lstm_hn.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs())
    torch.manual_seed(1)
    return model, module.get_inputs()


def packed(lstm):
    parts = []
    for l in range(lstm.num_layers):
        parts += [getattr(lstm, f"{name}_l{l}").reshape(-1) for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    return torch.cat(parts)


def main():
    subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-I",
                    os.path.join(HERE, "..", "..", "..", "templates"), "-o", LIB, os.path.join(HERE, "lstm_probe.cu")],
                   check=True)
    lib = ctypes.CDLL(LIB)
    lib.lstm_probe.restype = ctypes.c_int
    lib.lstm_probe.argtypes = ([ctypes.c_void_p, ctypes.c_longlong, ctypes.c_longlong] + [ctypes.c_void_p] * 5 +
                               [ctypes.c_int, ctypes.c_void_p])
    lib.lstm_probe_workspace_bytes.restype = ctypes.c_longlong
    shape = [ctypes.c_int() for _ in range(5)]
    lib.lstm_probe_shape(*[ctypes.byref(v) for v in shape])

    dev = torch.device("cuda")
    model, inputs = load_model()
    model = model.to(dev)
    x = inputs[0].to(dev)
    lstm = model.lstm
    L, H, I = lstm.num_layers, lstm.hidden_size, lstm.input_size
    B, T = x.shape[0], x.shape[1]  # batch_first
    assert [v.value for v in shape] == [T, B, I, H, L], "lstm_probe.cu is instantiated for another shape"
    h0, c0 = model.h0.to(dev), model.h0.to(dev)  # the model's forward sets c0 to h0

    model64 = load_model()[0].double().to(dev)
    model64.h0 = model64.h0.double()
    with torch.no_grad():
        ref = model64(x.double()).float()  # h_n
        ref_out = model64.lstm(x.double(), (h0.double(), c0.double()))[0].float()

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    tbh, lbh = T * B * H, L * B * H
    out = torch.empty(tbh + 2 * lbh, device=dev)
    y, hn = out[:tbh].view(T, B, H), out[tbh:tbh + lbh].view(L, B, H)
    workspace = torch.zeros(lib.lstm_probe_workspace_bytes(), dtype=torch.uint8, device=dev)

    def probe(U):
        def run(xin):
            w = packed(lstm)
            err = lib.lstm_probe(xin.data_ptr(), xin.stride(1), xin.stride(0), h0.data_ptr(), c0.data_ptr(), w.data_ptr(),
                                 out.data_ptr(), workspace.data_ptr(), U, torch.cuda.current_stream().cuda_stream)
            if err:
                raise RuntimeError(f"lstm_probe U={U}: cudaError {err}")
            return hn
        return run

    units = [U for U in (12, 16, 20, 24) if L * -(-H // U) <= sms]
    print(f"{torch.cuda.get_device_name(0)}; T={T} B={B} I={I} H={H} L={L}; unit counts tried: {units}")
    fns = {}
    ok = True
    with torch.no_grad():
        for U in units:
            got = probe(U)(x)
            torch.cuda.synchronize()
            err, err_y = (got - ref).abs().max().item(), (y.transpose(0, 1) - ref_out).abs().max().item()
            good = torch.allclose(got, ref, atol=1e-2, rtol=1e-2) and torch.allclose(y.transpose(0, 1), ref_out, atol=1e-2, rtol=1e-2)
            ok &= good
            print(f"U={U:3d} blocks={L * -(-H // U):3d}: h_n max error {err:.2e}, output max error {err_y:.2e}: {'PASS' if good else 'FAIL'}")
            fns[f"probe_U{U}"] = probe(U)
        fns["eager"] = model
        fns["compile"] = torch.compile(model)
        fns["compile_tf32"] = torch.compile(model)
        flush = torch.empty(64 << 20, dtype=torch.float32, device=dev)
        times = verify.time_interleaved(fns, verify._enter_precision, [x], flush, warmup=5, min_runs=20, min_ms=500,
                                        max_runs=100)
    verify.pytorch_default_precision()
    base = times["compile"]["median"]
    for name, t in times.items():
        print(f"{name:14s} median {t['median']:8.3f} ms  (p20 {t['p20']:.3f}, p80 {t['p80']:.3f}, {t['runs']} runs)"
              f"  torch.compile / this = {base / t['median']:.2f}x,"
              f" compile_tf32 / this = {times['compile_tf32']['median'] / t['median']:.2f}x")
    print("precision: probe fp32 (FMAs); eager and compile: PyTorch's defaults (cuDNN's LSTM may use TF32:"
          f" cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}); compile_tf32 adds TF32 matmuls")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
