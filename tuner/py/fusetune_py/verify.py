# End-to-end check (verify) and timing (profile) of a generated ModelNew against the user's Model,
# following the correctness and timing protocol of MEASURE.md.
import math
import os
import statistics

import torch
from torch.utils._pytree import tree_flatten

from .common import (ArgumentParser, UserError, attribute_owner, build_inputs, build_model, first_line, json_float,
                     load_module, pick_device, pytorch_default_precision, run_main, set_tf32, strict_fp32, to_device,
                     write_json_atomic)

MAX_FIRST_MISMATCHES = 10
PROFILE_DEVICE = "cuda"  # a module constant so that tests can exercise the protocol on the CPU


def load_pair(model_path, new_path):
    module = load_module(model_path, "fusetune_user_model")
    new_module = load_module(new_path, "fusetune_model_new", required=("ModelNew",))
    return module, new_module


def build_new(module, new_module, seed, device):
    """ModelNew built with the same seed and init args as Model, so its weights start out identical."""
    model_new, _ = build_model(new_module, seed, "ModelNew", init_module=module)
    return model_new.to(device)


def load_state(model, model_new):
    """(loads, error): a drop-in replacement must accept Model's state_dict unchanged."""
    try:
        model_new.load_state_dict(model.state_dict(), strict=True)
        return True, None
    except Exception as e:
        return False, " ".join(str(e).split())


def clone_inputs(inputs):
    # Each model gets its own copy so that a kernel writing into its inputs cannot alter the other's.
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _unravel(flat_index, shape):
    index = []
    for size in reversed(shape):
        flat_index, i = divmod(flat_index, size)
        index.append(i)
    return index[::-1]


def first_true(mask, k):
    """Flat indices of the first k True elements, in chunks so a huge mask needs no huge nonzero()."""
    flat, found, step = mask.reshape(-1), [], 1 << 24
    for start in range(0, flat.numel(), step):
        idx = flat[start:start + step].nonzero().flatten()[:k - len(found)]
        found += [start + int(i) for i in idx]
        if len(found) >= k:
            break
    return found


def _structure_fail(out, ref):
    if not isinstance(out, torch.Tensor):
        return f"ModelNew returned {type(out).__name__}, Model a tensor"
    if out.shape != ref.shape:
        return f"shape {list(out.shape)} != reference {list(ref.shape)}"
    if out.dtype != ref.dtype:
        return f"dtype {out.dtype} != reference {ref.dtype}"
    return None


def compare_tensor(out, ref, atol, rtol):
    """MEASURE.md's pass rule: finite where ref is, elementwise atol+rtol*|ref|, and relative L2 <= rtol."""
    reason = _structure_fail(out, ref)
    if reason:
        return {"ok": False, "reason": reason, "n_mismatch": ref.numel(), "first_mismatches": []}
    o, r = out.detach().double(), ref.detach().double()
    r_fin, o_fin = torch.isfinite(r), torch.isfinite(o)
    both = r_fin & o_fin
    diff = torch.where(both, (o - r).abs(), 0.0)
    bad = (both & (diff > atol + rtol * r.abs())) | (r_fin & ~o_fin)
    bad |= ~r_fin & ~((o == r) | (torch.isnan(o) & torch.isnan(r)))  # non-finite ref: must match exactly
    nonzero_ref = both & (r != 0)
    max_rel = float((diff[nonzero_ref] / r[nonzero_ref].abs()).max()) if nonzero_ref.any() else 0.0
    ref_norm = float(torch.linalg.vector_norm(torch.where(r_fin, r, 0.0)))
    err_norm = math.inf if bool((r_fin & ~o_fin).any()) else float(torch.linalg.vector_norm(diff))
    rel_l2 = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else math.inf)
    n_mismatch = int(bad.sum())
    firsts = [{"index": _unravel(i, list(r.shape)), "out": json_float(o.reshape(-1)[i]),
               "ref": json_float(r.reshape(-1)[i])} for i in first_true(bad, MAX_FIRST_MISMATCHES)]
    # The norm check is moot where the whole reference lies far below atol (rounding noise around
    # 0, e.g. the mean of a normalised tensor): as in the tuner's worker (measure.cpp).
    resolvable = r.numel() > 0 and ref_norm / math.sqrt(r.numel()) > 1e-3 * atol
    norm_bad = resolvable and rel_l2 > rtol
    reason = "elementwise tolerance" if n_mismatch else ("relative L2 error" if norm_bad else None)
    return {"ok": n_mismatch == 0 and not norm_bad, "reason": reason,
            "max_abs_err": float(diff.max()) if diff.numel() else 0.0, "max_rel_err": max_rel,
            "rel_l2": rel_l2, "n_mismatch": n_mismatch, "first_mismatches": firsts}


