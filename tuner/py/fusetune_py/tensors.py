# Computes the reference tensors the tuner checks its kernels against: the captured graph run
# op by op in strict fp32, on the weights and inputs the seeding rule gives.
import functools
import os
import sys

import torch
from torch.export.graph_signature import ConstantArgument, InputKind, OutputKind

from .capture import FORMAT, VERSION
from .common import (ArgumentParser, HALF_DTYPES, UserError, atomic_path, build_model_and_inputs, dtype_name,
                     first_line, keep_as_buffers, load_module, pick_device, quiet, read_json, run_main, sha256_file,
                     strict_fp32, to_device, write_json_atomic)


def load_graph_json(work):
    graph = read_json(os.path.join(work, "graph.json"), "graph description")
    if not isinstance(graph, dict) or graph.get("format") != FORMAT or graph.get("version") != VERSION:
        raise UserError(f"{work}/graph.json is not a {FORMAT} version {VERSION} file; run capture again")
    return graph


def read_names(path, graph):
    names = read_json(path, "names file")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise UserError(f"{path} must hold a JSON list of value names")
    for name in names:
        value = graph["values"].get(name)
        if value is None:
            raise UserError(f"value {name!r} is not in the captured graph")
        if value["kind"] == "tuple":
            raise UserError(f"value {name!r} is a tuple; ask for the getitem values that unpack it")
    return list(dict.fromkeys(names))


def rebuild_model(graph):
    """Re-create model and inputs exactly as capture did, refusing if the model file has changed."""
    path = graph["model"]["path"]
    if not os.path.isfile(path):
        raise UserError(f"model file not found: {path}")
    if sha256_file(path) != graph["model"]["sha256"]:
        raise UserError(f"{os.path.basename(path)} has changed since it was captured; run capture again")
    module = load_module(path, "fusetune_user_model")
    model, inputs, _ = build_model_and_inputs(module, graph["seed"])
    keep_as_buffers(model, graph["model"].get("state_attributes", []))
    return module, model, inputs


def load_program(work):
    path = os.path.join(work, "graph.pt2")
    if not os.path.isfile(path):
        raise UserError(f"captured graph not found: {path}")
    with quiet():  # torch-internal noise about read-only buffers
        return torch.export.load(path)


def _state_tensor(model, ep, spec):
    """The fresh model's tensor behind a parameter/buffer/constant placeholder."""
    if spec.kind == InputKind.PARAMETER:
        table = dict(model.named_parameters(remove_duplicate=False))
    elif spec.kind == InputKind.BUFFER:
        table = dict(model.named_buffers(remove_duplicate=False))
    elif spec.kind == InputKind.CONSTANT_TENSOR:
        try:
            return functools.reduce(getattr, spec.target.split("."), model)
        except AttributeError:
            table = ep.constants  # tensors made inside forward live only in the program
    else:
        raise UserError(f"graph input {spec.arg.name} is a {spec.kind.name}; fusetune supports tensors only")
    if spec.target not in table:
        raise UserError(f"the rebuilt model has no {spec.kind.name.lower()} {spec.target!r}; run capture again")
    return table[spec.target]


def flat_args(ep, model, inputs, device):
    """Placeholder values in graph order: model state by target, user inputs by position."""
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    args, user_index = [], 0
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            if user_index >= len(inputs):
                raise UserError(f"get_inputs() gives {len(inputs)} inputs, fewer than the captured graph takes")
            value = inputs[user_index]
            user_index += 1
            if isinstance(spec.arg, ConstantArgument):  # a number, baked into the graph
                if value != spec.arg.value:
                    raise UserError(f"input {spec.arg.name} is {value!r} now but {spec.arg.value!r} when captured; "
                                    "run capture again")
                args.append(value)
                continue
        else:
            value = _state_tensor(model, ep, spec)
        expected = placeholders[spec.arg.name].meta["val"]
        if not isinstance(value, torch.Tensor) or value.shape != expected.shape:
            got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise UserError(f"{spec.arg.name} is {got} now but {tuple(expected.shape)} when captured; "
                            "run capture again")
        args.append(to_device(value.detach(), device))
    if user_index != len(inputs):
        raise UserError(f"get_inputs() gives {len(inputs)} inputs but the captured graph takes {user_index}")
    return args


def _as_captured(result, val):
    """result laid out with the strides capture saw (val's), where this run's kernel chose others:
    the graph's views were taken against those (a view that merges the heads of an attention's
    output is one only when the attention wrote them in the order capture's CPU kernel did, which a
    GPU backend may not)."""
    if not isinstance(result, torch.Tensor) or not isinstance(val, torch.Tensor) or result.shape != val.shape:
        return result
    strides = [(a, b) for a, b, size in zip(result.stride(), val.stride(), result.shape) if size > 1]
    if all(a == b for a, b in strides) or any(b == 0 for _, b in strides):  # (a broadcast view stays)
        return result
    return torch.empty_strided(val.shape, val.stride(), dtype=result.dtype, device=result.device).copy_(result)


