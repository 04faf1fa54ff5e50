# Tests of fusetune_py.capture: the graph.json contract the C++ tuner reads, and every user error path.
import copy
import hashlib
import json
import os
import re
import subprocess
import sys

import pytest
import torch

from fusetune_py import capture, common, decompose, graph_passes, half
from conftest import SHARED_MODELS

PY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_capture(cli, model, out, seed=0):
    return cli(capture.main, ["--model", model, "--out", str(out), "--seed", str(seed)])


def load_graph(out):
    with open(os.path.join(out, "graph.json")) as f:
        return json.load(f)


def test_linear_model_graph(cli, linear_model, tmp_path):
    out = tmp_path / "work"
    code, err = run_capture(cli, linear_model, out, seed=7)
    assert code == 0, err
    g = load_graph(out)
    assert (g["format"], g["version"], g["seed"]) == ("fusetune-graph", 1, 7)
    assert g["torch_version"] == torch.__version__
    with open(linear_model, "rb") as f:
        assert g["model"] == {"path": linear_model, "sha256": hashlib.sha256(f.read()).hexdigest(),
                              "training": True, "init_args": [8, 2.0],
                              "init_signature": {"def": "(self, features, scale)", "call": "features, scale"},
                              "state_attributes": []}
    v = g["values"]
    assert v["x"] == {"shape": [4, 8], "dtype": "float32", "strides": [8, 1], "kind": "input", "index": 0}
    assert v["r"]["index"] == 1
    assert v["p_fc_weight"] == {"shape": [8, 8], "dtype": "float32", "strides": [8, 1],
                                "kind": "parameter", "target": "fc.weight"}
    assert v["p_fc_bias"]["target"] == "fc.bias"
    ops = [n["op"] for n in g["nodes"]]
    assert "aten.addmm.default" in ops and "aten.relu.default" in ops
    for n in g["nodes"]:
        assert v[n["name"]]["kind"] == "intermediate"
    mul = next(n for n in g["nodes"] if n["op"] == "aten.mul.Tensor")
    assert mul["args"][1] == 2.0 and isinstance(mul["args"][1], float)
    assert mul["source"] == "model.py:12: y = torch.relu(self.fc(x)) * self.scale"
    assert g["outputs"] == [g["nodes"][-1]["name"]] and g["mutations"] == []


@pytest.mark.filterwarnings("ignore:The given buffer is not writable")
def test_graph_pt2_reloads_without_example_inputs(cli, linear_model, tmp_path):
    assert run_capture(cli, linear_model, tmp_path)[0] == 0
    ep = torch.export.load(str(tmp_path / "graph.pt2"))
    assert ep.example_inputs is None
    assert [n.name for n in ep.graph.nodes if n.op == "call_function"] == \
        [n["name"] for n in load_graph(tmp_path)["nodes"]]
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp") or ".tmp." in f]


def test_graph_only_writes_the_description_alone(cli, linear_model, tmp_path):
    # Planning reads graph.json alone; a graph.pt2 from an earlier capture is removed with it.
    assert run_capture(cli, linear_model, tmp_path)[0] == 0
    first = load_graph(tmp_path)
    code, err = cli(capture.main, ["--model", linear_model, "--out", str(tmp_path), "--graph-only"])
    assert code == 0, err
    assert "graph.pt2" not in os.listdir(tmp_path) and not [f for f in os.listdir(tmp_path) if ".tmp" in f]
    assert load_graph(tmp_path) == first


def test_buffers_constants_tuples_and_encodings(cli, write_model, tmp_path):
    model = write_model("""
        class Model(nn.Module):
            def __init__(self, c, opts):
                super().__init__()
                self.bn = nn.BatchNorm2d(c)
                self.register_buffer("shift", torch.ones(c, 1, 1), persistent=False)
                self.k = torch.tensor([2.0])

            def forward(self, x):
                pooled = torch.nn.functional.max_pool2d(x, 2, stride=1, padding=1, return_indices=True)[0]
                y = self.bn(x) + self.shift * self.k + pooled[:, :, 1:, 1:]
                z = torch.clamp(y, min=float("-inf"), max=3.0).to(torch.float32)
                return z, x

        def get_inputs():
            return [torch.randn(2, 3, 4, 4)]

        def get_init_inputs():
            return [3, (1, object)]
    """)
    assert run_capture(cli, model, tmp_path)[0] == 0
    g = load_graph(tmp_path)
    v = g["values"]
    assert g["model"]["init_args"] == [3, [1, "<class 'object'>"]]
    assert v["b_bn_num_batches_tracked"] == {"shape": [], "dtype": "int64", "strides": [], "kind": "buffer",
                                             "target": "bn.num_batches_tracked"}
    assert v["b_shift"]["kind"] == "buffer" and v["b_shift"]["target"] == "shift"
    assert v["c_k"]["kind"] == "constant" and v["c_k"]["target"] == "k"
    tuples = [x for x in v.values() if x["kind"] == "tuple"]
    assert tuples and tuples[0]["items"][0]["shape"] == [2, 3, 5, 5]  # max pooling: values and indices
    assert g["outputs"][1] == "x" and len(g["outputs"]) == 2
    assert {m["target"] for m in g["mutations"]} == {"bn.running_mean", "bn.running_var",
                                                     "bn.num_batches_tracked"}
    assert all(m["kind"] == "buffer" and m["value"] in v for m in g["mutations"])
    args = json.dumps([n["args"] + [n["kwargs"]] for n in g["nodes"]])
    assert '{"float": "-inf"}' in args


def test_encode_arg():
    enc = capture.encode_arg
    assert enc([1, 2.0, True, None, "s"]) == [1, 2.0, True, None, "s"]
    assert enc(float("nan")) == {"float": "nan"} and enc(float("inf")) == {"float": "inf"}
    assert enc(torch.float16) == {"dtype": "float16"}
    assert enc(torch.device("cpu")) == {"other": "device(type='cpu')"}
    assert enc(torch.contiguous_format) == {"other": "torch.contiguous_format"}


def test_source_falls_back_to_last_frame():
    class FakeNode:
        meta = {"stack_trace": 'File "/a/lib.py", line 3, in f\n    g()\n'
                               '  File "/a/other.py", line 9, in g\n    return h(x)'}
    assert capture.source_of(FakeNode, "/nowhere/model.py") == "other.py:9: return h(x)"
    FakeNode.meta = {}
    assert capture.source_of(FakeNode, "/nowhere/model.py") == ""


@pytest.mark.parametrize("body, message", [
    ("x = 1 +\n", "error: cannot import model.py: SyntaxError"),
    ("raise ValueError('boom')\n", "error: cannot import model.py: ValueError: boom"),
    ("def get_inputs(): return []\ndef get_init_inputs(): return []\n", "error: model.py has no class Model"),
    ("class Model(nn.Module): pass\ndef get_init_inputs(): return []\n",
     "error: model.py has no function get_inputs"),
    ("class Model(nn.Module): pass\ndef get_inputs(): return []\n",
     "error: model.py has no function get_init_inputs"),
])
def test_bad_model_files(cli, write_model, tmp_path, body, message):
    model = write_model(body)
    code, err = run_capture(cli, model, tmp_path / "work")
    assert code == 2 and err.startswith(message) and err.count("\n") == 1
    assert not os.path.exists(tmp_path / "work")


