# Captures a user's PyTorch model as a core-ATen graph (graph.pt2) plus a JSON description
# (graph.json) that the C++ tuner reads without needing Python.
import contextlib
import inspect
import json
import math
import os
import re
import sys

import torch
from torch.export.graph_signature import ConstantArgument, InputKind, OutputKind, TensorArgument

from .common import (ArgumentParser, UserError, attribute_owner, build_model_and_inputs, check_input_dtypes, dtype_name,
                     first_line, json_float, keep_as_buffers, load_module, op_name, parse_frames, quiet, run_main,
                     sha256_file, atomic_path)
from .decompose import decompositions
from .graph_passes import (attention_as_one_op, attention_heads_grouped, fold_operand_scales, push_gathers,
                           reuse_cat_prefixes, scale_by_diagonals, split_long_cats)
from .half import MODEL_DTYPE, compute_half_in_float32
from .recurrent import lstm_as_one_op

FORMAT = "fusetune-graph"
VERSION = 1
_INPUT_KINDS = {InputKind.USER_INPUT: "input", InputKind.PARAMETER: "parameter",
                InputKind.BUFFER: "buffer", InputKind.CONSTANT_TENSOR: "constant"}


def plain_json(x):
    """get_init_inputs() values as JSON; whatever JSON cannot say faithfully becomes its repr."""
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else repr(x)
    if isinstance(x, (list, tuple)):
        return [plain_json(v) for v in x]
    return repr(x)


def encode_arg(x):
    """Encode an fx node argument so that the C++ side can tell values, numbers and enums apart."""
    if isinstance(x, torch.fx.Node):
        return {"value": x.name}
    if x is None or isinstance(x, (bool, int, str)):  # json already writes bools as true/false
        return x
    if isinstance(x, float):
        return json_float(x)
    if isinstance(x, (list, tuple)):
        return [encode_arg(v) for v in x]
    if isinstance(x, torch.dtype):
        return {"dtype": dtype_name(x)}
    return {"other": repr(x)}


def tensor_meta(t):
    return {"shape": list(t.shape), "dtype": dtype_name(t.dtype), "strides": list(t.stride())}


def source_of(node, model_path):
    return trace_source(node.meta.get("stack_trace") or "", model_path)


def located(where):
    """A message's " (model.py:14: code)" suffix, or nothing where the line is unknown."""
    return f" ({where})" if where else ""


def trace_source(trace, model_path):
    """Point at the user's own line when there is one: that is what a person reading a report wants."""
    frames = parse_frames(trace)
    if not frames:
        return ""
    mine = [f for f in frames if os.path.realpath(f[0]) == os.path.realpath(model_path)]
    file, line, code = (mine or frames)[-1]
    return f"{os.path.basename(file)}:{line}: {code}"


def check_static_sizes(ep, model_path):
    """torch.export gives a size it cannot know before running (nonzero's, masked_select's, a
    number read out of a tensor) a symbol; no kernel plan fixed ahead can lower that."""
    for node in ep.graph.nodes:
        val = node.meta.get("val")
        vals = val if isinstance(val, (list, tuple)) else [val]
        symbolic = any(isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)) or
                       (isinstance(v, torch.Tensor) and not all(isinstance(d, int) for d in v.shape))
                       for v in vals)
        if symbolic and node.op == "call_function":
            where = source_of(node, model_path)
            raise UserError(f"{op_name(node.target)}" + located(where) +
                            " has a size or value that depends on the data forward computes; fusetune lowers one "
                            "fixed graph of kernels, so write forward without it")


def describe_values(ep):
    """Shapes, dtypes and roles of every placeholder and tensor-producing node."""
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs}
    values, user_index = {}, 0
    for node in ep.graph.nodes:
        val = node.meta.get("val")
        if node.op == "placeholder":
            spec = specs[node.name]
            if spec.kind == InputKind.USER_INPUT and isinstance(spec.arg, ConstantArgument):
                # A number get_inputs() gives: torch.export wrote its value into the ops using it.
                number = spec.arg.value  # check_input_dtypes let only finite numbers through
                values[node.name] = {"shape": [], "strides": [], "dtype": type(number).__name__,
                                     "kind": "scalar_input", "index": user_index, "value": number}
                user_index += 1
                continue
            if spec.kind not in _INPUT_KINDS or not isinstance(val, torch.Tensor):
                raise UserError(f"graph input {node.name} is a {spec.kind.name}; fusetune supports tensors only")
            entry = dict(tensor_meta(val), kind=_INPUT_KINDS[spec.kind])
            if spec.kind == InputKind.USER_INPUT:
                entry["index"] = user_index
                user_index += 1
            else:
                entry["target"] = spec.target
            values[node.name] = entry
        elif node.op == "call_function":
            if isinstance(val, torch.Tensor):
                values[node.name] = dict(tensor_meta(val), kind="intermediate")
                if MODEL_DTYPE in node.meta:  # computed in float32, held in half by the model
                    values[node.name]["model_dtype"] = dtype_name(node.meta[MODEL_DTYPE])
            elif isinstance(val, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in val):
                items = [tensor_meta(v) if isinstance(v, torch.Tensor) else None for v in val]
                values[node.name] = {"kind": "tuple", "items": items}
    return values


