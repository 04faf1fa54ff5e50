# Tests of fusetune_py.verify on the CPU: a faithful ModelNew passes, a wrong one fails with its
# mismatches listed, a different state_dict is caught, and user errors give one line and status 2.
import json
import time

import pytest
import torch

from fusetune_py import verify

MODEL = """
    class Model(nn.Module):
        def __init__(self, features):
            super().__init__()
            self.fc = nn.Linear(features, features)
            self.bn = nn.BatchNorm1d(features)

        def forward(self, x):
            y = torch.relu(self.bn(self.fc(x)))
            return y, y.sum(dim=1)


    def get_inputs():
        return [torch.randn(16, 8)]


    def get_init_inputs():
        return [8]
"""

NEW_TEMPLATE = """
    import torch.nn.functional as F


    class ModelNew(nn.Module):
        def __init__(self, features):
            super().__init__()
            self.fc = nn.Linear(features, features)
            self.bn = nn.BatchNorm1d(features)

        def forward(self, x):
            bn = self.bn
            y = F.batch_norm(x @ self.fc.weight.t() + self.fc.bias, bn.running_mean, bn.running_var,
                             bn.weight, bn.bias, self.training, bn.momentum, bn.eps)
            bn.num_batches_tracked.add_(1)
            y = torch.relu(y)
            OUTPUT
"""


def new_model(write_model, output="return y, y.sum(dim=1)", body=None):
    return write_model(body or NEW_TEMPLATE.replace("OUTPUT", output), name="model_new.py")


def run_verify(cli, model, model_new, out, *extra):
    code, err = cli(verify.main, ["verify", "--model", model, "--model-new", model_new, "--seed", "3",
                                  "--out", str(out), "--device", "cpu", *extra])
    if code == 0:
        with open(out) as f:
            return code, err, json.load(f)
    return code, err, None


def test_faithful_model_passes(cli, write_model, tmp_path):
    code, err, res = run_verify(cli, write_model(MODEL), new_model(write_model), tmp_path / "v.json")
    assert code == 0, err
    assert res["ok"] and res["state_dict_loads"] and (res["atol"], res["rtol"]) == (1e-2, 1e-2)
    assert [t["seed"] for t in res["trials"]] == [1003, 2003, 3003, 4003, 5003]
    for t in res["trials"]:
        assert t["ok"] and t["n_mismatch"] == 0 and t["first_mismatches"] == [] and t["rel_l2"] < 1e-5
        assert len(t["outputs"]) == 2


def test_wrong_model_fails_with_mismatches(cli, write_model, tmp_path):
    model_new = new_model(write_model, output="return y * 1.1, y.sum(dim=1)")
    code, err, res = run_verify(cli, write_model(MODEL), model_new, tmp_path / "v.json", "--trials", "2")
    assert code == 0, err
    assert not res["ok"] and res["state_dict_loads"] and len(res["trials"]) == 2
    t = res["trials"][0]
    assert not t["ok"] and t["n_mismatch"] > 0 and len(t["first_mismatches"]) == 10
    m = t["first_mismatches"][0]
    assert m["output"] == 0 and len(m["index"]) == 2 and m["out"] == pytest.approx(1.1 * m["ref"], rel=1e-5)
    assert t["max_rel_err"] == pytest.approx(0.1, rel=1e-3) and t["rel_l2"] == pytest.approx(0.1, rel=1e-3)
    assert not t["outputs"][0]["ok"] and t["outputs"][1]["ok"]


def test_near_zero_output_needs_the_norm_check(cli, write_model, tmp_path):
    model = write_model(MODEL.replace("return y, y.sum(dim=1)", "return y * 1e-4, y.sum(dim=1)"))
    model_new = new_model(write_model, output="return torch.zeros_like(y), y.sum(dim=1)")
    code, err, res = run_verify(cli, model, model_new, tmp_path / "v.json", "--trials", "1")
    assert code == 0 and not res["ok"]
    first = res["trials"][0]["outputs"][0]
    assert (first["n_mismatch"], first["reason"], first["rel_l2"]) == (0, "relative L2 error", 1.0)


def test_reference_far_below_atol_is_judged_elementwise(cli, write_model, tmp_path):
    """A reference that is rounding noise around 0 (RMS under atol / 1000) has no norm to compare:
    any two correct implementations differ by 100% there."""
    model = write_model(MODEL.replace("return y, y.sum(dim=1)", "return y * 1e-9, y.sum(dim=1)"))
    model_new = new_model(write_model, output="return torch.zeros_like(y), y.sum(dim=1)")
    code, err, res = run_verify(cli, model, model_new, tmp_path / "v.json", "--trials", "1")
    assert code == 0 and res["ok"], res
    first = res["trials"][0]["outputs"][0]
    assert (first["n_mismatch"], first["reason"], first["rel_l2"]) == (0, None, 1.0)


