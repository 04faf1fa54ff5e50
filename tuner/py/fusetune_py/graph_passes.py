# Graph passes that capture runs on the exported graph before writing it (see
# capture.export_graph): products with a diagonal matrix as scalings (before the decompositions,
# which write torch.diag out as a mask); then, on the decomposed graph, gathers pushed through
# pointwise ops, scales folded into matrix products, cats sharing prefixes and cats longer than
# a kernel reads split.
import torch


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
          torch.ops.aten.squeeze.dims, torch.ops.aten.alias.default, torch.ops.aten.transpose.int}
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


def _take_scale(graph, reader, pos):
    """c where reader's operand pos is x * c or x / c for a number c, through views used by
    nothing else, which then read x (the scaling is erased); 1.0 otherwise."""
    node = reader.args[pos]
    while node.op == "call_function" and node.target in _VIEWS and len(node.users) == 1:
        reader, node = node, node.args[0]
    found = _scale_of(node) if len(node.users) == 1 else None
    if found is None:
        return 1.0
    x, c = found
    reader.replace_input_with(node, x)
    graph.erase_node(node)
    return c


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
        factor = _take_scale(graph, gemm, 0) * _take_scale(graph, gemm, 1)
        if factor == 1.0:
            continue
        with graph.inserting_after(gemm):
            scaled = graph.call_function(torch.ops.aten.mul.Tensor, (gemm, factor))
        scaled.meta["val"] = torch.ops.aten.mul.Tensor(gemm.meta["val"], factor)
        scaled.meta["stack_trace"] = gemm.meta.get("stack_trace")
        gemm.replace_all_uses_with(scaled, delete_user_cb=lambda user: user is not scaled)
    graph.lint()
    gm.recompile()


_PRODUCTS = (torch.ops.aten.matmul.default, torch.ops.aten.mm.default)


def _diagonal_of(node):
    """v when node is torch.diag(v) of a vector v (the matrix with v on its main diagonal)."""
    if node.op != "call_function" or node.target is not torch.ops.aten.diag.default or node.kwargs:
        return None
    if len(node.args) > 1 and node.args[1] != 0:
        return None  # another diagonal
    v = node.args[0]
    val = v.meta.get("val") if isinstance(v, torch.fx.Node) else None
    return v if isinstance(val, torch.Tensor) and val.dim() == 1 else None


def scale_by_diagonals(gm):
    """torch.diag(v) @ b and a @ torch.diag(v) (matmul or mm) become v[:, None] * b and a * v:
    each row (column) scaled, where the product would build the n x n matrix and multiply it
    (n^2 m multiply-adds for n m products). Runs on the graph torch.export gives, before the
    decompositions write diag out as a mask and a where. The same values where b (a) is finite;
    an infinity or NaN in b spreads over its whole column through the zeros of the product (0 x
    inf), and stays in its row here."""
    graph = gm.graph
    for product in list(graph.nodes):
        if product.op != "call_function" or product.target not in _PRODUCTS:
            continue
        for pos in (0, 1):
            diag, other = product.args[pos], product.args[1 - pos]
            v = _diagonal_of(diag) if isinstance(diag, torch.fx.Node) else None
            if v is None:
                continue
            with graph.inserting_before(product):
                if other.meta["val"].dim() == 1:  # diag(v) @ u and u @ diag(v): v * u
                    factor = v
                else:  # scale the rows of b (the columns of a)
                    factor = graph.call_function(torch.ops.aten.unsqueeze.default, (v, 1 - pos))
                    factor.meta["val"] = torch.ops.aten.unsqueeze.default(v.meta["val"], 1 - pos)
                operands = (factor, other) if pos == 0 else (other, factor)
                scaled = graph.call_function(torch.ops.aten.mul.Tensor, operands)
            scaled.meta["val"] = product.meta["val"]
            scaled.meta["stack_trace"] = product.meta.get("stack_trace")
            product.replace_all_uses_with(scaled)
            graph.erase_node(product)
            if not diag.users:
                graph.erase_node(diag)
            break
    graph.lint()
    gm.recompile()


_MATMULS = (torch.ops.aten.matmul.default, torch.ops.aten.bmm.default)
_ATTENTION = torch.ops.aten.scaled_dot_product_attention.default
_MASK_FILLS = (torch.ops.aten.masked_fill.Scalar, torch.ops.aten.masked_fill_.Scalar)
_DROPOUTS = (torch.ops.aten.dropout.default, torch.ops.aten.dropout_.default)
# A mask's fill at or below this after the scalings that follow it is a key left out exactly: the
# scores stay far above it, so its exp is 0 in float32 as -inf's is.
_LEFT_OUT = -1e9
# The most elements a mask computed at capture may have (a bool each).
_MAX_MASK_ELEMENTS = 1 << 26


