# Tests of fusetune_py.tensors: reference tensors match the seeding rule and the user's forward,
# files have the documented layout, and every user error path gives one line and status 2.
import json
import os

import numpy as np
import pytest
import torch

from fusetune_py import capture, common, tensors
from conftest import REPO, SHARED_MODELS

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int64": torch.int64,
          "bool": torch.bool}


def captured(cli, model, work, seed=0):
    code, err = cli(capture.main, ["--model", model, "--out", str(work), "--seed", str(seed)])
    assert code == 0, err
    with open(work / "graph.json") as f:
        return json.load(f)


def run_tensors(cli, work, names, out, *extra):
    names_file = work.parent / "names.json"
    names_file.write_text(json.dumps(names))
    return cli(tensors.main, ["--work", str(work), "--names", str(names_file), "--out", str(out),
                              "--device", "cpu", *extra])


def read_tensor(out, name):
    with open(out / "tensors.json") as f:
        meta = json.load(f)[name]
    data = torch.from_numpy(np.fromfile(out / meta["file"], dtype=np.uint8))  # numpy has no bfloat16
    return data.view(DTYPES[meta["dtype"]]).reshape(meta["shape"]), meta


def test_values_follow_the_seeding_rule(cli, linear_model, tmp_path):
    g = captured(cli, linear_model, tmp_path / "work", seed=5)
    names = ["x", "r", "p_fc_weight", "p_fc_bias"] + [n["name"] for n in g["nodes"]]
    code, err = run_tensors(cli, tmp_path / "work", names, tmp_path / "out", "--self-check")
    assert code == 0, err
    torch.manual_seed(5)
    fc = torch.nn.Linear(8, 8)
    torch.manual_seed(6)
    x, r = torch.randn(4, 8), torch.randn(4, 8)
    expected = {"x": x, "r": r, "p_fc_weight": fc.weight, "p_fc_bias": fc.bias,
                g["outputs"][0]: torch.relu(fc(x)) * 2.0 + r}
    for name, want in expected.items():
        got, meta = read_tensor(tmp_path / "out", name)
        assert meta == {"file": f"{name}.bin", "shape": list(want.shape), "dtype": "float32"}
        torch.testing.assert_close(got, want.detach())
    with open(tmp_path / "out" / "tensors.json") as f:
        assert list(json.load(f)) == names
    assert sorted(os.listdir(tmp_path / "out")) == sorted([f"{n}.bin" for n in names] + ["tensors.json"])