def test_nan_output_fails(cli, write_model, tmp_path):
    model_new = new_model(write_model, output="y[0, 0] = float('nan'); return y, y.sum(dim=1)")
    code, err, res = run_verify(cli, write_model(MODEL), model_new, tmp_path / "v.json", "--trials", "1")
    assert code == 0 and not res["ok"]
    t = res["trials"][0]
    first = t["first_mismatches"][0]
    assert (first["index"], first["out"], first["output"]) == ([0, 0], {"float": "nan"}, 0)
    assert t["rel_l2"] == {"float": "inf"}


def test_state_the_model_updates_is_compared(cli, write_model, tmp_path):
    """BatchNorm's running statistics and counter after each forward: a ModelNew that leaves them
    alone returns the right outputs and still fails."""
    body = NEW_TEMPLATE.replace("OUTPUT", "return y, y.sum(dim=1)")
    body = body.replace("bn.running_mean, bn.running_var,", "None, None,").replace("bn.num_batches_tracked.add_(1)", "pass")
    code, err, res = run_verify(cli, write_model(MODEL), new_model(write_model, body=body), tmp_path / "v.json", "--trials", "1")
    assert code == 0, err
    trial = res["trials"][0]
    assert not res["ok"] and trial["outputs"][0]["ok"] and trial["outputs"][1]["ok"]
    state = trial["state"]
    assert not state["bn.running_mean"]["ok"] and not state["bn.running_var"]["ok"]
    assert state["bn.num_batches_tracked"] == {"ok": False, "reason": "0 != reference 1"}