class RecordingInterpreter(torch.fx.Interpreter):
    """Runs the graph on one device, keeping CPU copies of the requested values as they appear."""

    def __init__(self, gm, wanted, device):
        super().__init__(gm)  # garbage_collect_values (default) frees values after their last use
        self.wanted = set(wanted)
        self.device = device
        self.recorded = {}

    def run_node(self, n):
        result = _as_captured(super().run_node(n), n.meta.get("val"))
        if n.name in self.wanted:
            if not isinstance(result, torch.Tensor):
                raise UserError(f"value {n.name!r} is not a tensor when the graph runs")
            self.recorded[n.name] = result.detach().to("cpu", copy=True)
        return result

    def call_function(self, target, args, kwargs):
        # The graph was captured on the CPU; factory ops carry device=cpu and must follow the run.
        args, kwargs = torch.fx.node.map_aggregate((args, kwargs), self._retarget)
        return super().call_function(target, args, kwargs)

    def _retarget(self, x):
        return self.device if isinstance(x, torch.device) else x


def self_check(ep, outs, model, inputs):
    """The interpreter must reproduce the user's own forward, or every reference is suspect."""
    kinds = [s.kind for s in ep.graph_signature.output_specs]
    mine = [o for o, k in zip(outs, kinds) if k == OutputKind.USER_OUTPUT]
    theirs, _ = torch.utils._pytree.tree_flatten(model(*inputs))
    try:
        if len(mine) != len(theirs):
            raise AssertionError(f"{len(mine)} graph outputs but model returns {len(theirs)}")
        # A model with half values computes in half, rounding after every op; the graph computes in
        # float32 (half.py) and rounds where the model converts: a few roundings apart (each a
        # relative 5e-4 in float16, 4e-3 in bfloat16), in its float32 outputs too, more than
        # assert_close's defaults. fusetune's default tolerance there.
        has_half = any(isinstance(n.meta.get("val"), torch.Tensor) and n.meta["val"].dtype in HALF_DTYPES
                       for n in ep.graph.nodes)
        tol = {"atol": 1e-2, "rtol": 1e-2} if has_half else {}
        for i, (a, b) in enumerate(zip(mine, theirs)):
            torch.testing.assert_close(a, b, msg=lambda m, i=i: f"output {i}: {m}", **tol)
    except AssertionError as e:
        raise UserError(f"self-check failed: {first_line(e)}", status=1) from None


def write_tensors(out_dir, recorded, names):
    if sys.byteorder != "little":
        raise UserError("fusetune writes little-endian tensor files; this machine is big-endian")
    index = {}
    for name in names:
        t = recorded[name].contiguous()
        with atomic_path(os.path.join(out_dir, f"{name}.bin")) as tmp:
            # Raw bytes of any dtype; bool is one 0/1 byte per element, i.e. uint8.
            t.reshape(-1).view(torch.uint8).numpy().tofile(tmp)
        index[name] = {"file": f"{name}.bin", "shape": list(t.shape), "dtype": dtype_name(t.dtype)}
    write_json_atomic(os.path.join(out_dir, "tensors.json"), index)  # last: it marks the set complete


def make_tensors(work, names_path, out_dir, device, check=False):
    graph = load_graph_json(work)
    names = read_names(names_path, graph)
    device = pick_device(device)
    _, model, inputs = rebuild_model(graph)
    ep = load_program(work)
    known = {n.name for n in ep.graph.nodes}
    missing = [n for n in names if n not in known]
    if missing:
        raise UserError(f"graph.pt2 has no value {missing[0]!r}; graph.json and graph.pt2 disagree")
    model.to(device)
    inputs = [to_device(x, device) for x in inputs]
    strict_fp32()
    with torch.no_grad():
        args = flat_args(ep, model, inputs, device)
        interp = RecordingInterpreter(ep.graph_module, names, device)
        outs = interp.run(*args)
        del args
        if check:
            self_check(ep, outs, model, inputs)
    write_tensors(out_dir, interp.recorded, names)
    return interp.recorded


def main(argv=None):
    p = ArgumentParser(prog="python3 -m fusetune_py.tensors",
                       description="Write reference tensors of a captured graph.")
    p.add_argument("--work", required=True, help="directory holding graph.json and graph.pt2")
    p.add_argument("--names", required=True, help="JSON list of value names to save")
    p.add_argument("--out", required=True, help="directory for <name>.bin and tensors.json")
    p.add_argument("--device", choices=("cuda", "cpu"), default=None,
                   help="default: cuda when available, else cpu")
    p.add_argument("--self-check", action="store_true",
                   help="also check the graph's outputs against model(*inputs)")
    args = p.parse_args(argv)
    make_tensors(args.work, args.names, args.out, args.device, check=args.self_check)


if __name__ == "__main__":
    run_main(main)