def test_bool_int_buffers_constants_and_passthrough(cli, write_model, tmp_path):
    model = write_model("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.bn = nn.BatchNorm1d(3)
                self.k = torch.tensor([2.0, 3.0, 4.0])

            def forward(self, x):
                mask = x > 0
                y = torch.where(mask, self.bn(x), torch.zeros(3)) * self.k
                return y, x

        def get_inputs():
            return [torch.randn(5, 3)]

        def get_init_inputs():
            return []
    """)
    g = captured(cli, model, tmp_path / "work")
    gt = next(n["name"] for n in g["nodes"] if n["op"] == "aten.gt.Scalar")
    names = [gt, "b_bn_num_batches_tracked", "c_k"] + g["outputs"] + [m["value"] for m in g["mutations"]]
    code, err = run_tensors(cli, tmp_path / "work", names, tmp_path / "out", "--self-check")
    assert code == 0, err
    mask, meta = read_tensor(tmp_path / "out", gt)
    x, _ = read_tensor(tmp_path / "out", "x")
    assert meta["dtype"] == "bool" and torch.equal(mask.bool(), x > 0)
    assert os.path.getsize(tmp_path / "out" / f"{gt}.bin") == x.numel()
    count, meta = read_tensor(tmp_path / "out", "b_bn_num_batches_tracked")
    assert meta == {"file": "b_bn_num_batches_tracked.bin", "shape": [], "dtype": "int64"} and count.item() == 0
    assert read_tensor(tmp_path / "out", "c_k")[0].tolist() == [2.0, 3.0, 4.0]
    new_count = next(m["value"] for m in g["mutations"] if m["target"] == "bn.num_batches_tracked")
    assert read_tensor(tmp_path / "out", new_count)[0].item() == 1


def test_reassigned_tensor_attributes_are_read_as_buffers(cli, tmp_path):
    # The rebuilt model makes the attributes capture found reassigned buffers too: their tensors are
    # the model's own, and their new values are what one eager forward leaves in them.
    model = os.path.join(REPO, "tuner/tests/data/small_hidden.py")
    g = captured(cli, model, tmp_path / "work", seed=4)
    updates = {m["target"]: m["value"] for m in g["mutations"]}
    names = ["x", "b_hidden", "b_cell_h", updates["hidden"], updates["cell.h"]] + g["outputs"]
    code, err = run_tensors(cli, tmp_path / "work", names, tmp_path / "out", "--self-check")
    assert code == 0, err
    module = common.load_module(model, "small_hidden")
    eager, (x,), _ = common.build_model_and_inputs(module, 4)
    torch.testing.assert_close(read_tensor(tmp_path / "out", "b_hidden")[0], eager.hidden)
    torch.testing.assert_close(read_tensor(tmp_path / "out", "x")[0], x)
    out = eager(x)
    torch.testing.assert_close(read_tensor(tmp_path / "out", g["outputs"][0])[0], out)
    torch.testing.assert_close(read_tensor(tmp_path / "out", updates["hidden"])[0], eager.hidden)
    torch.testing.assert_close(read_tensor(tmp_path / "out", updates["cell.h"])[0], eager.cell.h)


@pytest.mark.parametrize("dtype", ["float32", "float16"])  # half outputs have a looser tolerance
def test_self_check_catches_a_graph_that_disagrees(cli, write_model, tmp_path, dtype):
    model = write_model(f"""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = nn.Dropout(0.5)

            def forward(self, x):
                return self.drop(x)

        def get_inputs():
            return [torch.randn(64, 64).to(torch.{dtype})]

        def get_init_inputs():
            return []
    """)
    captured(cli, model, tmp_path / "work")
    code, err = run_tensors(cli, tmp_path / "work", ["x"], tmp_path / "out", "--self-check")
    assert code == 1 and err.startswith("error: self-check failed: ") and err.count("\n") == 1
    assert not os.path.exists(tmp_path / "out")


@pytest.fixture
def work(cli, linear_model, tmp_path):
    captured(cli, linear_model, tmp_path / "work")
    return tmp_path / "work"


@pytest.mark.parametrize("names, message", [
    (["x", "nope"], "error: value 'nope' is not in the captured graph"),
    ({"x": 1}, "error: {names} must hold a JSON list of value names"),
    ("x", "error: {names} must hold a JSON list of value names"),
])
def test_bad_names(cli, work, tmp_path, names, message):
    code, err = run_tensors(cli, work, names, tmp_path / "out")
    assert code == 2 and err == message.format(names=tmp_path / "names.json") + "\n"
    assert not os.path.exists(tmp_path / "out")


def test_tuple_value_is_refused(cli, write_model, tmp_path):
    model = write_model("""
        class Model(nn.Module):
            def forward(self, x):
                return torch.nn.functional.max_pool2d(x, 2, return_indices=True)[0]

        def get_inputs():
            return [torch.randn(1, 2, 4, 4)]

        def get_init_inputs():
            return []
    """)
    g = captured(cli, model, tmp_path / "work")
    tup = next(k for k, v in g["values"].items() if v["kind"] == "tuple")
    code, err = run_tensors(cli, tmp_path / "work", [tup], tmp_path / "out")
    assert code == 2 and err == f"error: value {tup!r} is a tuple; ask for the getitem values that unpack it\n"


def test_changed_model_file(cli, work, linear_model, tmp_path):
    with open(linear_model, "a") as f:
        f.write("# edited\n")
    code, err = run_tensors(cli, work, ["x"], tmp_path / "out")
    assert code == 2 and err == "error: model.py has changed since it was captured; run capture again\n"


def test_missing_model_file(cli, work, linear_model, tmp_path):
    os.unlink(linear_model)
    code, err = run_tensors(cli, work, ["x"], tmp_path / "out")
    assert code == 2 and err == f"error: model file not found: {linear_model}\n"


def test_missing_or_foreign_graph(cli, work, tmp_path):
    os.unlink(work / "graph.pt2")
    code, err = run_tensors(cli, work, ["x"], tmp_path / "out")
    assert code == 2 and err == f"error: captured graph not found: {work / 'graph.pt2'}\n"
    (work / "graph.json").write_text('{"format": "something-else"}')
    code, err = run_tensors(cli, work, ["x"], tmp_path / "out")
    assert code == 2 and "is not a fusetune-graph version 1 file" in err
    os.unlink(work / "graph.json")
    code, err = run_tensors(cli, work, ["x"], tmp_path / "out")
    assert code == 2 and err == f"error: graph description not found: {work / 'graph.json'}\n"


def test_missing_names_file(cli, work, tmp_path):
    code, err = cli(tensors.main, ["--work", str(work), "--names", str(tmp_path / "no.json"),
                                   "--out", str(tmp_path / "out"), "--device", "cpu"])
    assert code == 2 and err == f"error: names file not found: {tmp_path / 'no.json'}\n"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_requested_without_cuda(cli, work, tmp_path):
    (tmp_path / "names.json").write_text('["x"]')
    code, err = cli(tensors.main, ["--work", str(work), "--names", str(tmp_path / "names.json"),
                                   "--out", str(tmp_path / "out"), "--device", "cuda"])
    assert code == 2 and err.startswith("error: no CUDA device is available")


@pytest.mark.skipif(not SHARED_MODELS, reason="no shared models on this machine")
@pytest.mark.parametrize("path", SHARED_MODELS, ids=os.path.basename)
def test_shared_models_self_check(cli, shrunk, tmp_path, path):
    """Every value of every shared model, with the interpreter checked against model(*inputs)."""
    model = shrunk(path)
    code, err = cli(capture.main, ["--model", model, "--out", str(tmp_path / "work")])
    assert code == 0, err
    with open(tmp_path / "work" / "graph.json") as f:
        values = json.load(f)["values"]
    names = [k for k, v in values.items() if v["kind"] != "tuple"]
    code, err = run_tensors(cli, tmp_path / "work", names, tmp_path / "out", "--self-check")
    assert code == 0, err
    for name in names:
        got, meta = read_tensor(tmp_path / "out", name) if values[name]["dtype"] in DTYPES else (None, None)
        if meta:
            assert meta["shape"] == values[name]["shape"] and list(got.shape) == meta["shape"]


def test_number_inputs_take_their_places(cli, write_model, tmp_path):
    # A number get_inputs() gives is baked into the graph; the reference run passes it in its place.
    model = write_model("""
        class Model(nn.Module):
            def forward(self, x, s, y):
                return x * s + y

        def get_inputs():
            return [torch.randn(5, 3), 0.5, torch.randn(5, 3)]

        def get_init_inputs():
            return []
    """)
    g = captured(cli, model, tmp_path / "work", seed=2)
    out_name = g["outputs"][0]
    code, err = run_tensors(cli, tmp_path / "work", ["x", "y", out_name], tmp_path / "out", "--self-check")
    assert code == 0, err
    x, _ = read_tensor(tmp_path / "out", "x")
    y, _ = read_tensor(tmp_path / "out", "y")
    got, _ = read_tensor(tmp_path / "out", out_name)
    torch.testing.assert_close(got, x * 0.5 + y)


def test_half_model_references(cli, write_model, tmp_path):
    # Half tensors stored as they are (two bytes each), every op computed in float32, and the
    # graph's outputs within fusetune's tolerance of the model's own half arithmetic.
    model = write_model("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(64, 32).half()

            def forward(self, x, y):
                h = torch.nn.functional.gelu(self.fc(x))
                return h - h.mean(-1, keepdim=True), torch.softmax(h.to(torch.bfloat16) * y, dim=-1)

        def get_inputs():
            return [torch.randn(8, 64).half(), torch.randn(8, 32).to(torch.bfloat16)]

        def get_init_inputs():
            return []
    """)
    g = captured(cli, model, tmp_path / "work", seed=3)
    names = [k for k, v in g["values"].items() if v["kind"] != "tuple"]
    code, err = run_tensors(cli, tmp_path / "work", names, tmp_path / "out", "--self-check")
    assert code == 0, err
    x, meta = read_tensor(tmp_path / "out", "x")
    assert meta["dtype"] == "float16" and os.path.getsize(tmp_path / "out" / "x.bin") == 2 * x.numel()
    addmm = next(n["name"] for n in g["nodes"] if n["op"] == "aten.addmm.default")
    assert read_tensor(tmp_path / "out", addmm)[1]["dtype"] == "float32"
    torch.manual_seed(3)
    fc = torch.nn.Linear(64, 32).half()
    torch.manual_seed(4)
    x, y = torch.randn(8, 64).half(), torch.randn(8, 32).to(torch.bfloat16)
    h = torch.nn.functional.gelu(fc(x))
    wants = [h - h.mean(-1, keepdim=True), torch.softmax(h.to(torch.bfloat16) * y, dim=-1)]
    got = [read_tensor(tmp_path / "out", name)[0] for name in g["outputs"]]
    for a, b in zip(got, wants):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b.detach(), atol=1e-2, rtol=1e-2)
    # The centred rows cancel: the graph's one rounding and the model's one per op are further
    # apart than assert_close's float16 default allows, which the self-check therefore does not use.
    with pytest.raises(AssertionError):
        torch.testing.assert_close(got[0], wants[0].detach())