def test_state_held_in_plain_attributes_is_compared(cli, write_model, tmp_path):
    """Model keeps its hidden state in a plain attribute that forward reassigns; ModelNew keeps it as
    a buffer (as fusetune generates it). Each trial compares it: a ModelNew that forgets to update it
    returns the right first output and still fails; one that updates it passes every trial."""
    model = write_model("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.hidden = torch.randn(2, 3)

            def forward(self, x):
                self.hidden = self.hidden.to(x.device)
                self.hidden = torch.tanh(x + self.hidden)
                return self.hidden * 2.0

        def get_inputs():
            return [torch.randn(2, 3)]

        def get_init_inputs():
            return []
    """)
    new = """
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("hidden", torch.randn(2, 3), persistent=False)

            def forward(self, x):
                h = torch.tanh(x + self.hidden)
                UPDATE
                return h * 2.0
    """
    forgets = write_model(new.replace("UPDATE", "pass"), name="forgets.py")
    code, err, res = run_verify(cli, model, forgets, tmp_path / "v.json", "--trials", "1")
    assert code == 0, err
    trial = res["trials"][0]
    assert not res["ok"] and trial["outputs"][0]["ok"] and not trial["state"]["hidden"]["ok"]
    updates = write_model(new.replace("UPDATE", "self.hidden.copy_(h)"), name="updates.py")
    code, err, res = run_verify(cli, model, updates, tmp_path / "v.json", "--trials", "3")
    assert code == 0, err
    assert res["ok"] and all(t["state"]["hidden"]["ok"] for t in res["trials"])


def test_different_state_dict(cli, write_model, tmp_path):
    body = NEW_TEMPLATE.replace("OUTPUT", "return y, y.sum(dim=1)").replace("self.bn = nn", "self.norm = nn")
    body = body.replace("bn = self.bn", "bn = self.norm")
    code, err, res = run_verify(cli, write_model(MODEL), new_model(write_model, body=body), tmp_path / "v.json")
    assert code == 0, err
    assert not res["ok"] and not res["state_dict_loads"]
    assert "Missing key(s)" in res["state_dict_error"] and "norm.weight" in res["state_dict_error"]


def test_wrong_output_structure_and_shape(cli, write_model, tmp_path):
    model_new = new_model(write_model, output="return y")
    code, err, res = run_verify(cli, write_model(MODEL), model_new, tmp_path / "v.json", "--trials", "1")
    assert code == 0 and not res["ok"]
    assert res["trials"][0]["error"] == "ModelNew returned a tensor, Model a tuple of 2 values"
    model_new = new_model(write_model, output="return y, y.sum(dim=1, keepdim=True)")
    code, err, res = run_verify(cli, write_model(MODEL), model_new, tmp_path / "v.json", "--trials", "1")
    assert res["trials"][0]["outputs"][1]["reason"] == "shape [16, 1] != reference [16]"


def test_crashing_model_new_is_a_failed_verification(cli, write_model, tmp_path):
    model_new = new_model(write_model, output="raise RuntimeError('kernel fault')")
    code, err, res = run_verify(cli, write_model(MODEL), model_new, tmp_path / "v.json")
    assert code == 0 and not res["ok"] and len(res["trials"]) == 1
    assert res["trials"][0]["error"] == "ModelNew forward failed: RuntimeError: kernel fault"
    body = NEW_TEMPLATE.replace("super().__init__()", "raise ValueError('no')")
    code, err, res = run_verify(cli, write_model(MODEL), new_model(write_model, body=body), tmp_path / "v.json")
    assert code == 0 and not res["ok"] and res["trials"] == []
    assert res["error"] == "model_new.py: ModelNew(*get_init_inputs()) failed: ValueError: no"


def test_model_new_mutating_its_input_cannot_fool_the_reference(cli, write_model, tmp_path):
    model_new = new_model(write_model, output="x.zero_(); return y, y.sum(dim=1)")
    code, err, res = run_verify(cli, write_model(MODEL), model_new, tmp_path / "v.json", "--trials", "2")
    assert code == 0 and res["ok"], err


@pytest.mark.parametrize("which, body, message", [
    ("new", "class Other(nn.Module): pass\n", "error: model_new.py has no class ModelNew"),
    ("new", "import nonexistent_module_xyz\n", "error: cannot import model_new.py: ModuleNotFoundError"),
    ("model", "class Model(nn.Module): pass\n", "error: model.py has no function get_inputs"),
    ("model", MODEL.replace("self.bn(self.fc(x))", "self.bn(self.fc(x, x))"),
     "error: model.py: Model forward failed: TypeError"),
])
def test_user_errors(cli, write_model, tmp_path, which, body, message):
    model = write_model(body if which == "model" else MODEL)
    model_new = new_model(write_model, body=body if which == "new" else None)
    code, err, _ = run_verify(cli, model, model_new, tmp_path / "v.json")
    assert code == 2 and err.startswith(message) and err.count("\n") == 1, err
    assert not (tmp_path / "v.json").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_paths_refuse_without_cuda(cli, write_model, tmp_path):
    model, model_new = write_model(MODEL), new_model(write_model)
    args = ["--model", model, "--model-new", model_new, "--out", str(tmp_path / "o.json")]
    code, err = cli(verify.main, ["verify", *args])
    assert code == 2 and err == "error: no CUDA device is available: this step needs an NVIDIA GPU\n"
    code, err = cli(verify.main, ["profile", *args])
    assert code == 2 and err == "error: no CUDA device is available: this step needs an NVIDIA GPU\n"


def test_bad_helper_option_is_not_a_user_error(cli):
    """The driver builds the helpers' options; a bad one is fusetune's bug, so the helper exits 1
    (the driver then names the failed stage), not 2 (which says a user-error line was printed)."""
    code, err = cli(verify.main, ["verify", "--model", "m.py"])
    assert code == 1 and err.startswith("usage: python3 -m fusetune_py.verify verify"), err
    assert "error: the following arguments are required: --model-new, --out" in err, err


def test_summary_statistics():
    s = verify.summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s["median"], s["min"], s["p20"], s["p80"], s["runs"]) == (3.0, 1.0, 1.8, 4.2, 5)
    assert s["samples"] == [5.0, 1.0, 3.0, 2.0, 4.0]


class PerfCounterEvent:
    """Stands in for torch.cuda.Event so that the timing protocol can run on the CPU."""

    def record(self):
        self.t = time.perf_counter()

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


def test_profile_protocol_on_cpu(cli, write_model, tmp_path, monkeypatch):
    monkeypatch.setattr(verify, "PROFILE_DEVICE", "cpu")
    monkeypatch.setattr(verify, "_event", PerfCounterEvent)
    monkeypatch.setattr(verify, "_synchronize", lambda: None)
    monkeypatch.setattr(verify, "_gpu_info", lambda: ("Fake GPU", 1 << 20))
    tf32_at_compile, real_compile = [], torch.compile

    def eager_compile(model):
        tf32_at_compile.append(torch.backends.cuda.matmul.allow_tf32)
        return real_compile(model, backend="eager")  # inductor would make the test slow
    monkeypatch.setattr(torch, "compile", eager_compile)
    calls, real_contender = [], verify._contender

    def recording(name, *args):  # each call of a contender: its name and the matmul precision then
        fn = real_contender(name, *args)
        return lambda *x: (calls.append((name, torch.backends.cuda.matmul.allow_tf32)), fn(*x))[1]
    monkeypatch.setattr(verify, "_contender", recording)
    out = tmp_path / "p.json"
    code, err = cli(verify.main, ["profile", "--model", write_model(MODEL), "--model-new", new_model(write_model),
                                  "--out", str(out), "--warmup", "2", "--min-runs", "7", "--min-ms", "0.001"])
    assert code == 0, err
    res = json.loads(out.read_text())
    assert (res["gpu"], res["l2_bytes"], res["flush_bytes"]) == ("Fake GPU", 1 << 20, 2 << 20)
    assert list(res["timings"]) == ["eager", "compile", "compile_tf32", "fusetune"]
    assert tf32_at_compile == [False, True] and not torch.backends.cuda.matmul.allow_tf32
    for name, t in res["timings"].items():
        assert t["runs"] == 7 == len(t["samples"]) and t["warmup"] == 2
        assert t["min"] <= t["p20"] <= t["median"] <= t["p80"]
        assert t["precision"] == {"matmul_allow_tf32": name == "compile_tf32", "cudnn_allow_tf32": True}
    # Warm-up contender by contender, then the timed calls in rounds, the first one rotating.
    names = list(verify.CONTENDERS)
    assert [n for n, _ in calls[:8]] == [n for n in names for _ in range(2)]
    assert [n for n, _ in calls[8:]] == [names[(r + k) % 4] for r in range(7) for k in range(4)]
    assert all(tf32 == (n == "compile_tf32") for n, tf32 in calls)
    fusetune = res["timings"]["fusetune"]["median"]
    assert res["speedup"]["vs_eager"] == pytest.approx(res["timings"]["eager"]["median"] / fusetune)
    assert set(res["speedup"]) == set(res["speedup_per_round"]) == {"vs_eager", "vs_compile", "vs_compile_tf32"}
    ratios = sorted(e / f for e, f in zip(res["timings"]["eager"]["samples"], res["timings"]["fusetune"]["samples"]))
    assert res["speedup_per_round"]["vs_eager"] == pytest.approx(ratios[3])  # the median of 7 rounds


class FakeClock:
    """A clock that only the contenders move: their timings are exact, whatever the machine's load.
    event() stands for torch.cuda.Event on it."""

    def __init__(self):
        self.ms = 0.0

    def event(self):
        return FakeEvent(self)

    def sleep(self, ms):
        self.ms += ms


class FakeEvent:
    def __init__(self, clock):
        self.clock = clock

    def record(self):
        self.t = self.clock.ms

    def elapsed_time(self, end):
        return end.t - self.t


def test_runs_cover_min_ms(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(verify, "_event", clock.event)
    monkeypatch.setattr(verify, "_synchronize", lambda: None)
    slow, fast = (lambda: clock.sleep(2.0)), (lambda: None)
    entered = []
    t = verify.time_interleaved({"slow": slow, "fast": fast}, entered.append, [], torch.zeros(4), warmup=2,
                                min_runs=3, min_ms=20, max_runs=100)
    # The same rounds for both: enough for the fast one's 20 ms, capped by max_runs (the cap of
    # 20 x 20 ms in all would allow 200).
    assert t["slow"]["runs"] == t["fast"]["runs"] == 100 and t["slow"]["median"] == 2.0 and t["fast"]["warmup"] == 2
    assert entered[:2] == ["slow", "fast"] and entered[2:6] == ["slow", "fast", "fast", "slow"]
    t = verify.time_interleaved({"slow": slow, "fast": fast}, lambda name: None, [], torch.zeros(4), warmup=2,
                                min_runs=3, min_ms=2, max_runs=1000)
    assert t["slow"]["runs"] == t["fast"]["runs"] == 20  # 20 x 2 ms over 2 ms a round
    t = verify.time_interleaved({"slow": slow}, lambda name: None, [], torch.zeros(4), warmup=2, min_runs=3,
                                min_ms=20, max_runs=100)
    assert t["slow"]["runs"] == 10  # min_ms covered at the contender's own speed
    t = verify.time_interleaved({"slow": slow}, lambda name: None, [], torch.zeros(4), warmup=2, min_runs=30,
                                min_ms=20, max_runs=100)
    assert t["slow"]["runs"] == 30  # never fewer than min_runs
