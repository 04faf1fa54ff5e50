"""A multi-layer LSTM as one op (fusetune::lstm), which the recurrent family runs as one
persistent kernel (templates/recurrent.cuh), instead of the per-step products and gate passes
torch.export's decomposition writes out (minutes of capture and thousands of kernels for a long
sequence).

fusetune::lstm(x, h0, c0, w, layers) takes x as [T, B, I] (any strides), h0 and c0 as [L, B, H]
and every layer's weights packed into one vector w (per layer: w_ih [4H, I_l], w_hh [4H, H], b_ih
[4H], b_hh [4H]; I_0 = I, later layers H). It returns one vector: the last layer's outputs [T, B,
H], then h_n and c_n [L, B, H], which the graph takes apart with views."""
import torch


def _sizes(x, h0, w, layers):
    t, b, i = x.shape
    h = h0.shape[2]
    return t, b, i, h


def _unpacked(w, i, h, layers):
    params, at = [], 0
    for layer in range(layers):
        width = i if layer == 0 else h
        for shape in ((4 * h, width), (4 * h, h), (4 * h,), (4 * h,)):
            n = shape[0] * (shape[1] if len(shape) > 1 else 1)
            params.append(w[at:at + n].view(shape))
            at += n
    return params


@torch.library.custom_op("fusetune::lstm", mutates_args=())
def lstm(x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, w: torch.Tensor, layers: int) -> torch.Tensor:
    t, b, i, h = _sizes(x, h0, w, layers)
    y, hn, cn = torch.ops.aten.lstm.input(x, [h0, c0], _unpacked(w, i, h, layers), True, layers, 0.0, False, False, False)
    return torch.cat([y.reshape(-1), hn.reshape(-1), cn.reshape(-1)])


@lstm.register_fake
def _(x, h0, c0, w, layers):
    t, b, i, h = _sizes(x, h0, w, layers)
    return x.new_empty(t * b * h + 2 * layers * b * h)


_LSTM = torch.ops.aten.lstm.input
_LSTM_ARGS = ("input", "hx", "params", "has_biases", "num_layers", "dropout", "train", "bidirectional", "batch_first")
# What the recurrent kernel runs (tuner/src/families/recurrent.cpp, templates/recurrent_launch.h):
# at most 16 batch rows; its search's units per block (configs/recurrent.json); the shared memory a
# block may have; the SMs every sm_90 GPU has at least (H100 PCIe), as all blocks are resident at once.
MAX_BATCH = 16
UNITS = (8, 12, 16, 20, 24, 32)
MAX_SHARED_BYTES = 227 * 1024
MIN_SMS = 114


def smem_bytes(units, batch, i, h):
    """templates/recurrent_launch.h's lstm_smem_bytes."""
    k = max(i, h) + h
    return 4 * (4 * units * k + batch * k + 5 * units * ((batch + 3) // 4 * 4) + 4 * units)


def kernel_fits(batch, i, h, layers):
    """Whether a config of the recurrent kernel fits one block per SM for this LSTM."""
    return any(smem_bytes(u, batch, i, h) <= MAX_SHARED_BYTES and layers * -(-h // u) <= MIN_SMS for u in UNITS)


def _lstm_runs_as_one(args):
    """Whether nn.LSTM's call (aten.lstm.input's arguments) is a form the recurrent kernel runs:
    float32, batched, unidirectional, with biases, no projection, no dropout in effect, at most
    16 batch rows, and sizes whose gate rows fit shared memory in blocks that all fit the GPU at
    once."""
    x, hx, params = args["input"], args["hx"], args["params"]
    layers = args["num_layers"]
    if not all(isinstance(n, torch.fx.Node) for n in [x, *hx, *params]) or len(hx) != 2:
        return False
    xv = x.meta["val"]
    if xv.dim() != 3 or xv.dtype != torch.float32 or not args["has_biases"] or args["bidirectional"]:
        return False
    if args["dropout"] and args["train"]:
        return False
    if len(params) != 4 * layers or any(p.meta["val"].dtype != torch.float32 for p in [*hx, *params]):
        return False
    batch = xv.shape[0] if args["batch_first"] else xv.shape[1]
    h = hx[0].meta["val"]
    return (0 < batch <= MAX_BATCH and h.dim() == 3 and h.shape[0] == layers and
            kernel_fits(batch, xv.shape[2], h.shape[2], layers))


def _call(graph, target, args, kwargs=None):
    node = graph.call_function(target, args, kwargs or {})
    vals = lambda a: a.meta["val"] if isinstance(a, torch.fx.Node) else [vals(e) for e in a] if isinstance(a, (list, tuple)) else a
    node.meta["val"] = target(*[vals(a) for a in args], **{k: vals(v) for k, v in (kwargs or {}).items()})
    return node


def lstm_as_one_op(gm):
    """Each nn.LSTM (aten.lstm.input, which torch.export keeps whole) in a form the recurrent
    family runs becomes fusetune::lstm on its weights packed (one cat of the parameters, kept
    as they are), its outputs taken apart with views. Runs before the decompositions; any other
    LSTM is written out by them as before."""
    graph = gm.graph
    aten = torch.ops.aten
    for node in [n for n in graph.nodes if n.op == "call_function" and n.target is _LSTM]:
        args = {name: node.args[i] if i < len(node.args) else node.kwargs.get(name) for i, name in enumerate(_LSTM_ARGS)}
        if not _lstm_runs_as_one(args):
            continue
        x, (h0, c0), params, layers = args["input"], args["hx"], args["params"], args["num_layers"]
        first = args["batch_first"]
        with graph.inserting_before(node):
            flat = [_call(graph, aten.view.default, (p, [-1])) for p in params]
            w = _call(graph, aten.cat.default, (flat,))
            xt = _call(graph, aten.transpose.int, (x, 0, 1)) if first else x
            out = _call(graph, torch.ops.fusetune.lstm.default, (xt, h0, c0, w, layers))
            t, b, _ = xt.meta["val"].shape
            h = h0.meta["val"].shape[2]
            tbh, lbh = t * b * h, layers * b * h
            parts = []
            for start, shape in ((0, [t, b, h]), (tbh, [layers, b, h]), (tbh + lbh, [layers, b, h])):
                part = _call(graph, aten.slice.Tensor, (out, 0, start, start + shape[0] * b * h))
                parts.append(_call(graph, aten.view.default, (part, shape)))
            if first:
                parts[0] = _call(graph, aten.transpose.int, (parts[0], 0, 1))
        for user in list(node.users):
            if user.op != "call_function" or user.target.__name__ != "getitem":
                raise AssertionError(f"aten.lstm.input read other than through getitem: {user}")
            user.replace_all_uses_with(parts[user.args[1]])
            graph.erase_node(user)
        for part in parts:
            part.meta["stack_trace"] = node.meta.get("stack_trace")
        out.meta["stack_trace"] = node.meta.get("stack_trace")
        graph.erase_node(node)
    graph.eliminate_dead_code()
    graph.lint()
    gm.recompile()