def _model(forward, inputs, init="[]", ctor=""):
    return f"""
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        {ctor or 'pass'}

    def forward(self, x, *rest):
        {forward}

def get_inputs():
    return {inputs}

def get_init_inputs():
    return {init}
"""


@pytest.mark.parametrize("body, message", [
    (_model("return x", "[torch.randn(3), torch.arange(3).to(torch.int32)]"),
     "error: model.py: input 1 has dtype torch.int32; "
     "fusetune supports float32, float16, bfloat16, int64 and bool tensors only"),
    (_model("return x.float()", "[torch.randn(3).half(), torch.randn(3).double()]"),
     "error: model.py: input 1 has dtype torch.float64; "
     "fusetune supports float32, float16, bfloat16, int64 and bool tensors only"),
    (_model("return x", "[torch.randn(3), 'a']"),
     "error: model.py: input 1 is str, not a tensor or a number; "
     "fusetune supports float32, float16, bfloat16, int64 and bool tensors and Python numbers only"),
    # A bitcast of a half tensor: its bytes are float32 ones in the rewritten graph.
    (_model("return x.view(torch.bfloat16).float() * 2", "[torch.randn(4, 8).half()]"),
     "error: fusetune computes half-precision models in float32 and cannot rewrite view = aten.view.dtype "
     "(model.py:11: return x.view(torch.bfloat16).float() * 2)"),
    (_model("return x * rest[0]", "[torch.randn(3), float('nan')]"),
     "error: model.py: input 1 is nan; fusetune supports finite numbers only"),
    (_model("return x", "torch.randn(3)"), "error: model.py: get_inputs() must return a list, got Tensor"),
    (_model("return x", "[1 / 0]"), "error: model.py: get_inputs() failed: ZeroDivisionError"),
    (_model("return x", "[torch.randn(3)]", ctor="raise RuntimeError('bad init')"),
     "error: model.py: Model(*get_init_inputs()) failed: RuntimeError: bad init"),
    (_model("return x", "[torch.randn(3)]", init="[1]"),
     "error: model.py: Model(*get_init_inputs()) failed: TypeError"),
    (_model("return x * 2 if x.sum() > 0 else x", "[torch.randn(3)]"),
     "error: torch.export could not capture model.py: forward's control flow or a tensor's size depends on values "
     "it computes (model.py:11: return x * 2 if x.sum() > 0 else x); fusetune lowers one fixed graph of kernels, "
     "so write forward without that branch or size"),
    # A size torch.export cannot know before running: a symbol in the graph.
    (_model("return torch.nonzero(x).float().sum() + x", "[torch.randn(3)]"),
     "error: aten.nonzero.default (model.py:11: return torch.nonzero(x).float().sum() + x) has a size or value "
     "that depends on the data forward computes; fusetune lowers one fixed graph of kernels, so write forward "
     "without it"),
])
def test_user_errors(cli, write_model, tmp_path, body, message):
    out = tmp_path / "work"
    out.mkdir()
    (out / "graph.json").write_text("old")
    code, err = run_capture(cli, write_model(body), out)
    assert code == 2, err
    assert err.startswith(message) and err.count("\n") == 1, err
    assert sorted(os.listdir(out)) == ["graph.json"] and (out / "graph.json").read_text() == "old"


def test_conversions_have_no_assertion_nodes(cli, write_model, tmp_path):
    # torch.export checks a conversion's input with a node of no value; the graph leaves it out.
    out = tmp_path / "work"
    code, err = run_capture(cli, write_model(_model("return x.float() * 2", "[torch.randint(0, 9, (5, 7))]")), out)
    assert code == 0, err
    assert [n["op"] for n in load_graph(out)["nodes"]] == ["aten._to_copy.default", "aten.mul.Tensor"]


def test_missing_model_file(cli, tmp_path):
    code, err = run_capture(cli, str(tmp_path / "nope.py"), tmp_path / "work")
    assert code == 2 and err.startswith("error: model file not found: ")