def test_half_forms_self_check(cli, tmp_path):
    # The GPU suite's half model: its float32 output (b.float().amax(0)) follows a bfloat16 rounding
    # the model makes after every op and the graph only where the model converts; the self-check
    # takes fusetune's tolerance for every output of a model with half values.
    model = os.path.join(REPO, "tests", "gpu", "models", "half_forms.py")
    g = captured(cli, model, tmp_path / "work")
    assert [g["values"][o]["dtype"] for o in g["outputs"]] == ["float16", "bfloat16", "bfloat16", "float32"]
    assert all(n["source"] for n in g["nodes"]), [n["name"] for n in g["nodes"] if not n["source"]]
    code, err = run_tensors(cli, tmp_path / "work", g["outputs"], tmp_path / "out", "--self-check")
    assert code == 0, err


def test_values_keep_the_strides_capture_saw():
    # An attention's output in the order capture's CPU kernel wrote it ([b, s, h, d] in memory),
    # viewed as merged heads: a GPU backend that writes it contiguous gets it laid out as captured,
    # so the graph's view still holds. Broadcast views and matching layouts pass as they are.
    captured = torch.empty(2, 5, 3, 4).transpose(1, 2)  # [2, 3, 5, 4] with strides (60, 4, 12, 1)
    run = torch.randn(2, 3, 5, 4)
    laid = tensors._as_captured(run, captured)
    assert laid.stride() == captured.stride() and torch.equal(laid, run)
    assert laid.transpose(1, 2).view(2, 5, 12).shape == (2, 5, 12)
    assert tensors._as_captured(run, torch.empty(2, 3, 5, 4)) is run
    wide = torch.randn(2, 1, 5, 4)
    assert tensors._as_captured(wide, torch.empty(2, 1, 5, 4).transpose(1, 2).transpose(1, 2)) is wide
    broadcast = torch.randn(5, 4).expand(2, 3, 5, 4)
    assert tensors._as_captured(run, broadcast) is run