def describe_nodes(ep, model_path):
    nodes = []
    for node in ep.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if node.op != "call_function":
            raise UserError(f"graph node {node.name} is a {node.op} (control flow?); fusetune supports "
                            "straight-line graphs only")
        if node.target is torch.ops.aten._assert_tensor_metadata.default:
            continue  # torch.export's check of a conversion's input: nothing to compute
        nodes.append({"name": node.name, "op": op_name(node.target),
                      "args": encode_arg(list(node.args)),
                      "kwargs": {k: encode_arg(v) for k, v in node.kwargs.items()},
                      "source": source_of(node, model_path)})
    return nodes


def describe_outputs(ep):
    """User outputs, and separately the state the model updates (e.g. BatchNorm running stats)."""
    outputs, mutations = [], []
    for spec in ep.graph_signature.output_specs:
        name = spec.arg.name
        if spec.kind == OutputKind.USER_OUTPUT:
            outputs.append(name)
        elif spec.kind == OutputKind.BUFFER_MUTATION:
            mutations.append({"value": name, "kind": "buffer", "target": spec.target})
        elif spec.kind == OutputKind.USER_INPUT_MUTATION:
            mutations.append({"value": name, "kind": "input", "target": spec.target})
        else:
            raise UserError(f"graph output {name} is a {spec.kind.name}; fusetune does not support it")
    return outputs, mutations


@contextlib.contextmanager
def written_back(model):
    """Keeps forward's reassignments of tensor attributes (`self.h = ...`) while torch.export traces
    model inside: it records them, by path, and writes each reassigned buffer's last value into the
    buffer as forward returns. torch.export does that for buffers of the root module only: it drops
    the others' silently, and for plain tensor attributes (not buffers) it puts the old tensor back
    and only warns. Yields a dict, filled on exit, of the plain ones' paths and the tensors they held
    before (None for an attribute forward creates)."""
    paths = {id(m): path for path, m in model.named_modules()}
    first = {}  # path: (module, name, the tensor it held before forward assigned it)
    assign = torch.nn.Module.__setattr__

    def recording(module, name, value):
        if (id(module) in paths and isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter)
                and name not in module._parameters):
            path = f"{paths[id(module)]}.{name}".lstrip(".")
            first.setdefault(path, (module, name, module._buffers.get(name, module.__dict__.get(name))))
        assign(module, name, value)

    def write_back(_model, _args, _output):
        for module, name, before in first.values():
            if isinstance(before, torch.Tensor) and module._buffers.get(name, before) is not before:
                value = module._buffers[name]
                module._buffers[name] = before
                before.copy_(value)

    plain = {}
    hook = model.register_forward_hook(write_back)
    torch.nn.Module.__setattr__ = recording
    try:
        yield plain
    finally:
        torch.nn.Module.__setattr__ = assign
        hook.remove()
    plain.update({path: before for path, (module, name, before) in first.items() if name not in module._buffers})


# torch.export's refusal of a plain tensor attribute that forward changes in place (`self.h.copy_(x)`).
_MUTATED_CONSTANT = re.compile(r"Constant (\S+) is mutated")


def _plain_tensor(model, path):
    """The plain tensor attribute of model at path ("h", "cell.h"), or None."""
    try:
        owner, name = attribute_owner(model, path)
    except AttributeError:
        return None
    value = owner.__dict__.get(name)
    return value if isinstance(value, torch.Tensor) else None


def _same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(
        a.detach().contiguous().reshape(-1).view(torch.uint8), b.detach().contiguous().reshape(-1).view(torch.uint8))