def test_command_line_has_no_traceback(write_model, tmp_path):
    model = write_model("class Model(nn.Module): pass\n")
    env = dict(os.environ, PYTHONPATH=PY_DIR)
    proc = subprocess.run([sys.executable, "-m", "fusetune_py.capture", "--model", model, "--out",
                           str(tmp_path / "w")], env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr == "error: model.py has no function get_inputs\n"


@pytest.mark.skipif(not SHARED_MODELS, reason="no shared models on this machine")
@pytest.mark.parametrize("path", SHARED_MODELS, ids=os.path.basename)
def test_shared_models(cli, shrunk, tmp_path, path):
    model = shrunk(path)
    code, err = run_capture(cli, model, tmp_path / "work")
    assert code == 0, err
    g = load_graph(tmp_path / "work")
    assert g["nodes"] and g["outputs"]
    names = {n["name"] for n in g["nodes"]} | {k for k, v in g["values"].items() if v["kind"] != "intermediate"}
    assert set(g["outputs"]) <= names
    assert all(n["source"].startswith(os.path.basename(path) + ":") for n in g["nodes"])


def test_init_signature_keeps_defaults_by_reference(cli, write_model, tmp_path):
    path = write_model("""
        class Model(nn.Module):
            def __init__(self, n: int, scale: float = 2.0, *layers, eps=1e-5, **extra) -> None:
                super().__init__()
                self.scale = scale

            def forward(self, x):
                return x * self.scale


        def get_inputs():
            return [torch.randn(2, 3)]


        def get_init_inputs():
            return [3]
    """)
    out = tmp_path / "work"
    code, err = run_capture(cli, path, out)
    assert code == 0, err
    sig = load_graph(out)["model"]["init_signature"]
    assert sig == {"def": "(self, n, scale=_DEFAULTS['scale'], *layers, eps=_DEFAULTS['eps'], **extra)",
                   "call": "n, scale, *layers, eps=eps, **extra"}


@pytest.mark.parametrize("make, shape", [
    (lambda: torch.nn.BatchNorm2d(5, momentum=0.3), (3, 5, 9, 11)),  # statistics split: per (n, c), then over n
    (lambda: torch.nn.BatchNorm2d(300), (2, 300, 3, 5)),  # many channels: one reduction per channel
    (lambda: torch.nn.BatchNorm1d(7), (13, 7)),
    (lambda: torch.nn.BatchNorm3d(4), (2, 4, 3, 5, 6)),
    (lambda: torch.nn.InstanceNorm2d(4, affine=True), (3, 4, 6, 5)),
    (lambda: torch.nn.LayerNorm([5, 6]), (4, 3, 5, 6)),
    (lambda: torch.nn.GroupNorm(2, 6), (3, 6, 4, 5)),
])
@pytest.mark.parametrize("mean, spread, tol", [(0.5, 2.0, 1e-5), (1000.0, 1.0, 1e-3)])
def test_norm_decompositions_match_torch(make, shape, mean, spread, tol):
    # The written-out norms compute what torch does: outputs and the running statistics, also for
    # data whose mean is far larger than its spread (there E[x^2] - E[x]^2 is 30% off the variance;
    # torch's own output is 1e-4 off the exact one).
    torch.manual_seed(0)
    model = make()
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(0.5, 1.5)
    x = torch.randn(shape) * spread + mean
    reference = copy.deepcopy(model)
    exported = torch.export.export(copy.deepcopy(model), (x,)).run_decompositions(decompose.decompositions()).module()
    torch.testing.assert_close(exported(x), reference(x), atol=tol, rtol=tol)
    for name, want in reference.state_dict().items():
        torch.testing.assert_close(exported.state_dict()[name], want, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("shifts, dims", [(1, 1), (-3, 0), (40, -1), (0, 1), ((2, -3), (0, 1)), (5, None)])
def test_roll_is_cats_of_slices(shifts, dims):
    # roll written as cats of slices (one per rolled dimension, none for a shift of a whole
    # period) computes what torch does, the flattened roll without dims too.
    class Roll(torch.nn.Module):
        def forward(self, x):
            return torch.roll(x, shifts, dims) if dims is not None else torch.roll(x, shifts)

    x = torch.randn(7, 37)
    exported = torch.export.export(Roll(), (x,)).run_decompositions(decompose.decompositions()).module()
    assert torch.equal(exported(x), Roll()(x))
    ops = {n.target for n in exported.graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.gather.default not in ops
    rolled = 0 if shifts in (0, 37) else len(shifts) if isinstance(shifts, tuple) else 1
    assert sum(n.target == torch.ops.aten.cat.default for n in exported.graph.nodes) == rolled


@pytest.mark.parametrize("kwargs", [{}, {"reduction": "sum"}, {"reduction": "none", "ignore_index": 3}])
def test_cross_entropy_decomposition_matches_torch(kwargs):
    # nll_loss written out as a gather and float sums computes what torch does, ignored targets too.
    torch.manual_seed(0)
    logits, target = torch.randn(67, 37) * 3.0, torch.randint(0, 37, (67,))
    target[5] = target[40] = kwargs.get("ignore_index", -100)

    class Loss(torch.nn.Module):
        def forward(self, x, t):
            return torch.nn.functional.cross_entropy(x, t, **kwargs)

    exported, _ = capture.export_graph(Loss(), (logits, target), "loss.py")
    gathers = [n for n in exported.graph.nodes if n.target is torch.ops.aten.gather.default]
    # The gather moved into log-softmax's operands: it reads the logits, not their whole log-softmax.
    assert [g.args[0].op for g in gathers] == ["placeholder"]
    torch.testing.assert_close(exported.module()(logits, target), Loss()(logits, target), atol=1e-5, rtol=1e-5)


def test_gathers_move_only_where_the_operands_line_up():
    class M(torch.nn.Module):
        def forward(self, x, row, col, i, j):
            moved = torch.gather(torch.exp(x - row), 1, i)  # row: constant along dim 1
            kept = torch.gather(x * col, 1, i)  # col: [1, C] varies along dim 1 and broadcasts along 0
            narrow = torch.gather(x - row, 1, j)  # j has fewer rows than x
            returned = torch.gather(x + 1.0, 1, i)  # a gather the model returns keeps its name
            along_one = torch.gather(row * 2.0, 1, i * 0) * 3.0  # every operand size 1 along dim 1
            return moved + kept, narrow, returned, along_one

    x, row, col = torch.randn(6, 5), torch.randn(6, 1), torch.randn(1, 5)
    i, j = torch.randint(0, 5, (6, 2)), torch.randint(0, 5, (3, 2))
    ep, _ = capture.export_graph(M(), (x, row, col, i, j), "m.py")
    read = sorted(n.args[0].target.__name__ if n.args[0].op == "call_function" else n.args[0].name
                  for n in ep.graph.nodes if n.target is torch.ops.aten.gather.default)
    assert read == ["add.Tensor", "mul.Tensor", "mul.Tensor", "sub.Tensor", "x"], read
    for got, want in zip(ep.module()(x, row, col, i, j), M()(x, row, col, i, j)):
        torch.testing.assert_close(got, want)


def test_max_and_min_over_a_dimension_are_written_out():
    # torch.max / torch.min with dim return values and indices: amax / argmax (amin / argmin),
    # which the planner lowers; ties pick the first index, as torch does.
    class M(torch.nn.Module):
        def forward(self, x):
            values = torch.max(x, dim=1)[0]
            low, where = torch.min(x, dim=-1, keepdim=True)
            return values, low, where

    x = torch.randn(4, 6, 5)
    x[:, 2, :] = x[:, 4, :] = 9.0  # ties along dim 1
    x[..., 1] = x[..., 3] = -9.0  # and along the last: the first index wins
    ep, _ = capture.export_graph(M(), (x,), "m.py")
    ops = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert ops == [torch.ops.aten.amax.default, torch.ops.aten.amin.default, torch.ops.aten.argmin.default], ops
    for got, want in zip(ep.module()(x), M()(x)):
        torch.testing.assert_close(got, want, atol=0, rtol=0)


def test_number_inputs_are_baked_in_and_recorded(cli, write_model, tmp_path):
    # torch.export writes a number get_inputs() gives into the ops that use it; graph.json keeps
    # its position and value, for ModelNew to take it in its place and check it.
    out = tmp_path / "work"
    code, err = run_capture(cli, write_model(_model("return x * rest[0] + rest[1]", "[torch.randn(3), 2.5, 3]")), out)
    assert code == 0, err
    g = load_graph(out)
    scalars = {k: v for k, v in g["values"].items() if v["kind"] == "scalar_input"}
    assert scalars == {"rest_0": {"shape": [], "strides": [], "dtype": "float", "kind": "scalar_input", "index": 1, "value": 2.5},
                       "rest_1": {"shape": [], "strides": [], "dtype": "int", "kind": "scalar_input", "index": 2, "value": 3}}
    assert [n["args"][1] for n in g["nodes"]] == [2.5, 3]


def test_growing_concatenations_read_the_previous_one():
    # A dense block: each cat of the features so far becomes the previous cat plus the new part.
    class M(torch.nn.Module):
        def forward(self, x, y):
            features = [x]
            for i in range(4):
                features.append(torch.relu(torch.cat(features, 1)[:, :2] * (i + 1)))
            other = torch.cat([x, y], 0)  # another dimension: its parts stay
            return torch.cat(features, 1), other, torch.cat([x, features[1]], 0)

    x, y = torch.randn(3, 2), torch.randn(5, 2)
    ep, _ = capture.export_graph(M(), (x, y), "m.py")
    cats = [n for n in ep.graph.nodes if n.target is torch.ops.aten.cat.default]
    # cat([x]), then each cat of the features the previous one and the newest; [x, y] and
    # [x, features[1]] along 0 share no earlier cat's parts along 0.
    assert [len(c.args[0]) for c in cats] == [1, 2, 2, 2, 2, 2, 2], [c.args for c in cats]
    assert [c.args[0][0].name for c in cats[2:4]] == [cats[1].name, cats[2].name]
    for got, want in zip(ep.module()(x, y), M()(x, y)):
        torch.testing.assert_close(got, want, atol=0, rtol=0)


def test_any_and_all_are_float_extremes():
    # any / all (a masked softmax's guard against rows that are all masked) as amax / amin of
    # x != 0, which the planner lowers; over a dimension, several, or all.
    class M(torch.nn.Module):
        def forward(self, x):
            masked = x > 0.5
            return (torch.where(masked.any(-1, keepdim=True), x, 0.0), masked.all(dim=0), (x != 0).any(),
                    masked.all())

    x = torch.rand(5, 7)
    x[2] = 0.0  # a row with nothing above 0.5
    ep, _ = capture.export_graph(M(), (x,), "m.py")
    ops = {n.target for n in ep.graph.nodes if n.op == "call_function"}
    assert not ops & {torch.ops.aten.any.dim, torch.ops.aten.any.default, torch.ops.aten.all.dim, torch.ops.aten.all.default}
    for got, want in zip(ep.module()(x), M()(x)):
        torch.testing.assert_close(got, want, atol=0, rtol=0)


def test_long_cats_become_trees_a_kernel_can_read():
    # An RNN's outputs stacked over 30 steps: cats of at most MAX_CAT_PARTS parts, two levels.
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.cat([x * i for i in range(30)], 1), torch.cat([x, x], 0)

    x = torch.randn(3, 2)
    ep, _ = capture.export_graph(M(), (x,), "m.py")
    cats = [n for n in ep.graph.nodes if n.target is torch.ops.aten.cat.default]
    assert sorted(len(c.args[0]) for c in cats) == [2, 3, 8, 11, 11], [len(c.args[0]) for c in cats]
    assert max(len(c.args[0]) for c in cats) <= graph_passes.MAX_CAT_PARTS
    # A kernel's tensors: the parts and the output (kMaxSlots in templates/fusetune_args.h).
    args_h = os.path.join(os.path.dirname(__file__), "..", "..", "..", "templates", "fusetune_args.h")
    with open(args_h) as f:
        assert f"constexpr int kMaxSlots = {graph_passes.MAX_CAT_PARTS + 1};" in f.read()
    for got, want in zip(ep.module()(x), M()(x)):
        torch.testing.assert_close(got, want, atol=0, rtol=0)


def test_indexing_by_a_tensor_is_a_gather():
    # A relative position table read by a flattened index buffer (Swin), a middle dimension picked
    # by a 2-D index with negative entries, an embedding, index_select, and a bool mask (its
    # result's size depends on the data: left to torch.export).
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("pos", torch.randint(0, 9, (4, 4)))
            self.emb = torch.nn.Embedding(11, 3)

        def forward(self, table, x, tokens, mask):
            picked = x[:, torch.tensor([[0, -1], [2, -3]])]
            return (table[self.pos.view(-1)].view(4, 4, -1), picked, self.emb(tokens),
                    torch.index_select(x, -1, tokens[0]), x[mask])

    table, x, tokens, model = torch.randn(9, 3), torch.randn(2, 5, 3), torch.randint(0, 3, (2, 6)), M()
    mask = x > 0
    ep, _ = capture.export_graph(model, (table, x, tokens, mask), "m.py")
    ops = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert ops.count(torch.ops.aten.gather.default) == 4 and ops.count(torch.ops.aten.index.Tensor) == 1
    assert torch.ops.aten.embedding.default not in ops and torch.ops.aten.index_select.default not in ops
    for got, want in zip(ep.module()(table, x, tokens, mask), model(table, x, tokens, mask)):
        torch.testing.assert_close(got, want, atol=0, rtol=0)


def test_indexing_by_several_tensors_is_one_gather():
    # Each sequence's last token (a batch arange and lengths), adjacent dimensions by broadcast
    # index tensors with negative entries, dimensions apart (moved first, as torch does), one
    # element of two dimensions (0-d index tensors, which torch.export makes selects: the
    # decomposition alone): each one gather at the linear index; an index outside its own
    # dimension (whose linear index would still fall inside) makes the gather raise, as torch does.
    class M(torch.nn.Module):
        def forward(self, h, lengths, x, rows, cols):
            return h[torch.arange(h.shape[0]), lengths - 1], x[:, rows, cols], x[rows, :, cols]

    h, lengths, x = torch.randn(3, 7, 5), torch.tensor([7, 1, 4]), torch.randn(4, 6, 9, 2)
    rows, cols = torch.tensor([[0], [-1], [3]]), torch.tensor([2, -3, 0, 5])
    ep, _ = capture.export_graph(M(), (h, lengths, x, rows, cols), "m.py")
    ops = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert ops.count(torch.ops.aten.gather.default) == 3 and torch.ops.aten.index.Tensor not in ops
    for got, want in zip(ep.module()(h, lengths, x, rows, cols), M()(h, lengths, x, rows, cols)):
        torch.testing.assert_close(got, want, atol=0, rtol=0)
    with pytest.raises(RuntimeError):  # cols 9 wraps into the next row of the flattened (6, 9)
        ep.module()(h, lengths, x, rows, torch.tensor([2, 9, 0, 5]))
    torch.testing.assert_close(decompose._index(x, [None, torch.tensor(2), torch.tensor(-1)]), x[:, 2, -1], atol=0, rtol=0)


@pytest.mark.parametrize("kwargs", [dict(scale_factor=2, mode="bilinear"),
                                    dict(size=(11, 6), mode="bilinear", align_corners=True),
                                    dict(size=(11, 16), mode="nearest"), dict(size=(9, 23), mode="nearest-exact"),
                                    dict(scale_factor=2, mode="bicubic")])
def test_interpolation_is_reads_at_computed_indices(kwargs):
    # F.interpolate through torch's upsample decompositions: gathers at indices computed from
    # aranges (no upsample op and no multi-tensor index left), matching torch's own kernels.
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.interpolate(x, **kwargs)

    x = torch.randn(2, 3, 7, 11)
    ep, _ = capture.export_graph(M(), (x,), "m.py")
    ops = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert "aten.gather.default" in ops and not any("upsample" in o or o == "aten.index.Tensor" for o in ops), ops
    torch.testing.assert_close(ep.module()(x), M()(x), atol=1e-5, rtol=1e-5)


def test_safe_softmax_guards_rows_by_their_maximum():
    # scaled_dot_product_attention's softmax: a row masked wholly (-inf) is 0, a row with a NaN is
    # NaN, a row with +inf is NaN, as torch's own; one amax over the rows, no per-element test.
    class M(torch.nn.Module):
        def forward(self, q, k, v, mask):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    q, k, v = torch.randn(2, 5, 4), torch.randn(2, 6, 4), torch.randn(2, 6, 3)
    mask = torch.zeros(5, 6)
    mask[1] = float("-inf")
    mask[2, :3] = float("-inf")
    mask[3, 0] = float("nan")
    mask[4, 5] = float("inf")
    ep, _ = capture.export_graph(M(), (q, k, v, mask), "m.py")
    ops = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert ops.count(torch.ops.aten.amax.default) == 1 and torch.ops.aten.amin.default not in ops
    got, want = ep.module()(q, k, v, mask), M()(q, k, v, mask)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6, equal_nan=True)
    assert (got[:, 1] == 0).all() and got[:, 3:].isnan().all()


def test_attention_is_kept_where_one_kernel_runs_it():
    # Without a mask tensor, dropout or grouped heads, and with heads of a multiple of 8 up to
    # 128, scaled_dot_product_attention stays one op (the attention family's anchor); otherwise
    # it is written out into products and a softmax.
    sdpa = torch.nn.functional.scaled_dot_product_attention

    class M(torch.nn.Module):
        def forward(self, q, k, v, mask, x):
            return (sdpa(q, k, v, is_causal=True), sdpa(q, k, v, scale=0.5), sdpa(q, k, v, attn_mask=mask),
                    sdpa(x, x, x), sdpa(q[..., :4], k[..., :4], v[..., :4]))

    q, k, v = torch.randn(2, 3, 5, 16), torch.randn(2, 3, 7, 16), torch.randn(2, 3, 7, 16)
    mask, x = torch.randn(5, 7), torch.randn(2, 9, 136)
    ep, _ = capture.export_graph(M(), (q, k, v, mask, x), "m.py")
    kept = [n for n in ep.graph.nodes if n.target is torch.ops.aten.scaled_dot_product_attention.default]
    assert [n.args[3:] for n in kept] == [(None, 0.0, True), ()], kept  # the mask, D 136 and D 4 written out
    assert kept[1].kwargs == {"scale": 0.5}
    assert sum(n.target is torch.ops.aten.amax.default for n in ep.graph.nodes) == 3
    for got, want in zip(ep.module()(q, k, v, mask, x), M()(q, k, v, mask, x)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_written_out_attention_becomes_one_op():
    # q @ k^T, scalings, a causal mask computed at capture, softmax, a dropout of 0 and @ v
    # become one scaled_dot_product_attention (then kept for the attention kernel); forms it
    # would not compute the same, or that one kernel cannot run, stay written out.
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("tril", torch.tril(torch.ones(9, 9)).view(1, 1, 9, 9))
            self.register_buffer("minus_inf", torch.triu(torch.full((5, 7), float("-inf")), 1))
            self.register_buffer("other", torch.tril(torch.ones(5, 7), 1))
            self.drop = torch.nn.Dropout(0.0)
            self.mha = torch.nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, q, k, v, x, mask):
            a = (q @ k.transpose(-2, -1)) * 0.25  # MinGPT's
            a = a.masked_fill(self.tril[:, :, :5, :7] == 0, float("-inf"))
            mingpt = self.drop(torch.softmax(a, dim=-1)) @ v
            b = torch.matmul(q * 0.5, k.transpose(2, 3)) / 2  # a scaled q, a mask made in forward, in place
            b.masked_fill_(torch.ones(5, 7).tril() == 0, -1e30)
            made = torch.softmax(b, dim=3) @ v
            added = torch.softmax(q @ k.transpose(-2, -1) + self.minus_inf, -1) @ v  # an additive mask
            mha = self.mha(x, x, x)[0]  # its unused average of the weights
            # written out: another mask, a mask given as an input, the scores returned, a fill
            # that does not leave keys out, a dropout that drops, heads of 4
            other = torch.softmax((q @ k.transpose(-2, -1)).masked_fill(self.other == 0, float("-inf")), -1) @ v
            given = torch.softmax((q @ k.transpose(-2, -1)).masked_fill(mask, float("-inf")), -1) @ v
            scores = torch.softmax(q @ k.transpose(-2, -1), -1)
            returned = scores @ v
            finite = torch.softmax((q @ k.transpose(-2, -1)).masked_fill(self.tril[0, 0, :5, :7] == 0, -1.0), -1) @ v
            dropped = torch.nn.functional.dropout(torch.softmax(q @ k.transpose(-2, -1), -1), 0.5, True) @ v
            narrow = torch.softmax(q[..., :4] @ k[..., :4].transpose(-2, -1), -1) @ v
            return mingpt, made, added, mha, other, given, scores, returned, finite, narrow, dropped

    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 16), torch.randn(2, 3, 7, 16), torch.randn(2, 3, 7, 16)
    x, mask = torch.randn(2, 6, 32), torch.rand(5, 7) > 0.5
    model = M()
    ep, _ = capture.export_graph(model, (q, k, v, x, mask), "m.py")
    kept = [n for n in ep.graph.nodes if n.target is torch.ops.aten.scaled_dot_product_attention.default]
    assert [n.args[3:] for n in kept] == [(None, 0.0, True)] * 3 + [()], kept
    assert [n.kwargs["scale"] for n in kept] == pytest.approx([0.25, 0.25, 1.0, 8 ** -0.5])  # mha's: 1 / sqrt(32 / 4)
    assert sum(n.target is torch.ops.aten.amax.default for n in ep.graph.nodes) == 6  # the six written out
    got, want = ep.module()(q, k, v, x, mask), model(q, k, v, x, mask)
    for g, w in zip(got[:-1], want[:-1]):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)