class _Constants:
    """The values of the nodes that read nothing but buffers, lifted constants and numbers (a
    causal mask built in __init__ or in forward), computed from the program's own tensors, each
    with the names of the buffers it came from; None for any other node."""

    def __init__(self, ep):
        sig = ep.graph_signature
        mutated = set(sig.buffers_to_mutate.values())
        tensors = dict(ep.state_dict)
        tensors.update(ep.constants)
        self.sources = {name: fqn for name, fqn in list(sig.inputs_to_buffers.items()) +
                        list(sig.inputs_to_lifted_tensor_constants.items()) if fqn not in mutated and fqn in tensors}
        self.tensors = tensors
        self.values = {}

    def value(self, node):
        if node in self.values:
            return self.values[node]
        self.values[node] = None  # while it is computed, and for good where it cannot be
        if node.op == "placeholder":
            fqn = self.sources.get(node.name)
            if fqn is not None:
                self.values[node] = (self.tensors[fqn], {fqn})
        elif node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and \
                torch.Tag.nondeterministic_seeded not in node.target.tags:
            read = set()

            def arg(a):
                if isinstance(a, torch.fx.Node):
                    found = self.value(a)
                    if found is None:
                        raise LookupError
                    read.update(found[1])
                    return found[0]
                if isinstance(a, (list, tuple)):
                    return type(a)(arg(x) for x in a)
                return a

            val = node.meta.get("val")
            if isinstance(val, torch.Tensor) and val.numel() <= _MAX_MASK_ELEMENTS:
                try:
                    args, kwargs = arg(node.args), {k: arg(v) for k, v in node.kwargs.items()}
                    self.values[node] = (node.target(*args, **kwargs), read)
                except LookupError:
                    pass
        return self.values[node]


def _left_out(constants, fill, after, scores_shape):
    """The keys a step of the scores leaves out, as a bool tensor shaped like the scores, and the
    buffers it read; None where it is no mask computed at capture. fill: (node, how), how one of
    "fill" (masked_fill's mask, left out where true) or "add" (an added tensor of 0 and -inf or
    what is at most _LEFT_OUT once multiplied by `after`, the scalings that follow)."""
    node, how = fill
    found = constants.value(node)
    if found is None:
        return None
    mask, read = found
    if how == "fill":
        if mask.dtype != torch.bool:
            return None
        left_out = mask
    else:
        if not mask.dtype.is_floating_point:
            return None
        left_out = mask * after <= _LEFT_OUT
        if not bool(((mask == 0) | left_out).all()):
            return None  # a bias of other values: not a mask
    try:
        return torch.broadcast_to(left_out, scores_shape), read
    except RuntimeError:
        return None