def _changed_in_place(model, message, originals):
    """The plain tensor attributes (path -> tensor) that a refused trace changed in place: the one
    torch.export's message names ("Constant hidden is mutated"), else every one whose value differs
    from originals' (the trace changes it before the refusal), so that other wording in another
    torch version does not turn state into a capture error."""
    named = _MUTATED_CONSTANT.search(message)
    held = _plain_tensor(model, named.group(1)) if named else None
    if held is not None:
        return {named.group(1): held}
    return {path: t for path, before in originals.items()
            if (t := _plain_tensor(model, path)) is not None and not _same_bits(t, before)}


_RAISED = "The following call raised this error:"  # torch.export's message: the user's frames follow


def export_error(e, model_path):
    """torch.export's failure in one line, with the model's line that raised it; forward branching on
    (or sizing a tensor by) values it computes says so, since no fixed kernel plan can lower that."""
    text = str(e)
    where = trace_source(text[text.index(_RAISED):], model_path) if _RAISED in text else ""
    if "data-dependent" in first_line(e):
        why = ("forward's control flow or a tensor's size depends on values it computes"
               + located(where) +
               "; fusetune lowers one fixed graph of kernels, so write forward without that branch or size")
    else:
        why = first_line(e) + located(where)
    return f"torch.export could not capture {os.path.basename(model_path)}: {why}"


def _export(model, inputs, model_path, originals):
    """(decomposed program, {}, created, masks), or (None, state, created, []) where state maps
    the paths of the plain tensor attributes forward assigns or changes in place to the tensors
    they held before, which the caller has to make buffers first. created: the attributes forward
    assigns a tensor that __init__ did not create as one. masks: (stack trace, buffer names) of
    each written-out attention whose causal mask, read from buffers, became one attention op.
    originals: the plain tensor attributes' values before any trace."""
    try:
        with quiet():
            with written_back(model) as assigned:
                ep = torch.export.export(model, tuple(inputs))
            state = {path: t for path, t in assigned.items() if isinstance(t, torch.Tensor)}
            masks = []
            if not state:  # (functionalization, which finds a constant changed in place, runs here)
                scale_by_diagonals(ep.graph_module)  # before the decompositions write diag out
                masks = attention_as_one_op(ep)  # before they write softmax out
                attention_heads_grouped(ep.graph_module)
                lstm_as_one_op(ep.graph_module)  # before the decompositions write it out step by step
                ep = ep.run_decompositions(decompositions())
    except Exception as e:
        found = _changed_in_place(model, str(e), originals)
        if not found:
            raise UserError(export_error(e, model_path)) from None
        return None, found, [], []
    return (None if state else ep), state, [path for path in assigned if path not in state], masks


def export_graph(model, inputs, model_path):
    """(program, state): state lists the plain tensor attributes forward reassigns or changes in
    place (a recurrent model's hidden state), which become non-persistent buffers of model so that
    the program updates them. A tensor forward stores in an attribute __init__ did not create as a
    tensor (a cache) is not kept: the program computes every call as the traced one, and a note
    says so (verification finds out if a later call read it)."""
    # Tracing changes a plain attribute that forward changes in place, before torch.export refuses it.
    originals = {f"{owner}.{name}".lstrip("."): t.clone() for owner, m in model.named_modules()
                 for name, t in vars(m).items() if isinstance(t, torch.Tensor)}
    state = []
    base = os.path.basename(model_path)
    ep, found, created, masks = _export(model, inputs, model_path, originals)
    for path in created:
        print(f"note: {base}: forward stores a tensor in self.{path}, which __init__ does not create as a tensor; "
              "ModelNew does not keep it (create it in __init__ for state kept from call to call)", file=sys.stderr)
    while found:  # each round makes at least one more attribute a buffer
        for path, before in found.items():
            before.copy_(originals[path])
        keep_as_buffers(model, found)
        state += found
        ep, found, _, masks = _export(model, inputs, model_path, originals)
    for trace, buffers in masks:
        where = trace_source(trace, model_path)
        print(f"note: {where or base}: the attention's mask, read from " + ", ".join(f"self.{b}" for b in buffers) +
              ", is causal as captured; ModelNew's attention kernel applies causality itself and does not read it "
              "(a different mask loaded into it later is not followed)", file=sys.stderr)
    compute_half_in_float32(ep.graph_module)  # first: the other passes then see float32 ops only
    push_gathers(ep.graph_module)
    fold_operand_scales(ep.graph_module)
    reuse_cat_prefixes(ep.graph_module)
    split_long_cats(ep.graph_module)
    name_outputs(ep)
    return ep, state