def test_grouped_heads_are_read_as_they_are():
    # k and v repeated over q's heads (Llama's repeat_kv, repeat_interleave, written-out scores
    # over repeated keys) become enable_gqa's reads of k and v; forms that do not repeat each
    # head in turn, or that one kernel cannot run, read the copies. A copy read elsewhere too stays
    # for that reader.
    def repeat_kv(x, n):
        b, h, s, d = x.shape
        return x[:, :, None].expand(b, h, n, s, d).reshape(b, h * n, s, d)

    class M(torch.nn.Module):
        def forward(self, q, k, v, mask):
            sdpa = torch.nn.functional.scaled_dot_product_attention
            llama = sdpa(q, repeat_kv(k, 3), repeat_kv(v, 3), is_causal=True)
            interleaved = sdpa(q, k.repeat_interleave(3, dim=1), torch.repeat_interleave(v, 3, 1), scale=0.5)
            given = sdpa(q, k, v, enable_gqa=True)
            written = torch.softmax(q @ repeat_kv(k, 3).transpose(-2, -1) / 4, -1) @ repeat_kv(v, 3)
            b, h, s, d = k.shape  # Meta's: repeated over [b, s, h, d], then heads first
            seq_first = [x.transpose(1, 2)[:, :, :, None].expand(b, s, h, 3, d).reshape(b, s, 3 * h, d) for x in (k, v)]
            meta = sdpa(q, *[x.transpose(1, 2) for x in seq_first])
            # kept: heads tiled (not each repeated in turn), k and v repeated unlike each other,
            # a mask tensor
            tiled = sdpa(q, k.repeat(1, 3, 1, 1), v.repeat(1, 3, 1, 1))
            mixed = sdpa(q, repeat_kv(k, 3), torch.cat([v, v, v], 1))
            masked = sdpa(q, repeat_kv(k, 3), repeat_kv(v, 3), attn_mask=mask)
            shared = repeat_kv(k, 3)
            reread = sdpa(q, shared, repeat_kv(v, 3)) + shared[..., :5, :]
            return llama, interleaved, given, written, meta, tiled, mixed, masked, reread

    torch.manual_seed(0)
    q, k, v = torch.randn(2, 6, 5, 16), torch.randn(2, 2, 5, 16), torch.randn(2, 2, 5, 16)
    mask = torch.rand(5, 5) > 0.3
    model = M()
    ep, _ = capture.export_graph(model, (q, k, v, mask), "m.py")
    sdpa = [n for n in ep.graph.nodes if n.target is torch.ops.aten.scaled_dot_product_attention.default]
    grouped = [n for n in sdpa if n.kwargs.get("enable_gqa")]
    def source(x):  # through permutations
        return source(x.args[0]) if x.op == "call_function" and x.target is torch.ops.aten.permute.default else x

    assert len(grouped) == 6 and all(source(n.args[i]).op == "placeholder" for n in grouped for i in (1, 2))
    assert [n.kwargs.get("scale") for n in grouped] == [None, 0.5, None, 0.25, None, None]
    assert len(sdpa) == 8  # the masked one is written out
    assert not any(n.target is torch.ops.aten.repeat_interleave.self_int for n in ep.graph.nodes)
    got, want = ep.module()(q, k, v, mask), model(q, k, v, mask)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)