def _describe(x):
    if isinstance(x, torch.Tensor):
        return "a tensor"
    return f"a {type(x).__name__} of {len(tree_flatten(x)[0])} values"


def compare_outputs(out, ref, atol, rtol):
    """Compare tensor or tuple/list outputs leaf by leaf; a trial's numbers are the worst over leaves."""
    outs, refs = tree_flatten(out)[0], tree_flatten(ref)[0]
    if len(outs) != len(refs) or isinstance(out, torch.Tensor) != isinstance(ref, torch.Tensor):
        return {"ok": False, "error": f"ModelNew returned {_describe(out)}, Model {_describe(ref)}"}
    per_output = []
    for o, r in zip(outs, refs):
        if isinstance(r, torch.Tensor):
            per_output.append(compare_tensor(o, r, atol, rtol))
        else:
            same = bool(o == r)
            per_output.append({"ok": same, "reason": None if same else f"{o!r} != reference {r!r}"})
    result = {"ok": all(p["ok"] for p in per_output)}
    for key in ("max_abs_err", "max_rel_err", "rel_l2"):
        result[key] = max((p.get(key, 0.0) for p in per_output), default=0.0)
    result["n_mismatch"] = sum(p.get("n_mismatch", 0) for p in per_output)
    firsts = [dict(m, output=k) for k, p in enumerate(per_output) for m in p.get("first_mismatches", [])]
    result["first_mismatches"] = firsts[:MAX_FIRST_MISMATCHES]
    result["outputs"] = [{k: v for k, v in p.items() if k != "first_mismatches"} for p in per_output]
    return result


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()  # surfaces asynchronous kernel faults inside the try that caused them


def run_trial(module, model, model_new, seed_t, device, atol, rtol):
    inputs = [to_device(x, device) for x in build_inputs(module, seed_t)]
    base = os.path.basename(module.__file__)
    with torch.no_grad():
        strict_fp32()
        try:
            ref = model(*clone_inputs(inputs))
            _sync(device)
        except Exception as e:
            raise UserError(f"{base}: Model forward failed: {first_line(e)}") from None
        try:
            out = model_new(*clone_inputs(inputs))
            _sync(device)
        except Exception as e:
            return {"seed": seed_t, "ok": False, "error": f"ModelNew forward failed: {first_line(e)}"}
        result = dict({"seed": seed_t}, **compare_outputs(out, ref, atol, rtol))
        state = compare_state(model, model_new, atol, rtol)
        if state:
            result["state"] = state
            result["ok"] = result["ok"] and all(s["ok"] for s in state.values())
        return result


def compare_state(model, model_new, atol, rtol):
    """The state forward updates must match too: the buffers (BatchNorm's running statistics and
    counter) and the tensors Model keeps as plain attributes where ModelNew has buffers (a
    recurrent model's hidden state); floating ones within the tolerance, integer ones exactly."""
    theirs = dict(model_new.named_buffers())
    refs = dict(model.named_buffers())
    for path in theirs.keys() - refs.keys():
        try:
            owner, name = attribute_owner(model, path)
        except AttributeError:
            continue
        if isinstance(getattr(owner, name, None), torch.Tensor):
            refs[path] = getattr(owner, name)
    state = {}
    for name, ref in refs.items():
        mine = theirs.get(name)
        if mine is None:
            state[name] = {"ok": False, "reason": "ModelNew has no such buffer"}
        elif ref.is_floating_point():
            state[name] = {k: v for k, v in compare_tensor(mine, ref, atol, rtol).items() if k != "first_mismatches"}
        else:
            same = mine.shape == ref.shape and bool(torch.equal(mine.to(ref.device), ref))
            state[name] = {"ok": same, "reason": None if same else f"{mine.tolist()!r} != reference {ref.tolist()!r}"}
    return state


