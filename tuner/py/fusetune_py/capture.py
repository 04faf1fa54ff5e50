# Captures a user's PyTorch model as a core-ATen graph (graph.pt2) plus a JSON description
# (graph.json) that the C++ tuner reads without needing Python.
import argparse
import inspect
import json
import math
import os
import sys

import torch
from torch.export.graph_signature import ConstantArgument, InputKind, OutputKind, TensorArgument

from .common import (UserError, build_model_and_inputs, check_input_dtypes, dtype_name, first_line, json_float,
                     load_module, op_name, parse_frames, quiet, run_main, sha256_file, atomic_path)
from .half import MODEL_DTYPE, compute_half_in_float32

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
    """Point at the user's own line when there is one: that is what a person reading a report wants."""
    frames = parse_frames(node.meta.get("stack_trace") or "")
    if not frames:
        return ""
    mine = [f for f in frames if os.path.realpath(f[0]) == os.path.realpath(model_path)]
    file, line, code = (mine or frames)[-1]
    return f"{os.path.basename(file)}:{line}: {code}"


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


def _moments(t, dims):
    """Mean and sum of squared deviations of t over dims (kept as size 1), and the count, in one
    pass over t: the sums of d = t - k and of d * d, where k is each row's first element.
    Shifting by a value of the data keeps sum(d * d) - sum(d)^2 / m from cancelling when the mean
    is large against the spread (the centred form needs a second pass, E[x^2] - E[x]^2 cancels)."""
    m = 1
    for d in dims:
        m *= t.shape[d]
    k = t[tuple(slice(0, 1) if d in dims else slice(None) for d in range(t.dim()))]
    d = t - k
    s1, s2 = d.sum(dims, keepdim=True), (d * d).sum(dims, keepdim=True)
    return k + s1 / m, (s2 - s1 * s1 / m).clamp_min(0.0), m


def _layer_norm(x, normalized_shape, weight, bias, eps):
    """native_layer_norm as one-pass moments and rsqrt: one row group (two passes)."""
    dims = list(range(x.dim() - len(normalized_shape), x.dim()))
    mean, m2, m = _moments(x, dims)
    rstd = torch.rsqrt(m2 / m + eps)
    out = (x - mean) * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean, rstd