def test_scaled_gemm_operands_become_a_scaled_product():
    class M(torch.nn.Module):
        def forward(self, q, k, a, w):
            both = (q * 0.5) @ (k.transpose(-2, -1) / 4)  # through a transpose, a division
            left = torch.mm(3 * a, w)  # the number first
            kept = a * 2.0  # used twice: it stays
            reused = kept @ w + kept[:, :1]
            elementwise = (a + 1.0) @ w  # not a scale
            squared = (a * a) @ w  # a product of tensors
            scaled_w = w * 2.0
            twice = scaled_w @ scaled_w  # one value read as both operands
            return both, left, reused, elementwise, squared, twice

    q, k = torch.randn(2, 5, 8), torch.randn(2, 7, 8)
    a, w = torch.randn(6, 8), torch.randn(8, 8)
    ep, _ = capture.export_graph(M(), (q, k, a, w), "m.py")
    gemms = [n for n in ep.graph.nodes if n.target in (torch.ops.aten.mm.default, torch.ops.aten.bmm.default)]
    scales = [[u.args[1] for u in g.users if u.target is torch.ops.aten.mul.Tensor] for g in gemms]
    assert scales == [[0.125], [3.0], [], [], [], []], scales
    for got, want in zip(ep.module()(q, k, a, w), M()(q, k, a, w)):
        torch.testing.assert_close(got, want)