def test_the_graph_runs_whatever_layout_the_attention_writes():
    # Capture saw the attention over repeated keys, read as [b, s, h, d] views, write its output
    # in that order (the CPU's kernel), so the merged heads after it are a view. Reading k and v
    # as they are (enable_gqa), CUDA runs it in its math backend, which writes the output
    # contiguous (as AsTheGpuWrites does here): the view taken at capture must still hold when the
    # reference tensors are computed.
    class M(torch.nn.Module):
        def forward(self, q, k, v):
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            sdpa = torch.nn.functional.scaled_dot_product_attention
            y = sdpa(q, k.repeat_interleave(4, dim=1), v.repeat_interleave(4, dim=1))
            return y.transpose(1, 2).reshape(2, 64, -1) * 2.0

    attention = torch.ops.aten.scaled_dot_product_attention.default

    class AsTheGpuWrites(tensors.RecordingInterpreter):
        def call_function(self, target, args, kwargs):
            out = super().call_function(target, args, kwargs)
            return out.contiguous() if target is attention else out

    q, k, v = torch.randn(2, 64, 8, 32), torch.randn(2, 64, 2, 32), torch.randn(2, 64, 2, 32)
    model = M()
    ep, _ = capture.export_graph(model, (q, k, v), "m.py")
    node = next(n for n in ep.graph.nodes if n.target is attention)
    assert node.kwargs["enable_gqa"] and not node.meta["val"].is_contiguous()
    got = AsTheGpuWrites(ep.graph_module, [], "cpu").run(*tensors.flat_args(ep, model, [q, k, v], "cpu"))
    torch.testing.assert_close(got[0], model(q, k, v))