def name_outputs(ep):
    """The signature names the values the output node reads: a pass may have given it others (a
    half output's rounding), and ep.module(), torch.export.save and graph.json go by the names."""
    output = next(n for n in ep.graph.nodes if n.op == "output")
    for spec, arg in zip(ep.graph_signature.output_specs, output.args[0]):
        if isinstance(arg, torch.fx.Node) and isinstance(spec.arg, TensorArgument) and spec.arg.name != arg.name:
            spec.arg = TensorArgument(name=arg.name)  # not renamed in place: another spec may hold it


class _DefaultRef:
    """Stands for a default value in generated code: ModelNew reads Model's own defaults."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"_DEFAULTS[{self.name!r}]"


def init_signature(model_class):
    """Model.__init__'s parameter list (no annotations; defaults by reference), for ModelNew
    to take exactly the same arguments, and the call that forwards them."""
    sig = inspect.signature(model_class.__init__)
    params = list(sig.parameters.values())
    plain = [p.replace(annotation=p.empty, default=p.default if p.default is p.empty else _DefaultRef(p.name))
             for p in params]
    text = str(sig.replace(parameters=plain, return_annotation=sig.empty))
    call = []
    for p in params[1:]:
        if p.kind is p.VAR_POSITIONAL:
            call.append("*" + p.name)
        elif p.kind is p.VAR_KEYWORD:
            call.append("**" + p.name)
        elif p.kind is p.KEYWORD_ONLY:
            call.append(f"{p.name}={p.name}")
        else:
            call.append(p.name)
    return {"def": text, "call": ", ".join(call)}


def loaded_library(prefix):
    """Path of the shared library this process loaded whose name starts with prefix (None if none):
    PyTorch loads its own CUDA libraries, which the tuner must measure with."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "/" in line}
    except OSError:
        return None
    found = sorted(p for p in paths if os.path.basename(p).startswith(prefix))
    return found[0] if found else None


def capture(model_path, out_dir, seed, program=True):
    """Writes graph.json and, with program, graph.pt2 (the search runs it for its reference tensors;
    planning and compiling read graph.json alone, and serializing an unrolled recurrent model's
    graph takes minutes). Without it an older graph.pt2 is removed, so that no stale pair is left."""
    model_path = os.path.abspath(model_path)
    base = os.path.basename(model_path)
    sha256 = sha256_file(model_path) if os.path.isfile(model_path) else None  # of the bytes we import
    module = load_module(model_path, "fusetune_user_model")
    model, inputs, init_args = build_model_and_inputs(module, seed)
    check_input_dtypes(base, inputs)
    training = bool(model.training)
    ep, state = export_graph(model, inputs, model_path)
    check_static_sizes(ep, model_path)
    outputs, mutations = describe_outputs(ep)
    doc = {
        "format": FORMAT, "version": VERSION,
        "model": {"path": model_path, "sha256": sha256, "training": training,
                  "init_args": plain_json(init_args), "init_signature": init_signature(module.Model),
                  "state_attributes": state},
        "torch_version": torch.__version__, "seed": seed,
        "libraries": {"cublaslt": loaded_library("libcublasLt.so"), "cudnn": loaded_library("libcudnn.so")},
        "values": describe_values(ep),
        "nodes": describe_nodes(ep, model_path),
        "outputs": outputs, "mutations": mutations,
    }
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    pt2 = os.path.join(out_dir, "graph.pt2")
    if not program:
        if os.path.exists(pt2):
            os.unlink(pt2)
        with atomic_path(os.path.join(out_dir, "graph.json")) as tmp_json:
            with open(tmp_json, "w") as f:
                f.write(text)
        return doc
    # Inputs are rebuilt from the seed; storing them would make graph.pt2 as big as the inputs.
    ep.example_inputs = None
    # Both files are staged first so that a failure leaves the old pair (or nothing) in place.
    with atomic_path(pt2) as tmp_pt2, atomic_path(os.path.join(out_dir, "graph.json")) as tmp_json:
        with quiet():
            torch.export.save(ep, tmp_pt2)
        with open(tmp_json, "w") as f:
            f.write(text)
    return doc


def main(argv=None):
    p = ArgumentParser(prog="python3 -m fusetune_py.capture",
                       description="Capture a model as a core-ATen graph.")
    p.add_argument("--model", required=True, help="KernelBench-style model file")
    p.add_argument("--out", required=True, help="directory for graph.json and graph.pt2")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--graph-only", action="store_true", help="write graph.json alone (no graph.pt2)")
    args = p.parse_args(argv)
    doc = capture(args.model, args.out, args.seed, program=not args.graph_only)
    print(f"captured {os.path.basename(args.model)}: {len(doc['nodes'])} nodes, "
          f"{len(doc['outputs'])} outputs -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    run_main(main)