def test_products_with_a_diagonal_matrix_become_scalings():
    class M(torch.nn.Module):
        def forward(self, v, b, a, u, batch, m):
            d = torch.diag(v)
            rows = d @ b  # each row of b scaled
            cols = torch.mm(a, torch.diag(v))  # each column of a scaled
            vec = torch.diag(v) @ u  # v * u
            batched = torch.diag(v) @ batch  # broadcast over the batch
            shifted = torch.diag(v[:5], 1) @ b  # another diagonal: a product
            extracted = torch.diag(m) @ b  # the diagonal of a matrix (a vector) times b: a product
            return rows, cols, vec, batched, shifted, extracted, d

    n = 6
    v, b, a, u = torch.randn(n), torch.randn(n, 4), torch.randn(3, n), torch.randn(n)
    batch, m = torch.randn(2, n, 5), torch.randn(n, n)
    ep, _ = capture.export_graph(M(), (v, b, a, u, batch, m), "m.py")
    products = [n for n in ep.graph.nodes if n.target in (torch.ops.aten.mm.default, torch.ops.aten.bmm.default,
                                                           torch.ops.aten.mv.default)]
    assert len(products) == 2, ep.graph  # shifted and extracted
    for got, want in zip(ep.module()(v, b, a, u, batch, m), M()(v, b, a, u, batch, m)):
        torch.testing.assert_close(got, want)


STATEFUL = os.path.join(os.path.dirname(PY_DIR), "tests", "data", "small_hidden.py")


def test_reassigned_tensor_attributes_are_state(cli, tmp_path):
    # State in tensor attributes (small_hidden.py): torch.export would put a reassigned plain
    # attribute's old tensor back and only warn, it drops a submodule's reassigned buffer silently,
    # and it refuses a plain attribute changed in place. All are state the program updates; a
    # plain attribute forward only reads stays a constant.
    assert run_capture(cli, STATEFUL, tmp_path)[0] == 0
    g = load_graph(tmp_path)
    assert g["model"]["state_attributes"] == ["hidden", "cell.h", "cell.steps"]
    v = g["values"]
    assert (v["b_hidden"]["kind"], v["b_cell_h"]["kind"], v["b_cell_total"]["kind"]) == ("buffer",) * 3
    assert v["c_scale"]["kind"] == "constant"
    assert sorted(m["target"] for m in g["mutations"]) == ["cell.h", "cell.steps", "cell.total", "hidden"]

    module = common.load_module(STATEFUL, "stateful_model")
    reference, captured = module.Model(5), module.Model(5)
    captured.load_state_dict(reference.state_dict())
    for name in ("hidden", "scale"):
        setattr(captured, name, getattr(reference, name).clone())
    captured.cell.h, captured.cell.steps = reference.cell.h.clone(), reference.cell.steps.clone()
    ep, state = capture.export_graph(captured, module.get_inputs(), "model.py")
    assert state == ["hidden", "cell.h", "cell.steps"]
    assert captured.state_dict().keys() == reference.state_dict().keys()  # the new buffers are not persistent
    program = ep.module()
    for _ in range(3):  # each call starts from the state the last one left
        x = torch.randn(2, 5)
        torch.testing.assert_close(program(x), reference(x))
    torch.testing.assert_close(program.get_buffer("cell.h"), reference.cell.h)
    torch.testing.assert_close(program.get_buffer("cell.steps"), torch.tensor([3.0]))


def test_state_changed_in_place_found_without_torchs_message(monkeypatch):
    # torch.export refuses a plain attribute changed in place (small_hidden.py's cell.steps) with a
    # message naming it; worded otherwise (another torch version), capture finds the attribute by
    # what the refused trace changed.
    monkeypatch.setattr(capture, "_MUTATED_CONSTANT", re.compile(r"a message torch does not write"))
    module = common.load_module(STATEFUL, "stateful_model")
    torch.manual_seed(0)
    reference = module.Model(5)
    torch.manual_seed(0)
    captured = module.Model(5)
    ep, state = capture.export_graph(captured, module.get_inputs(), "model.py")
    assert state == ["hidden", "cell.h", "cell.steps"]
    program = ep.module()
    for _ in range(2):
        x = torch.randn(2, 5)
        torch.testing.assert_close(program(x), reference(x))
    torch.testing.assert_close(program.get_buffer("cell.steps"), torch.tensor([2.0]))