def _group_norm(x, weight, bias, n, c, hw, group, eps):
    """native_group_norm the same way over x viewed as (n, group, c / group, hw), the affine
    parameters viewed to match, so that the whole norm stays one row group."""
    grouped = x.view(n, group, c // group, hw)
    mean, m2, m = _moments(grouped, [2, 3])
    rstd = torch.rsqrt(m2 / m + eps)
    out = (grouped - mean) * rstd
    if weight is not None:
        out = out * weight.view(1, group, c // group, 1)
    if bias is not None:
        out = out + bias.view(1, group, c // group, 1)
    return out.view(x.shape), mean.view(n, group), rstd.view(n, group)


def _channel_view(t, x):
    """A per-channel vector viewed to broadcast over x's (N, C, ...) layout."""
    return t.view([1, -1] + [1] * (x.dim() - 2))


# Below this many channels, statistics over (N, spatial) are taken in two steps (see _channel_stats):
# one row per channel would leave most of a GPU's SMs idle (132 on the H200, two rows each).
SPLIT_STATS_BELOW_CHANNELS = 256


def _channel_stats(x):
    """Mean and biased variance of x (N, C, ...) per channel, kept as (1, C, 1, ...), in one pass
    over x (see _moments). With few channels and spatial dimensions, in two steps so that the long
    reduction has enough rows to fill the GPU: the moments per (n, c) row, then over N, exactly, by
    the pairwise combination of Chan et al. (every row has m elements)."""
    spatial = list(range(2, x.dim()))
    if not (spatial and x.shape[0] > 1 and x.shape[1] < SPLIT_STATS_BELOW_CHANNELS):
        mean, m2, m = _moments(x, [0] + spatial)
        return mean, m2 / m
    row_mean, row_m2, m = _moments(x, spatial)
    mean = row_mean.mean(0, keepdim=True)
    spread = row_mean - mean
    return mean, (row_m2.sum(0, keepdim=True) + (spread * spread).sum(0, keepdim=True) * m) / (m * x.shape[0])


def _batch_stats(x, weight, bias, eps):
    """Normalisation of x by its statistics per channel (over N and the spatial dimensions).
    Returns out, mean, biased var, rstd."""
    mean, var = _channel_stats(x)
    rstd = torch.rsqrt(var + eps)
    out = (x - mean) * rstd
    if weight is not None:
        out = out * _channel_view(weight, x)
    if bias is not None:
        out = out + _channel_view(bias, x)
    return out, mean.view(-1), var.view(-1), rstd.view(-1)


def _batch_norm_no_stats(x, weight, bias, training, momentum, eps):
    """Batch statistics without running ones (InstanceNorm is this over x viewed as (1, N*C, ...))."""
    out, mean, _, rstd = _batch_stats(x, weight, bias, eps)
    return out, mean, rstd


def _batch_norm_functional(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """BatchNorm in training mode: batch statistics, and the running statistics updated as PyTorch
    does (the variance's unbiased estimate), returned for the caller to store. Each update starts
    from the batch statistic (old + (new - old) * momentum), so that it joins the statistics' row
    group as a per-channel output instead of needing a kernel of its own."""
    out, mean, var, rstd = _batch_stats(x, weight, bias, eps)
    n = x.numel() // x.shape[1]
    new_mean = running_mean + (mean - running_mean) * momentum
    new_var = running_var + (var * (n / max(n - 1, 1)) - running_var) * momentum
    return out, mean, rstd, new_mean, new_var


def _batch_norm_no_training(x, weight, bias, running_mean, running_var, momentum, eps):
    """BatchNorm in eval mode: the running statistics, elementwise. The variance is broadcast before
    anything is computed from it, so that every op is over x's elements and the whole norm fuses
    into the chain that makes x (e.g. a convolution's epilogue)."""
    out = (x - _channel_view(running_mean, x)) * torch.rsqrt(_channel_view(running_var, x).expand(x.shape) + eps)
    if weight is not None:
        out = out * _channel_view(weight, x)
    if bias is not None:
        out = out + _channel_view(bias, x)
    return out, x.new_empty(0), x.new_empty(0)


def _var(x, dim=None, *, correction=None, keepdim=False):
    """var (and so std) as mean, then the sum of squared deviations over n - correction."""
    dims = list(range(x.dim())) if dim is None or len(dim) == 0 else list(dim)
    n = 1
    for d in dims:
        n *= x.shape[d]
    centred = x - x.mean(dims, keepdim=True)
    return (centred * centred).sum(dims, keepdim=keepdim) / float(max(n - (1 if correction is None else correction), 0))


def _nll_loss_forward(self, target, weight, reduction, ignore_index):
    """nll_loss over classes (N, C) without class weights: the log-probability at each target
    gathered, ignored targets counting 0, and the mean over the counted ones as a float sum (so
    that no int64 count is reduced). Other forms keep torch's decomposition."""
    if weight is not None or self.dim() != 2:
        from torch._decomp.decompositions import nll_loss_forward
        return nll_loss_forward(self, target, weight, reduction, ignore_index)
    counted = target != ignore_index
    picked = torch.gather(self, 1, torch.where(counted, target, 0).unsqueeze(1)).squeeze(1)
    loss = torch.where(counted, -picked, 0.0)
    total = counted.to(self.dtype).sum()
    if reduction == 0:  # none
        return loss, total
    return (loss.sum() / total if reduction == 1 else loss.sum()), total


def _safe_softmax(x, dim, dtype=None):
    """scaled_dot_product_attention's softmax, whose rows that are wholly -inf (masked out) are 0,
    not NaN: such a row is the one whose maximum is -inf, so the guard reads the softmax's own
    statistic and stays in its row group (torch's decomposition tests every element again)."""
    if dtype is not None:
        x = x.to(dtype)
    top = torch.amax(x, dim, keepdim=True)
    e = torch.exp(x - top)
    return torch.where(top == float("-inf"), 0.0, e / e.sum(dim, keepdim=True))


def _max_dim(x, dim, keepdim=False):
    """torch.max(x, dim): amax and argmax over the same rows (one row group in the planner)."""
    return torch.amax(x, dim, keepdim), torch.argmax(x, dim, keepdim)


def _min_dim(x, dim, keepdim=False):
    return torch.amin(x, dim, keepdim), torch.argmin(x, dim, keepdim)


def _any(x, dim=None, keepdim=False):
    """any over dimensions (all of them by default): the maximum of x != 0, as floats, is not 0."""
    dims = list(range(x.dim())) if dim is None else dim
    return torch.amax((x != 0).to(torch.float32), dims, keepdim) != 0


def _all(x, dim=None, keepdim=False):
    dims = list(range(x.dim())) if dim is None else dim
    return torch.amin((x != 0).to(torch.float32), dims, keepdim) != 0


def _gather_rows(x, d, idx, wrap):
    """x indexed along dimension d by the int64 tensor idx (its dimensions in place of d): a gather
    from x viewed with idx's dimensions inserted before d; `wrap` counts negative indices from the
    end, as indexing does (index_select and embedding refuse them: the gather's range check)."""
    m, shape = idx.dim(), list(x.shape)
    out_shape = shape[:d] + list(idx.shape) + shape[d + 1:]
    table = x.reshape(shape[:d] + [1] * (m - 1) + shape[d:]).expand(shape[:d] + list(idx.shape[:-1]) + shape[d:])
    if wrap:
        idx = torch.where(idx < 0, idx + shape[d], idx)
    idx = idx.reshape([1] * d + list(idx.shape) + [1] * (len(shape) - d - 1)).expand(out_shape)
    return torch.gather(table, d + m - 1, idx)


def _index(x, indices):
    """x[..., idx, ...] with one int64 tensor indexing one dimension (a relative position table
    read by index). Other forms (several index tensors, bool masks) are left to torch.export."""
    tensors = [(d, i) for d, i in enumerate(indices) if i is not None]
    if len(tensors) != 1 or tensors[0][1].dtype != torch.int64 or tensors[0][1].dim() == 0:
        return NotImplemented
    return _gather_rows(x, tensors[0][0], tensors[0][1], wrap=True)


def _index_select(x, dim, idx):
    if idx.dtype != torch.int64 or x.dim() == 0:
        return NotImplemented
    return _gather_rows(x, dim % x.dim(), idx.reshape(-1), wrap=False)


def _embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    if indices.dtype != torch.int64 or indices.dim() == 0:
        return NotImplemented
    return _gather_rows(weight, 0, indices, wrap=False)


def decompositions():
    """Core ATen, plus softmax, log_softmax, vector norms, var, layer, group and batch norm written
    out in reductions and elementwise ops, which the planner fuses back into one row group each;
    max and min over a dimension as their value and index reductions, any and all as a float
    maximum and minimum, indexing by one tensor (index, index_select, embedding) as a gather."""
    from torch._decomp import get_decompositions
    table = torch.export.default_decompositions()
    table.update(get_decompositions([torch.ops.aten._softmax, torch.ops.aten._log_softmax,
                                     torch.ops.aten.linalg_vector_norm]))
    table[torch.ops.aten.var.correction] = _var
    table[torch.ops.aten.native_layer_norm.default] = _layer_norm
    table[torch.ops.aten.native_group_norm.default] = _group_norm
    table[torch.ops.aten._native_batch_norm_legit.no_stats] = _batch_norm_no_stats
    table[torch.ops.aten._native_batch_norm_legit_functional.default] = _batch_norm_functional
    table[torch.ops.aten._native_batch_norm_legit_no_training.default] = _batch_norm_no_training
    table[torch.ops.aten.nll_loss_forward.default] = _nll_loss_forward
    table[torch.ops.aten._safe_softmax.default] = _safe_softmax
    table[torch.ops.aten.max.dim] = _max_dim
    table[torch.ops.aten.min.dim] = _min_dim
    for op in (torch.ops.aten.any.dim, torch.ops.aten.any.dims, torch.ops.aten.any.default):
        table[op] = _any
    for op in (torch.ops.aten.all.dim, torch.ops.aten.all.default):
        table[op] = _all
    table[torch.ops.aten.index.Tensor] = _index
    table[torch.ops.aten.index_select.default] = _index_select
    table[torch.ops.aten.embedding.default] = _embedding
    return table


def export_graph(model, inputs, base):
    try:
        with quiet():
            ep = torch.export.export(model, tuple(inputs)).run_decompositions(decompositions())
    except Exception as e:
        raise UserError(f"torch.export could not capture {base}: {first_line(e)}") from None
    compute_half_in_float32(ep.graph_module)  # first: the other passes then see float32 ops only
    push_gathers(ep.graph_module)
    fold_operand_scales(ep.graph_module)
    reuse_cat_prefixes(ep.graph_module)
    split_long_cats(ep.graph_module)
    name_outputs(ep)
    return ep


def name_outputs(ep):
    """The signature names the values the output node reads: a pass may have given it others (a
    half output's rounding), and ep.module(), torch.export.save and graph.json go by the names."""
    output = next(n for n in ep.graph.nodes if n.op == "output")
    for spec, arg in zip(ep.graph_signature.output_specs, output.args[0]):
        if isinstance(arg, torch.fx.Node) and isinstance(spec.arg, TensorArgument) and spec.arg.name != arg.name:
            spec.arg = TensorArgument(name=arg.name)  # not renamed in place: another spec may hold it


# The parts one cat kernel reads: fusetune's kernels take at most 12 tensors (kMaxSlots in
# templates/fusetune_args.h), one of them the output.
MAX_CAT_PARTS = 11


def _cat_dim(node):
    """The dimension a cat node concatenates along, counted from 0."""
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    return dim % node.meta["val"].dim()


def split_long_cats(gm):
    """A cat of more parts than one kernel reads becomes a tree of cats over consecutive runs of at
    most MAX_CAT_PARTS parts (an RNN's outputs stacked over its time steps): the same values, each
    level one more pass over the bytes."""
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not torch.ops.aten.cat.default:
            continue
        level = list(node.args[0])
        if len(level) <= MAX_CAT_PARTS:
            continue
        dim = _cat_dim(node)
        with graph.inserting_before(node):
            while len(level) > MAX_CAT_PARTS:
                runs = [level[i:i + MAX_CAT_PARTS] for i in range(0, len(level), MAX_CAT_PARTS)]
                level = []
                for run in runs:
                    if len(run) == 1:
                        level.append(run[0])
                        continue
                    part = graph.call_function(torch.ops.aten.cat.default, (run, dim))
                    part.meta["val"] = torch.ops.aten.cat.default([r.meta["val"] for r in run], dim)
                    part.meta["stack_trace"] = node.meta.get("stack_trace")
                    level.append(part)
        node.args = (level,) + tuple(node.args[1:])
    graph.lint()
    gm.recompile()


def reuse_cat_prefixes(gm):
    """A cat whose first parts are an earlier cat's, along the same dimension, reads that cat in
    their place: cat([a, b, c], 1) after d = cat([a, b], 1) becomes cat([d, c], 1), the same
    values and bytes. A dense block's growing concatenations become pairs (a kernel reads at most
    a dozen tensors)."""
    graph = gm.graph
    cats = []  # (node, dim, its parts as the model wrote them)
    for node in graph.nodes:
        if node.op != "call_function" or node.target is not torch.ops.aten.cat.default:
            continue
        parts = list(node.args[0])
        dim = _cat_dim(node)
        best = None
        for earlier, earlier_dim, earlier_parts in cats:
            n = len(earlier_parts)
            if earlier_dim == dim and 1 < n < len(parts) and parts[:n] == earlier_parts and (best is None or n > len(best[2])):
                best = (earlier, earlier_dim, earlier_parts)
        if best is not None:
            node.args = ([best[0]] + parts[len(best[2]):],) + tuple(node.args[1:])
        cats.append((node, dim, parts))
    graph.lint()
    gm.recompile()


def _pushable(gather):
    """The operands of the pointwise op that `gather` reads, each marked whether it must be gathered
    too (it has the op's shape) or broadcasts along the gathered dimension as it is; None when the
    gather cannot move into its operands."""
    src, dim, index = (list(gather.args) + [None])[:3]
    if gather.kwargs.get("sparse_grad") or len(gather.args) > 3 or not isinstance(src, torch.fx.Node):
        return None
    if src.op != "call_function" or torch.Tag.pointwise not in getattr(src.target, "tags", ()) or any(
            isinstance(v, torch.fx.Node) for v in src.kwargs.values()):
        return None
    shape, idx_shape = src.meta["val"].shape, index.meta["val"].shape
    dim %= len(shape)
    if shape[dim] == 1 or any(idx_shape[d] != shape[d] for d in range(len(shape)) if d != dim):
        return None  # nothing to gather along dim, or a broadcast operand would not line up with the index
    operands = []
    for a in src.args:
        if not isinstance(a, torch.fx.Node):
            operands.append((a, False))
            continue
        val = a.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.dtype != src.meta["val"].dtype:
            return None
        if val.shape == shape:
            operands.append((a, True))
            continue
        aligned = (1,) * (len(shape) - val.dim()) + tuple(val.shape)
        if val.dim() > len(shape) or aligned[dim] != 1 or any(n not in (1, m) for n, m in zip(aligned, shape)):
            return None  # broadcast along other dimensions and full along the gathered one
        operands.append((a, False))
    if not any(gathered for _, gathered in operands):
        return None  # the result must take the index's shape (and its range check) from a gather
    return dim, index, operands


def push_gathers(gm):
    """gather(f(a, b), dim, index) becomes f(gather(a, dim, index), b) for a pointwise f, an operand
    b that is constant along dim (size 1 there), and an index shaped like f's result outside dim:
    the gather then reads f's inputs at the index instead of f's whole result, which its group
    would otherwise write out (cross-entropy's log-softmax: the logits' size written, one element
    per row read back). Repeated while it applies; a gather the model returns stays (its name is
    the output's)."""
    graph = gm.graph
    output = next(n for n in graph.nodes if n.op == "output")
    changed = True
    while changed:
        changed = False
        for gather in list(graph.nodes):
            if gather.op != "call_function" or gather.target is not torch.ops.aten.gather.default or output in gather.users:
                continue
            found = _pushable(gather)
            if found is None:
                continue
            dim, index, operands = found
            src = gather.args[0]
            with graph.inserting_before(gather):
                args = []
                for a, gathered in operands:
                    if gathered:
                        a = graph.call_function(torch.ops.aten.gather.default, (a, dim, index))
                        a.meta["val"] = torch.ops.aten.gather.default(a.args[0].meta["val"], dim, index.meta["val"])
                        a.meta["stack_trace"] = gather.meta.get("stack_trace")
                    args.append(a)
                moved = graph.call_function(src.target, tuple(args), dict(src.kwargs))
                vals = [x.meta["val"] if isinstance(x, torch.fx.Node) else x for x in args]
                moved.meta["val"] = src.target(*vals, **src.kwargs)
                moved.meta["stack_trace"] = src.meta.get("stack_trace")
            gather.replace_all_uses_with(moved)
            graph.erase_node(gather)
            if not src.users:
                graph.erase_node(src)
            changed = True
    graph.eliminate_dead_code()
    graph.lint()
    gm.recompile()


# Views between a scaled value and the GEMM that reads it.
_VIEWS = {torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default, torch.ops.aten.expand.default,
          torch.ops.aten.permute.default, torch.ops.aten.unsqueeze.default, torch.ops.aten.squeeze.dim,
          torch.ops.aten.squeeze.dims, torch.ops.aten.alias.default}
_SCALES = {torch.ops.aten.mul.Tensor: False, torch.ops.aten.mul.Scalar: False, torch.ops.aten.div.Tensor: True,
           torch.ops.aten.div.Scalar: True}  # op -> whether it divides


def _scale_of(node):
    """(x, c) when node is x * c or x / c (c / x would not do) for a floating tensor x and a
    number c (as the factor x is multiplied by), laid out as x is; else None."""
    divides = _SCALES.get(node.target)
    if node.op != "call_function" or divides is None or node.kwargs or len(node.args) != 2:
        return None
    x, c = node.args
    if not divides and not isinstance(x, torch.fx.Node):
        x, c = c, x
    if not isinstance(x, torch.fx.Node) or isinstance(c, bool) or not isinstance(c, (int, float)) or c == 0:
        return None
    val, out = x.meta.get("val"), node.meta.get("val")
    if not isinstance(val, torch.Tensor) or not isinstance(out, torch.Tensor) or val.dtype != out.dtype or \
            not val.dtype.is_floating_point or val.shape != out.shape or val.stride() != out.stride():
        return None
    return x, 1.0 / c if divides else float(c)


def fold_operand_scales(gm):
    """mm(x * c, y) and bmm(x * c, y) for a number c (either operand, through views used by
    nothing else) become mm(x, y) * c: the scaled operand is not written out, the GEMM reads x
    as it is and its epilogue multiplies. SDPA's math scales q and k by sqrt(scale) each; their
    product then reads q and k^T themselves (k^T K-major, as the TMA GEMM needs). The same
    product in real arithmetic; in floating point c's rounding moves (a relative 1e-7)."""
    graph = gm.graph
    for gemm in list(graph.nodes):
        if gemm.op != "call_function" or gemm.target not in (torch.ops.aten.mm.default, torch.ops.aten.bmm.default):
            continue
        if gemm.args[0] is gemm.args[1]:
            continue  # one value read as both operands: its scale counts twice (left as it is)
        factor = 1.0
        for pos in (0, 1):
            reader, node = gemm, gemm.args[pos]
            while node.op == "call_function" and node.target in _VIEWS and len(node.users) == 1:
                reader, node = node, node.args[0]
            found = _scale_of(node) if len(node.users) == 1 else None
            if found is None:
                continue
            x, c = found
            reader.replace_input_with(node, x)
            graph.erase_node(node)
            factor *= c
        if factor == 1.0:
            continue
        with graph.inserting_after(gemm):
            scaled = graph.call_function(torch.ops.aten.mul.Tensor, (gemm, factor))
        scaled.meta["val"] = torch.ops.aten.mul.Tensor(gemm.meta["val"], factor)
        scaled.meta["stack_trace"] = gemm.meta.get("stack_trace")
        gemm.replace_all_uses_with(scaled, delete_user_cb=lambda user: user is not scaled)
    graph.lint()
    gm.recompile()


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
    ep = export_graph(model, inputs, base)
    outputs, mutations = describe_outputs(ep)
    doc = {
        "format": FORMAT, "version": VERSION,
        "model": {"path": model_path, "sha256": sha256, "training": training,
                  "init_args": plain_json(init_args), "init_signature": init_signature(module.Model)},
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
    p = argparse.ArgumentParser(prog="python3 -m fusetune_py.capture",
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
