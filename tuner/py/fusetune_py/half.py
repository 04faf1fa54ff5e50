# Half-precision models (float16, bfloat16) rewritten to compute in float32, as fusetune's
# kernels do: half tensors stay at the model's boundary (graph.json's contract with the planner).
import os

import torch
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from .common import HALF_DTYPES, UserError, first_line, op_name, parse_frames

_TO_COPY = torch.ops.aten._to_copy.default
# meta key of a float32 value that the model holds in half (its dtype there): graph.json's
# "model_dtype", so that the planner may store it in half where every reader can read that.
MODEL_DTYPE = "fusetune_model_dtype"


def _half_dtype(node):
    """The half dtype of node's value (or of one of its tuple's), else None."""
    val = node.meta.get("val")
    for v in val if isinstance(val, (list, tuple)) else [val]:
        if isinstance(v, torch.Tensor) and v.dtype in HALF_DTYPES:
            return v.dtype
    return None


def _widens(node):
    return node.op == "call_function" and node.target is _TO_COPY and node.kwargs.get("dtype") == torch.float32


def _convert(graph, node, dtype):
    """node converted to dtype, at the graph's insertion point; it has node's source line."""
    new = graph.call_function(_TO_COPY, (node,), {"dtype": dtype})
    new.meta["val"] = _TO_COPY(node.meta["val"], dtype=dtype)
    new.meta["stack_trace"] = node.meta.get("stack_trace")
    return new


def _cannot_rewrite(node, why=""):
    # export_graph has no model path: the trace's last frame, the model's line where it calls the op.
    frames = parse_frames(node.meta.get("stack_trace") or "")
    notes = [f"{os.path.basename(file)}:{line}: {code}" for file, line, code in frames[-1:]] + ([why] if why else [])
    text = f"fusetune computes half-precision models in float32 and cannot rewrite {node.name} = {op_name(node.target)}"
    return UserError(text + (f" ({'; '.join(notes)})" if notes else ""))


def compute_half_in_float32(gm):
    """float16 and bfloat16 tensors stay at the model's boundary and every op computes in float32,
    as fusetune's kernels do: each half placeholder is converted once where the graph starts, an op
    that makes half values on purpose (x.half(), torch.full(..., dtype=torch.float16)) is a rounding
    whose readers get it back as float32, and each output the model gives in half is rounded last,
    so that the program's outputs keep their dtypes. A graph without half values is left as it is."""
    graph = gm.graph
    if not any(_half_dtype(n) for n in graph.nodes):
        return
    output = next(n for n in graph.nodes if n.op == "output")
    before = [_half_dtype(a) if isinstance(a, torch.fx.Node) else None for a in output.args[0]]
    for node in list(graph.nodes):
        # torch.export's check that a conversion's input is half: that input is float32 now.
        if node.target is torch.ops.aten._assert_tensor_metadata.default and \
                (node.args[3] if len(node.args) > 3 else node.kwargs.get("dtype")) in HALF_DTYPES:
            graph.erase_node(node)
    _convert_placeholders(graph)
    _round_explicit_halves(graph, output)
    _Float32Prop(gm).run_graph()
    _round_outputs(graph, output, before)
    _check_half_boundary(graph)
    graph.lint()
    gm.recompile()


def _convert_placeholders(graph):
    """Each half input, parameter, buffer or constant is read once, by its float32 conversion."""
    first = next(n for n in graph.nodes if n.op != "placeholder")
    for p in [n for n in graph.nodes if n.op == "placeholder"]:
        if _half_dtype(p) is None or not p.users:
            continue
        reader = next(iter(p.users))
        with graph.inserting_before(first):
            widened = _convert(graph, p, torch.float32)
        widened.meta[MODEL_DTYPE] = _half_dtype(p)
        # A placeholder has no source line: the conversion gets its first reader's.
        widened.meta["stack_trace"] = reader.meta.get("stack_trace")
        p.replace_all_uses_with(widened, delete_user_cb=lambda user: user is not widened)


def _round_explicit_halves(graph, output):
    """An op told to make half values (its dtype argument) is a rounding point: a conversion
    (x.half(), x.to(torch.bfloat16)) stays; another op (full, arange, sum(dtype=...)) computes in
    float32 and is rounded after it. The output reads the rounded value, every other reader its
    float32 conversion, which holds exactly the half values."""
    for node in list(graph.nodes):
        dtype = node.kwargs.get("dtype") if node.op == "call_function" else None
        if dtype not in HALF_DTYPES or _half_dtype(node) != dtype:
            continue
        readers = [user for user in node.users if user is not output]
        rounded = node
        if node.target is not _TO_COPY:
            node.kwargs = dict(node.kwargs, dtype=torch.float32)
            with graph.inserting_after(node):
                rounded = _convert(graph, node, dtype)
            output.replace_input_with(node, rounded)
        if readers:
            with graph.inserting_after(rounded):
                widened = _convert(graph, rounded, torch.float32)
            widened.meta[MODEL_DTYPE] = dtype
            for user in readers:
                user.replace_input_with(node, widened)


def _round_outputs(graph, output, before):
    """Each output that was half (`before`, by position) and is float32 now is rounded last, once
    however often it is returned (a buffer's update the model also returns)."""
    args, rounded = list(output.args[0]), {}
    for i, (arg, dtype) in enumerate(zip(args, before)):
        if dtype is None or _half_dtype(arg) is not None:
            continue
        if arg not in rounded:
            with graph.inserting_before(output):
                rounded[arg] = _convert(graph, arg, dtype)
        args[i] = rounded[arg]
    output.args = (type(output.args[0])(args),)


class _Float32Prop(FakeTensorProp):
    """Every node's meta["val"] again, in graph order, under the graph's own fake mode: the ops
    read float32 now. An op that cannot is named as the user's problem."""

    def __init__(self, gm):
        self.vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
        super().__init__(gm, torch._guards.detect_fake_mode(self.vals))
        self.extra_traceback = False  # the error is one line naming the node

    def run_graph(self):
        self.propagate_dont_convert_inputs(*self.vals)
        output = next(n for n in self.graph.nodes if n.op == "output")
        output.meta.pop("val", None)  # FakeTensorProp gives the output node one; export's has none

    def run_node(self, n):
        was = _half_dtype(n) if n.op == "call_function" else None
        if was:
            n.meta.pop("tensor_meta", None)  # it describes the half value
        try:
            result = super().run_node(n)
        except Exception as e:
            raise _cannot_rewrite(n, first_line(e)) from None
        if was and isinstance(n.meta.get("val"), torch.Tensor) and n.meta["val"].dtype == torch.float32:
            n.meta[MODEL_DTYPE] = was
        return result


def _check_half_boundary(graph):
    """Half values only where fusetune's kernels load and store them: placeholders read by their
    float32 conversion, roundings read by theirs or given as outputs."""
    for node in graph.nodes:
        if node.op == "output" or _half_dtype(node) is None:
            continue
        if node.op == "placeholder":
            ok = all(_widens(user) for user in node.users)
        else:
            ok = node.target is _TO_COPY and all(user.op == "output" or _widens(user) for user in node.users)
        if not ok:
            raise _cannot_rewrite(node)