def _attention_match(constants, softmax):
    """The written-out attention ending at `softmax`, as (v, causal, scale, the product giving the
    output, the nodes replaced (q @ k^T last), the buffers read), or None. The form: a product q @ k^T
    (matmul or bmm), scalings by numbers, at most one mask, a softmax over the last dimension, a
    dropout that drops nothing, a product with v; every value in between read by the next step
    only. The mask must be computed at capture from buffers and constants and leave out exactly
    the keys past each query (is_causal's), or none."""
    from .decompose import _attention_fused  # the forms one attention kernel runs
    x, dim = softmax.args[:2]
    scores_val = x.meta.get("val")
    if len(softmax.args) > 2 or softmax.kwargs or not isinstance(scores_val, torch.Tensor) or \
            dim % max(scores_val.dim(), 1) != scores_val.dim() - 1 or len(x.users) != 1:
        return None
    out = next(iter(softmax.users)) if len(softmax.users) == 1 else None
    chain = [softmax]
    if out is not None and out.target in _DROPOUTS and out.args[0] is softmax and len(out.users) == 1:
        p = out.args[1] if len(out.args) > 1 else out.kwargs.get("p")
        train = out.args[2] if len(out.args) > 2 else out.kwargs.get("train")
        if p != 0 and train:
            return None
        chain.append(out)
        out = next(iter(out.users))
    if out is None or out.target not in _MATMULS or out.args[0] is not chain[-1] or out.args[1] is chain[-1]:
        return None
    scale, after, fills, node = 1.0, 1.0, [], x
    while node.op == "call_function" and node.target not in _MATMULS:
        if len(node.users) != 1:
            return None
        found = _scale_of(node)
        if found is not None:
            if not fills:
                after *= found[1]
            scale *= found[1]
            chain.append(node)
            node = found[0]
            continue
        if node.target in _MASK_FILLS and not node.kwargs and not fills:
            fills.append(((node.args[1], "fill"), node.args[2]))
            nxt = node.args[0]
        elif node.target is torch.ops.aten.add.Tensor and len(node.args) == 2 and not node.kwargs and not fills and \
                all(isinstance(a, torch.fx.Node) for a in node.args):
            at = 1 if constants.value(node.args[1]) is not None else 0
            fills.append(((node.args[at], "add"), None))
            nxt = node.args[1 - at]
        else:
            return None
        chain.append(node)
        node = nxt
    product = node
    if product.op != "call_function" or len(product.users) != 1:
        return None
    q, kt = product.args
    v = out.args[1]
    qv, ktv, vv = (n.meta.get("val") for n in (q, kt, v))
    if not all(isinstance(t, torch.Tensor) for t in (qv, ktv, vv)) or qv.dim() < 2 or ktv.dim() < 2:
        return None
    kv = ktv.transpose(-2, -1)
    if not _attention_fused(qv, kv, vv, None, 0.0, False) or len({qv.dtype, kv.dtype, vv.dtype}) != 1 or \
            tuple(out.meta["val"].shape) != tuple(qv.shape[:-1]) + (vv.shape[-1],):
        return None
    causal, read = False, set()
    if fills:
        (mask, fill_value), = fills
        if fill_value is not None and not (isinstance(fill_value, (int, float)) and fill_value * after <= _LEFT_OUT):
            return None
        if after <= 0:
            return None
        found = _left_out(constants, mask, after, scores_val.shape)
        if found is None:
            return None
        left_out, read = found
        sq, sk = scores_val.shape[-2:]
        if bool(left_out.any()):
            causal = True
            if not torch.equal(left_out, torch.broadcast_to(torch.ones(sq, sk, dtype=torch.bool).triu(1), left_out.shape)):
                return None
    return v, causal, scale, out, chain + [product], read


def _erase_unused(graph, chain):
    """Erases the chain's nodes once no one reads them, and then what only they read that has no
    effect of its own (placeholders stay)."""
    todo, erased = list(chain), set()
    while todo:
        node = todo.pop(0)
        if node in erased or node.users or node.op != "call_function" or (node not in chain and node.is_impure()):
            continue
        todo += node.all_input_nodes
        graph.erase_node(node)
        erased.add(node)


def attention_as_one_op(ep):
    """Attention written out as the model's own ops (q @ k^T, scalings, a causal mask, softmax,
    a dropout of 0, @ v: MinGPT's and nn.MultiheadAttention's form) becomes one
    scaled_dot_product_attention, which the decompositions keep where one attention kernel runs
    it: the scores never reach memory. Runs on the graph torch.export gives, before the
    decompositions write softmax out. A mask has to be computed at capture from buffers and
    constants (a causal tril in __init__ or forward) and leave out exactly the keys after each
    query; a scaling of q or k^T by a number moves into the attention's scale. Returns the
    (stack trace, buffer names) of each attention whose mask was read from buffers, which the
    kernel no longer reads."""
    graph = ep.graph_module.graph
    graph.eliminate_dead_code()  # (nn.MultiheadAttention's average of the unused weights)
    constants, baked = _Constants(ep), []
    for softmax in [n for n in graph.nodes if n.op == "call_function" and n.target is torch.ops.aten.softmax.int]:
        found = _attention_match(constants, softmax)
        if found is None:
            continue
        v, causal, scale, out, replaced, read = found
        product = replaced[-1]
        for pos in (0, 1):
            scale *= _take_scale(graph, product, pos)
        q, kt = product.args
        with graph.inserting_before(out):
            if kt.op == "call_function" and kt.target is torch.ops.aten.transpose.int and len(kt.users) == 1 and \
                    sorted(d % kt.meta["val"].dim() for d in kt.args[1:]) == [kt.meta["val"].dim() - 2, kt.meta["val"].dim() - 1]:
                k = kt.args[0]
            else:
                k = graph.call_function(torch.ops.aten.transpose.int, (kt, -2, -1))
                k.meta["val"] = kt.meta["val"].transpose(-2, -1)
            sdpa = graph.call_function(_ATTENTION, (q, k, v), {"is_causal": causal, "scale": scale})
            sdpa.meta["val"] = _ATTENTION(q.meta["val"], k.meta["val"], v.meta["val"], is_causal=causal, scale=scale)
            sdpa.meta["stack_trace"] = out.meta.get("stack_trace")
        out.replace_all_uses_with(sdpa)
        _erase_unused(graph, [out] + replaced)
        if read:
            baked.append((softmax.meta.get("stack_trace") or "", sorted(read)))
    graph.lint()
    ep.graph_module.recompile()
    return baked