def verify(model_path, new_path, seed, trials, atol, rtol, device):
    device = pick_device(device)
    module, new_module = load_pair(model_path, new_path)
    result = {"ok": False, "state_dict_loads": False, "trials": [], "atol": atol, "rtol": rtol,
              "seed": seed, "device": str(device)}
    model = build_model(module, seed)[0].to(device)
    try:
        model_new = build_new(module, new_module, seed, device)
    except UserError as e:
        result["error"] = str(e)  # a generated model that cannot be built fails verification
        return result
    result["state_dict_loads"], error = load_state(model, model_new)
    if error:
        result["state_dict_error"] = error
    for t in range(trials):
        trial = run_trial(module, model, model_new, seed + 1000 * (t + 1), device, atol, rtol)
        result["trials"].append(_json_safe(trial))
        if "error" in trial:
            break  # a faulting kernel can poison the CUDA context; later trials would mislead
    result["ok"] = (result["state_dict_loads"] and len(result["trials"]) == trials
                    and all(t["ok"] for t in result["trials"]))
    return result


def _json_safe(obj):
    if isinstance(obj, float):
        return json_float(obj)
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def percentile(sorted_samples, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    pos = (len(sorted_samples) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_samples[lo] + (sorted_samples[hi] - sorted_samples[lo]) * (pos - lo)


def summarize(samples):
    s = sorted(samples)
    return {"median": statistics.median(s), "min": s[0], "p20": percentile(s, 0.2), "p80": percentile(s, 0.8),
            "mean": statistics.fmean(s), "runs": len(s), "samples": samples}


# The three CUDA touch points of the timing protocol, kept apart so tests can stand in for them.
def _event():
    return torch.cuda.Event(enable_timing=True)


def _synchronize():
    torch.cuda.synchronize()


def _gpu_info():
    props = torch.cuda.get_device_properties(0)
    return props.name, int(getattr(props, "L2_cache_size", 0))


def timed_call(fn, inputs, flush):
    """One call after an L2 flush, between its own events on the current stream (not yet synchronized)."""
    flush.zero_()
    start, end = _event(), _event()
    start.record()
    fn(*inputs)
    end.record()
    return start, end


def timed_calls(fn, inputs, n, flush):
    """n timed calls; ms each."""
    pairs = [timed_call(fn, inputs, flush) for _ in range(n)]
    _synchronize()
    return [start.elapsed_time(end) for start, end in pairs]


def time_interleaved(fns, enter, inputs, flush, warmup, min_runs, min_ms, max_runs):
    """The one timing routine every contender goes through (MEASURE.md: warm up, flush, events,
    median). fns maps a name to its callable; enter(name) sets that contender's state (its
    precision) before each of its calls. Each contender is warmed up (compilation and autotuning
    happen there); then the contenders take turns, one timed call each per round, the first one
    rotating, so that a drift of the GPU's clocks during the measurement (a sustained load lowers
    them in steps) reaches all of them alike instead of the last one measured. Every contender
    gets the same rounds, so that the medians of two contenders come from the same stretch of
    the drift: at least min_runs, enough for the fastest to cover min_ms (at most max_runs), and
    no more than keep the whole measurement near 20 x min_ms."""
    estimates = []
    for name, fn in fns.items():
        enter(name)
        warm = timed_calls(fn, inputs, warmup, flush)
        estimates.append(max(statistics.median(warm[1:] if len(warm) > 1 else warm), 1e-6))
    rounds = min(math.ceil(min_ms / min(estimates)), max_runs, math.ceil(20 * min_ms / sum(estimates)))
    rounds = max(rounds, min_runs)
    names = list(fns)
    pairs = {name: [] for name in names}
    for r in range(rounds):
        for k in range(len(names)):
            name = names[(r + k) % len(names)]
            enter(name)
            pairs[name].append(timed_call(fns[name], inputs, flush))
    _synchronize()
    return {name: dict(summarize([start.elapsed_time(end) for start, end in pairs[name]]), warmup=warmup)
            for name in names}


def _precision():
    return {"matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32}


def _enter_precision(name):
    """Each contender in its documented precision: PyTorch's defaults, TF32 matmuls for compile_tf32."""
    pytorch_default_precision()
    if name == "compile_tf32":
        set_tf32(True, torch.backends.cudnn.allow_tf32)


def _contender(name, module, new_module, seed):
    """A fresh model for one baseline (or ModelNew), built with the seeding rule."""
    model = build_model(module, seed)[0].to(PROFILE_DEVICE)
    if name == "fusetune":
        model_new = build_new(module, new_module, seed, torch.device(PROFILE_DEVICE))
        loads, error = load_state(model, model_new)
        if not loads:
            raise UserError(f"{os.path.basename(new_module.__file__)}: ModelNew cannot load Model's "
                            f"state_dict: {error}")
        return model_new
    if name.startswith("compile"):
        return torch.compile(model)
    return model


CONTENDERS = ("eager", "compile", "compile_tf32", "fusetune")


def profile(model_path, new_path, seed, opts):
    pick_device(PROFILE_DEVICE)
    module, new_module = load_pair(model_path, new_path)
    inputs = [to_device(x, PROFILE_DEVICE) for x in build_inputs(module, seed + 1)]
    gpu, l2 = _gpu_info()
    flush_bytes = 2 * l2 if l2 > 0 else 256 << 20
    flush = torch.empty(flush_bytes, dtype=torch.uint8, device=PROFILE_DEVICE)
    torch._dynamo.reset()  # no compiled code or guards carried over from before
    fns, precision = {}, {}
    try:
        for name in CONTENDERS:
            _enter_precision(name)
            fns[name] = _contender(name, module, new_module, seed)
            precision[name] = _precision()
        with torch.no_grad():
            timings = time_interleaved(fns, _enter_precision, inputs, flush, opts.warmup, opts.min_runs, opts.min_ms,
                                       opts.max_runs)
    finally:
        pytorch_default_precision()  # no precision setting leaks out of the profile
        fns.clear()  # drop the models first so that empty_cache can really hand their memory back
        torch._dynamo.reset()
        torch.cuda.empty_cache()
    for name in CONTENDERS:
        timings[name]["precision"] = precision[name]
    mine = timings["fusetune"]["median"]
    baselines = ("eager", "compile", "compile_tf32")
    speedup = {f"vs_{name}": timings[name]["median"] / mine for name in baselines}
    # The same ratio round by round (sample i of every contender comes from round i): the median
    # of a baseline's time over fusetune's in the same round, which a clock drop during the
    # profile moves less than it moves a ratio of two medians.
    ours = timings["fusetune"]["samples"]
    per_round = {f"vs_{name}": statistics.median(b / f for b, f in zip(timings[name]["samples"], ours))
                 for name in baselines}
    return {"gpu": gpu, "torch_version": torch.__version__, "seed": seed, "l2_bytes": l2,
            "flush_bytes": flush_bytes, "timings": timings, "speedup": speedup, "speedup_per_round": per_round}


def parse_args(argv):
    p = ArgumentParser(prog="python3 -m fusetune_py.verify",
                       description="Verify or time a generated ModelNew against Model.")
    sub = p.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="check ModelNew's outputs against Model's")
    pr = sub.add_parser("profile", help="time Model (eager, compiled) and ModelNew")
    for s in (v, pr):
        s.add_argument("--model", required=True)
        s.add_argument("--model-new", required=True)
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--out", required=True)
    v.add_argument("--trials", type=int, default=5)
    v.add_argument("--atol", type=float, default=1e-2)
    v.add_argument("--rtol", type=float, default=1e-2)
    v.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    pr.add_argument("--warmup", type=int, default=5)
    pr.add_argument("--min-runs", type=int, default=25)
    pr.add_argument("--min-ms", type=float, default=100.0)
    pr.add_argument("--max-runs", type=int, default=10000, help="cap on timed runs for very short calls")
    args = p.parse_args(argv)
    if args.command == "verify" and args.trials < 1:
        p.error("--trials must be at least 1")
    if args.command == "profile" and (args.warmup < 1 or args.min_runs < 1):
        p.error("--warmup and --min-runs must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.command == "verify":
        result = verify(args.model, args.model_new, args.seed, args.trials, args.atol, args.rtol, args.device)
    else:
        result = profile(args.model, args.model_new, args.seed, args)
    write_json_atomic(args.out, _json_safe(result))


if __name__ == "__main__":
    run_main(main)