def test_state_overwritten_from_an_input():
    # KernelBench's VanillaRNN also copies an optional initial hidden state into its attribute
    # (copy_ of a (1, n) row broadcast over the batch here) before reassigning it.
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = torch.randn(3, 4)

        def forward(self, x, initial_hidden=None):
            if initial_hidden is not None:
                self.hidden.copy_(initial_hidden)
            self.hidden = torch.tanh(x + self.hidden)
            return self.hidden * 2.0

    torch.manual_seed(0)
    reference, captured = M(), M()
    captured.hidden = reference.hidden.clone()
    x, h = torch.randn(3, 4), torch.randn(1, 4)
    ep, state = capture.export_graph(captured, (x, h), "m.py")
    assert state == ["hidden"]
    assert not [n for n in ep.graph.nodes if "copy" in str(n.target)], ep.graph
    program = ep.module()
    for _ in range(2):
        torch.testing.assert_close(program(x, h), reference(x, h))
    torch.testing.assert_close(program.get_buffer("hidden"), reference.hidden)


def test_a_tensor_attribute_forward_creates_is_not_kept(cli, write_model, tmp_path):
    # A cache forward fills (None in __init__): not state, as before; a note says so.
    model = write_model("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.last = None

            def forward(self, x):
                self.last = x * 2.0
                return self.last + 1.0

        def get_inputs():
            return [torch.randn(3)]

        def get_init_inputs():
            return []
    """)
    code, err = run_capture(cli, model, tmp_path)
    assert code == 0, err
    assert "note: model.py: forward stores a tensor in self.last, which __init__ does not create" in err
    g = load_graph(tmp_path)
    assert g["model"]["state_attributes"] == [] and g["mutations"] == []


# Half-precision models: half tensors only at the boundary, every op in float32.
HALF = ("float16", "bfloat16")


def _reads(arg):
    """Names of the values a node's encoded args and kwargs read."""
    if isinstance(arg, dict):
        return [arg["value"]] if "value" in arg else [r for v in arg.values() for r in _reads(v)]
    if isinstance(arg, list):
        return [r for v in arg for r in _reads(v)]
    return []


def _converts_to(node):
    """The dtype a _to_copy node converts to, else None."""
    return node["kwargs"].get("dtype", {}).get("dtype") if node["op"] == "aten._to_copy.default" else None


def half_boundary(g):
    """Checks the contract graph.json gives the planner for half models and returns the readers of
    each value: every value float32 but the half placeholders, each read by its float32 conversion
    alone, and the _to_copy nodes to a half dtype, read only by conversions to float32 (or returned)."""
    nodes = {n["name"]: n for n in g["nodes"]}
    readers = {name: [] for name in g["values"]}
    for n in g["nodes"]:
        for name in _reads([n["args"], n["kwargs"]]):
            readers[name].append(n)
    for name, v in g["values"].items():
        if v["dtype"] not in HALF:
            assert v["dtype"] == "float32", (name, v)
        elif v["kind"] == "intermediate":
            assert _converts_to(nodes[name]) == v["dtype"], nodes[name]
            assert all(_converts_to(r) == "float32" for r in readers[name]), (name, readers[name])
        else:
            assert [_converts_to(r) for r in readers[name]] == ["float32"], (name, readers[name])
    return readers


def _half_values(g):
    return {name: v["dtype"] for name, v in g["values"].items() if v["dtype"] in HALF}


HALF_LINEAR = """
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 32)
            self.half()

        def forward(self, x):
            return torch.nn.functional.gelu(self.fc(x))


    def get_inputs():
        return [torch.randn(8, 64).half()]


    def get_init_inputs():
        return []
"""


def test_float16_model_is_computed_in_float32(cli, write_model, tmp_path):
    out = tmp_path / "work"
    code, err = run_capture(cli, write_model(HALF_LINEAR), out)
    assert code == 0, err
    g = load_graph(out)
    half_boundary(g)
    result = g["nodes"][-1]
    assert g["outputs"] == [result["name"]] and _converts_to(result) == "float16"
    assert _half_values(g) == {"x": "float16", "p_fc_weight": "float16", "p_fc_bias": "float16",
                               result["name"]: "float16"}
    gemms = [n["name"] for n in g["nodes"] if n["op"] in ("aten.addmm.default", "aten.mm.default")]
    assert gemms and all(g["values"][n]["dtype"] == "float32" for n in gemms)
    # What the model holds in float16 and the graph computes in float32 says so (the planner may
    # store it in half); the conversions of the inputs hold float16 values exactly.
    assert all(g["values"][n]["model_dtype"] == "float16" for n in gemms)
    assert all(v.get("model_dtype", "float16") == "float16" for v in g["values"].values())
    assert g["values"][result["args"][0]["value"]]["dtype"] == "float32"  # the gelu, rounded last
    assert result["source"] == "model.py:12: return torch.nn.functional.gelu(self.fc(x))"


def test_bfloat16_softmax_keeps_its_rounding(cli, write_model, tmp_path):
    # torch's softmax of bfloat16 computes in float32 and rounds once: that rounding is the output.
    out = tmp_path / "work"
    code, err = run_capture(cli, write_model("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(16, 24).to(torch.bfloat16)

            def forward(self, x):
                return torch.softmax(self.fc(x), dim=-1)

        def get_inputs():
            return [torch.randn(4, 16).to(torch.bfloat16)]

        def get_init_inputs():
            return []
    """), out)
    assert code == 0, err
    g = load_graph(out)
    half_boundary(g)
    assert _half_values(g) == {"x": "bfloat16", "p_fc_weight": "bfloat16", "p_fc_bias": "bfloat16",
                               g["outputs"][0]: "bfloat16"}
    assert {"aten.amax.default", "aten.exp.default"} <= {n["op"] for n in g["nodes"]}


def test_rounding_inside_a_float32_model(cli, write_model, tmp_path):
    # x.half() rounds; the mul reads its float32 conversion, as every other op would.
    out = tmp_path / "work"
    code, err = run_capture(cli, write_model(_model("y = x.half()\n        return (y * 2).float()",
                                                    "[torch.randn(5, 3)]")), out)
    assert code == 0, err
    g = load_graph(out)
    readers = half_boundary(g)
    (rounding, dtype), = _half_values(g).items()
    assert dtype == "float16" and next(n for n in g["nodes"] if n["name"] == rounding)["args"] == [{"value": "x"}]
    widened, = readers[rounding]
    assert _converts_to(widened) == "float32"
    assert [n["op"] for n in readers[widened["name"]]] == ["aten.mul.Tensor"]
    assert g["values"][g["outputs"][0]]["dtype"] == "float32"


def test_half_factory_is_float32_then_rounded(cli, write_model, tmp_path):
    # torch.full(..., dtype=torch.float16) fills in float32 and rounds: the add reads exactly the
    # half values (0.1 is not one), so the result is the model's own to the bit.
    out = tmp_path / "work"
    model = write_model(_model("return torch.full((4,), 0.1, dtype=torch.float16) + x", "[torch.randn(3, 4).half()]"))
    code, err = run_capture(cli, model, out)
    assert code == 0, err
    g = load_graph(out)
    readers = half_boundary(g)
    full = next(n for n in g["nodes"] if n["op"] == "aten.full.default")
    assert full["kwargs"]["dtype"] == {"dtype": "float32"} and g["values"][full["name"]]["dtype"] == "float32"
    rounding, = readers[full["name"]]
    assert _converts_to(rounding) == "float16"
    widened, = readers[rounding["name"]]
    assert _converts_to(widened) == "float32"
    assert [n["op"] for n in readers[widened["name"]]] == ["aten.add.Tensor"]
    assert [g["values"][o]["dtype"] for o in g["outputs"]] == ["float16"]
    ep = torch.export.load(str(out / "graph.pt2"))
    torch.manual_seed(1)  # the seeding rule: get_inputs() after seed + 1
    x = torch.randn(3, 4).half()
    torch.testing.assert_close(ep.module()(x), torch.full((4,), 0.1, dtype=torch.float16) + x, atol=0, rtol=0)


def test_float32_graph_is_left_as_it_is(cli, linear_model, tmp_path):
    assert run_capture(cli, linear_model, tmp_path)[0] == 0
    g = load_graph(tmp_path)
    assert "aten._to_copy.default" not in [n["op"] for n in g["nodes"]]
    assert not any("model_dtype" in v for v in g["values"].values())
    ep = torch.export.export(torch.nn.Linear(8, 4), (torch.randn(2, 8),)).run_decompositions(decompose.decompositions())
    code = ep.graph_module.code
    half.compute_half_in_float32(ep.graph_module)
    assert ep.graph_module.code == code


@pytest.mark.filterwarnings("ignore:The given buffer is not writable")
def test_half_program_reloads_and_keeps_its_outputs(tmp_path):
    # A half buffer updated in place, a half constant, a half input returned as it is, and a
    # float32 result: the outputs keep their dtypes and names through save and load.
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(3, dtype=torch.bfloat16))
            self.k = torch.tensor([0.3, 0.5, 0.7], dtype=torch.float16)

        def forward(self, x, i):
            self.count.add_(1)
            return x * self.k, x, (i.half() * self.k).sum(-1, dtype=torch.float32)

    x, i = torch.randn(2, 3).half(), torch.arange(6).view(2, 3)
    ep, _ = capture.export_graph(M(), (x, i), "m.py")
    muls = [n.meta["val"].dtype for n in ep.graph.nodes if n.target is torch.ops.aten.mul.Tensor]
    assert muls == [torch.float32, torch.float32]
    output = next(n for n in ep.graph.nodes if n.op == "output")
    assert [s.arg.name for s in ep.graph_signature.output_specs] == [a.name for a in output.args[0]]
    assert [a.meta["val"].dtype for a in output.args[0]] == [torch.bfloat16, torch.float16, torch.float16,
                                                               torch.float32]
    ep.example_inputs = None
    torch.export.save(ep, str(tmp_path / "m.pt2"))
    loaded = torch.export.load(str(tmp_path / "m.pt2")).module()
    want = M()(x, i)
    for got in (ep.module()(x, i), loaded(x, i)):
        for a, b in zip(got, want):
            assert a.dtype == b.dtype
            torch.testing.assert_close(a, b, atol=1e-3, rtol=1e-3)


def test_lstm_final_states_keep_their_shapes():
    # torch's LSTM decomposition returns h_n and c_n as [layers, 1, batch, hidden] (it squeezes
    # the wrong dimension); the captured program returns them as the model does, in every form.
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = torch.nn.LSTM(7, 5, 2, batch_first=True)
            self.both = torch.nn.LSTM(7, 6, bidirectional=True, proj_size=3)

        def forward(self, x, h0, c0):
            _, (h, c) = self.first(x, (h0, c0))
            out, (hb, cb) = self.both(x)
            return h, c, out, hb, cb

    torch.manual_seed(0)
    model = M()
    inputs = (torch.randn(4, 3, 7), torch.randn(2, 4, 5), torch.randn(2, 4, 5))
    ep, _ = capture.export_graph(model, inputs, "m.py")
    got, want = ep.module()(*inputs), model(*inputs)
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)
def test_lstms_become_one_op_each():
    # nn.LSTM in the forms the recurrent kernel runs (batch first or time first, several layers,
    # an initial state given or not) becomes fusetune::lstm on its packed weights; the others
    # (bidirectional, over 16 batch rows, a projection) are written out as before.
    # The captured program computes what the model does either way.
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = torch.nn.LSTM(7, 9, 2, batch_first=True)
            self.time = torch.nn.LSTM(9, 5)
            self.stateless = torch.nn.LSTM(9, 5)
            self.both = torch.nn.LSTM(9, 5, bidirectional=True)
            self.wide = torch.nn.LSTM(7, 5, batch_first=True)
            self.projected = torch.nn.LSTM(9, 6, proj_size=4)

        def forward(self, x, h0, c0, h1, c1, many):
            out, (h, c) = self.first(x, (h0, c0))
            seq = out.transpose(0, 1)  # [T, B, 9], read through strides
            y, (hn, cn) = self.time(seq, (h1, c1))
            return (out * 2, h, c + 1, y[-1], hn, cn, self.stateless(seq)[0], self.both(seq)[0],
                    self.wide(many)[1][0], self.projected(seq)[0])

    torch.manual_seed(0)
    model = M()
    inputs = (torch.randn(3, 6, 7), torch.randn(2, 3, 9), torch.randn(2, 3, 9), torch.randn(1, 3, 5),
              torch.randn(1, 3, 5), torch.randn(17, 4, 7))
    ep, _ = capture.export_graph(model, inputs, "m.py")
    ops = [n for n in ep.graph.nodes if n.op == "call_function"]
    lstms = [n for n in ops if n.target is torch.ops.fusetune.lstm.default]
    assert [n.args[4] for n in lstms] == [2, 1, 1]
    assert not any(n.target is torch.ops.aten.lstm.input for n in ops)  # the others written out
    weights = [n.args[3] for n in lstms]
    assert all(w.target is torch.ops.aten.cat.default for w in weights)
    got, want = ep.module()(*inputs), model(*inputs)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)


def test_lstm_kernel_limits_match_the_search_space():
    # Capture keeps an LSTM whole only where a config of configs/recurrent.json fits.
    from fusetune_py import recurrent
    space = json.load(open(os.path.join(PY_DIR, "..", "..", "configs", "recurrent.json")))
    assert tuple(space["params"]["U"]) == recurrent.UNITS
    assert recurrent.kernel_fits(10, 128, 256, 6)  # KernelBench's LSTMs
    assert not recurrent.kernel_fits(10, 1024, 1024, 6)  # rows past shared memory, or too many blocks