_RESHAPES = (torch.ops.aten.reshape.default, torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default)
_ATTENTION_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")


def _repeated(node):
    """(x, n, dim) when node is the 4-D x with each index of its dimension dim repeated n times in
    turn: `x.repeat_interleave(n, dim)`, or x unsqueezed after dim, expanded to n there and
    reshaped back to 4-D (Llama's repeat_kv: `x[:, :, None].expand(b, h, n, s, d).reshape(b, h *
    n, s, d)`); else None."""
    val = node.meta.get("val") if node.op == "call_function" else None
    if not isinstance(val, torch.Tensor) or val.dim() != 4:
        return None
    if node.target is torch.ops.aten.repeat_interleave.self_int:
        x, n = node.args[:2]
        dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim")
        if isinstance(x, torch.fx.Node) and isinstance(n, int) and not isinstance(n, bool) and n > 0 and \
                isinstance(dim, int) and -4 <= dim < 4 and x.meta["val"].dim() == 4:
            return x, n, dim % 4
        return None
    expand = node.args[0]
    if node.target not in _RESHAPES or expand.op != "call_function" or expand.target is not torch.ops.aten.expand.default:
        return None
    unsqueezed = expand.args[0]
    if unsqueezed.op != "call_function" or unsqueezed.target is not torch.ops.aten.unsqueeze.default:
        return None
    x = unsqueezed.args[0]
    shape, wide = tuple(x.meta["val"].shape), tuple(expand.meta["val"].shape)
    at = unsqueezed.args[1] % 5  # the new dimension; x's dimension at - 1 is repeated
    if len(shape) != 4 or at == 0 or len(wide) != 5 or wide[:at] + wide[at + 1:] != shape:
        return None
    n = wide[at]
    if tuple(val.shape) != shape[:at - 1] + (shape[at - 1] * n,) + shape[at:]:
        return None
    return x, n, at - 1


def _repeated_heads(node):
    """(x, n, transposed) when node, a [b, h * n, s, d] attention operand, repeats each head of
    [b, h, s, d] n times in turn: x repeated along dimension 1 (transposed False), or x ([b, s, h,
    d]) repeated along dimension 2 and then transposed to heads first (Meta's Llama; transposed
    True); else None."""
    found = _repeated(node)
    if found is not None:
        x, n, dim = found
        return (x, n, False) if dim == 1 else None
    if node.op != "call_function" or node.target is not torch.ops.aten.transpose.int or \
            sorted(d % 4 for d in node.args[1:]) != [1, 2]:
        return None
    found = _repeated(node.args[0])
    return (found[0], found[1], True) if found is not None and found[2] == 2 else None


def _heads_first(graph, before, x, transposed):
    """x, or its transpose to heads first made before node `before`."""
    if not transposed:
        return x
    with graph.inserting_before(before):
        heads = graph.call_function(torch.ops.aten.transpose.int, (x, 1, 2))
    heads.meta["val"] = x.meta["val"].transpose(1, 2)
    return heads


def attention_heads_grouped(gm):
    """A scaled_dot_product_attention whose k and v repeat each of their heads for several of q's
    (grouped-query attention written with repeat_kv or repeat_interleave) reads k and v as they
    are, under enable_gqa, where one attention kernel runs that: the repeated copies are not
    written. Runs after attention_as_one_op, before the decompositions."""
    from .decompose import _attention_fused
    graph = gm.graph
    for sdpa in [n for n in graph.nodes if n.op == "call_function" and n.target is _ATTENTION]:
        args = {name: sdpa.args[i] if i < len(sdpa.args) else sdpa.kwargs.get(name) for i, name in enumerate(_ATTENTION_ARGS)}
        if args["enable_gqa"] or len(sdpa.args) < 3:
            continue
        q, k, v = sdpa.args[:3]
        found = [_repeated_heads(x) if isinstance(x, torch.fx.Node) else None for x in (k, v)]
        if None in found or found[0][1] != found[1][1]:
            continue
        kv = [x.meta["val"].transpose(1, 2) if transposed else x.meta["val"] for x, _, transposed in found]
        if not _attention_fused(q.meta["val"], kv[0], kv[1], args["attn_mask"], args["dropout_p"] or 0.0, True):
            continue
        k0, v0 = (_heads_first(graph, sdpa, x, transposed) for x, _, transposed in found)
        sdpa.args = (q, k0, v0) + sdpa.args[3:7]
        sdpa.kwargs = {**sdpa.kwargs, "enable_gqa": True}
        _erase_unused(graph, [k, v])
    graph.lint()
    gm.recompile()
