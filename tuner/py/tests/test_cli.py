# The fusetune command line on a CPU machine: error paths, planning of every shared model this
# issue supports, and that a failed run leaves no half-written outputs behind.
import glob
import json
import os
import shutil
import subprocess

import pytest

from conftest import MODELS_DIR, REPO

FUSETUNE = os.environ.get("FUSETUNE_BIN", os.path.join(REPO, "build", "fusetune"))

pytestmark = pytest.mark.skipif(not os.path.exists(FUSETUNE), reason="fusetune is not built (set FUSETUNE_BIN)")


def run(*args, cwd=None):
    p = subprocess.run([FUSETUNE, *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def plan_of(model, out):
    code, stdout, stderr = run("plan", "--model", model, "--out", str(out))
    assert code == 0, stderr
    return json.loads(stdout)


def test_missing_model_file(tmp_path):
    code, _, err = run("--model", str(tmp_path / "nope.py"), "--out", str(tmp_path))
    assert code == 2
    assert "nope.py does not exist" in err


def test_no_model_class(write_model, tmp_path):
    path = write_model("def get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n")
    code, _, err = run("plan", "--model", path, "--out", str(tmp_path))
    assert code == 2
    assert "has no class Model" in err


def test_helper_error_is_one_line(write_model, tmp_path):
    """A helper's own error line (here capture's) is the whole message: the driver adds none."""
    path = write_model("class Model(nn.Module):\n    def forward(self, x):\n        return x +\n")
    code, _, err = run("plan", "--model", path, "--out", str(tmp_path))
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot import model.py: SyntaxError: "), err
    assert "line 6" in lines[0], err


def test_no_get_inputs(write_model, tmp_path):
    path = write_model("class Model(nn.Module):\n    def forward(self, x):\n        return x\n\n"
                       "def get_init_inputs():\n    return []\n")
    code, _, err = run("plan", "--model", path, "--out", str(tmp_path))
    assert code == 2
    assert "get_inputs" in err


def test_unsupported_op_names_op_and_line(write_model, tmp_path):
    path = write_model("class Model(nn.Module):\n    def forward(self, x):\n        return torch.sort(x, dim=1).values\n\n"
                       "def get_inputs():\n    return [torch.randn(4, 5)]\n\ndef get_init_inputs():\n    return []\n")
    code, _, err = run("plan", "--model", path, "--out", str(tmp_path))
    assert code == 2
    assert "aten.sort.default" in err
    assert "model.py:6: return torch.sort(x, dim=1).values" in err


@pytest.mark.parametrize("option", [["--precision", "fp16"], ["--arch", "90"], ["--workers", "0"], ["--atol", "-1"],
                                    ["--no-such-option"], ["plan", "extra-argument"]])
def test_bad_options(option, linear_model, tmp_path):
    code, _, err = run("--model", linear_model, "--out", str(tmp_path), *option)
    assert code != 0
    assert err.strip()
    assert not (tmp_path / ".fusetune").exists()


def test_tune_without_gpu_fails_cleanly(linear_model, tmp_path):
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("a GPU is present")
    out = tmp_path / "out"
    code, _, err = run("--model", linear_model, "--arch", "sm_90", "--out", str(out))
    assert code == 2
    assert "no CUDA driver" in err or "no usable GPU" in err
    for produced in ("results/best.json", "model_new.py", "extension"):
        assert not (out / produced).exists(), produced


def test_build_refuses_mismatched_best_json(tmp_path):
    """The committed top-level best.json is refused for another arch and for an edited model."""
    shutil.copy(os.path.join(REPO, "model.py"), tmp_path / "model.py")
    (tmp_path / "results").mkdir()
    shutil.copy(os.path.join(REPO, "results", "best.json"), tmp_path / "results" / "best.json")
    code, _, err = run("build", "--model", str(tmp_path / "model.py"), "--out", str(tmp_path), "--arch", "sm_80")
    assert code == 2 and "tuned for sm_90" in err
    with open(tmp_path / "model.py", "a") as f:
        f.write("# edited\n")
    code, _, err = run("build", "--model", str(tmp_path / "model.py"), "--out", str(tmp_path))
    assert code == 2 and "changed since best.json was tuned" in err


# Every shared model of this families, with the kernel groups it must plan to.
EXPECTED_PLANS = {
    "elementwise_chain": [("elementwise", 10)],
    "gemm_bias_gelu_scale": [("gemm", 3)],
    "gemm_relu_residual": [("gemm", 3)],
    "matmul_square": [("gemm", 1)],
    "matmul_transposed_a": [("gemm", 1)],
    "matvec": [("gemm", 1)],
    "bmm_scale": [("gemm", 3)],
    "mlp3": [("gemm", 2), ("gemm", 2), ("gemm", 1)],
    # Reductions: one row group each, the chains before and after the reduction fused.
    "sum_middle_dim": [("reduce", 1)],
    "rmsnorm_channels": [("reduce", 5)],
    "logsumexp_rows": [("reduce", 9)],
    # softmax written out at capture (amax, sub, exp, sum, div), folded back into one group.
    "softmax_rows": [("reduce", 5)],
    "linear_softmax": [("gemm", 1), ("reduce", 5)],
    # LayerNorm and GroupNorm written out at capture (one-pass shifted moments, rsqrt, affine).
    "linear_layernorm_silu": [("gemm", 1), ("reduce", 19)],
    "groupnorm": [("reduce", 17)],
    # BatchNorm in training mode: the counter (int64); the per-sample partial moments; the
    # channel statistics with the running mean and variance updated in the same kernel; the
    # normalisation.
    "batchnorm_train": [("elementwise", 1), ("reduce", 10), ("reduce", 17), ("elementwise", 4)],
    # A loss over a whole tensor: one row (reduce_split shares it among blocks).
    "smooth_l1_loss": [("reduce", 9)],
    # Pooling: one value of an elementwise chain, reading its windows.
    "maxpool2d": [("elementwise", 1)],
    "avgpool3d": [("elementwise", 1)],
    # Scans: a row group along the scanned dimension.
    "cumsum_rows": [("reduce", 1)],
    # scaled_dot_product_attention without a mask tensor: one fused attention kernel.
    "attention": [("attention", 1)],
}


def test_gpu_suite_runs_every_shared_model():
    """tests/gpu/run.sh's full run (no FUSETUNE_GPU_MODELS) covers every shared model, so that the
    issues' "every model is correct" rests on a run of each."""
    shared = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(MODELS_DIR, "*.py")))
    if not shared:
        pytest.skip("shared models are not beside the checkout")
    with open(os.path.join(REPO, "tests", "gpu", "run.sh")) as f:
        script = f.read()
    start = script.index("${FUSETUNE_GPU_MODELS:-") + len("${FUSETUNE_GPU_MODELS:-")
    suite = script[start:script.index("}", start)].split()
    assert [m for m in shared if m not in suite] == []


@pytest.mark.parametrize("name", sorted(EXPECTED_PLANS))
def test_plan_shared_models(name, shrunk, tmp_path):
    path = os.path.join(MODELS_DIR, name + ".py")
    if not os.path.exists(path):
        pytest.skip("shared models are not beside the checkout")
    plan = plan_of(shrunk(path), tmp_path / "out")
    assert [(g["family"], len(g["ops"])) for g in plan["groups"]] == EXPECTED_PLANS[name]
    for g in plan["groups"]:
        assert [s["access"] for s in g["slots"]].count("output") == len(g["outputs"]) >= 1
        if g["family"] == "gemm":
            assert g["gemm"]["m"] > 0 and g["gemm"]["n"] > 0 and g["gemm"]["k"] > 0
        if g["family"] == "reduce":
            assert g["reduce"]["outputs"] > 0 and g["reduce"]["reduced"] > 1
    assert len(plan["outputs"]) == 1


def test_plan_reads_transposes_through_strides(shrunk, tmp_path):
    path = os.path.join(MODELS_DIR, "matmul_transposed_a.py")
    if not os.path.exists(path):
        pytest.skip("shared models are not beside the checkout")
    plan = plan_of(shrunk(path), tmp_path / "out")
    a = plan["groups"][0]["slots"][0]
    assert a["strides"][1] == 1 and a["strides"][2] > 1  # A = a^T, read column-major, no copy


def test_compile_every_candidate_of_a_model(write_model, tmp_path):
    path = write_model("class Model(nn.Module):\n    def forward(self, x, y):\n        return torch.sigmoid(x) * y - 1.0\n\n"
                       "def get_inputs():\n    return [torch.randn(5, 7), torch.randn(7)]\n\n"
                       "def get_init_inputs():\n    return []\n")
    code, out, err = run("compile", "--model", path, "--out", str(tmp_path), "--workers", "2")
    assert code == 0, err
    assert "0 failed" in out


GPU_FAMILY_MODELS = sorted(glob.glob(os.path.join(REPO, "tests", "gpu", "models", "*.py")))


GPU_FAMILY_PLANS = {
    "reduce_middle.py": ["reduce"],
    "reduce_last_epilogue.py": ["reduce"],
    "rows_softmax_odd.py": ["reduce"],
    "rows_logsumexp_infinite.py": ["reduce"],
    "rows_norm_middle.py": ["reduce"],
    "rows_norms.py": ["reduce", "reduce"],
    "rows_split.py": ["reduce", "reduce"],
    "pool_max2d_dilated.py": ["elementwise", "elementwise"],
    "pool_avg3d_padded.py": ["elementwise", "reduce", "elementwise"],
    "pool_paired.py": ["elementwise"] * 4,
    "rows_scans.py": ["reduce", "reduce", "reduce"],
    "rows_scans_reversed.py": ["reduce", "reduce", "reduce"],  # the reversed scan writes its flip itself
    "rows_norm_channels_vec.py": ["reduce"],
    "rows_arg.py": ["reduce"] * 6,
    "loss_cross_entropy.py": ["reduce", "elementwise", "reduce", "reduce", "reduce", "reduce"],
    "loss_kl_cosine_margins.py": ["reduce"] * 9,
    "rows_norms_var.py": ["reduce", "reduce", "reduce"],
    "reduce_all_and_unit.py": ["reduce", "elementwise"],  # the minimum over a size-1 dimension is a reshape
    "conv_forms.py": ["conv"] * 6,
    # Five fused attentions, then the masked one written out: Q K^T with the mask, the softmax, P V.
    "attention_forms.py": ["attention"] * 7 + ["gemm", "reduce", "gemm"],
    # Attention written out, each one fused attention: MinGPT's between its projections (its heads
    # stored merged back), nn.MultiheadAttention's between its projections (q, k and v selected
    # out of the input projection; its heads stored merged back too), the additive mask and the
    # causal mask made in forward; then MultiheadAttention's output transposed back.
    "attention_written.py": ["gemm", "attention", "gemm", "gemm"] + ["elementwise"] * 3 +
                            ["attention", "gemm", "attention", "attention", "elementwise"],
    "gemm_tma_forms.py": ["gemm"] * 5,
    "gemm_fp32_accuracy.py": ["gemm"] * 2,  # the Linear with its ReLU, the batched product
    "bool_masks.py": ["reduce", "elementwise", "gemm"],  # the masked product in the scan's loads
    # The masked cumsum with the cumsum masked after it, the masked softmax, the masked mean over a
    # middle dimension, the row maximum with its per-row mask (and a cumsum over the same rows),
    # and that cumsum times an int64 tensor in an elementwise kernel.
    "rows_bool_masks.py": ["reduce"] * 4 + ["elementwise"],
    "rows_size_one.py": ["reduce", "reduce"],  # the sum with its size-1 chain; the argmax
    "rows_viewed_back.py": ["reduce", "reduce"],  # each GroupNorm with the ops after it
    "cat_forms.py": ["reduce"] + ["elementwise"] * 8,  # the exclusive cumsum reads the cat's parts
    # Rows of cats read part by part: two exclusive cumsums, a cumprod after ones (its part
    # y * 0.5 + 0.75 written first), two softmaxes over two tensors, a sum over a middle dimension
    # with the ReLU of the cat after it, a logsumexp; two pads read alike; the roll along the rows
    # in its cumsum's loads, the roll along two dimensions (the first written) with the sums.
    "rows_cat.py": ["reduce"] * 2 + ["elementwise"] + ["reduce"] * 8 + ["elementwise"] * 2,
    # The masks and the gather's reversed index computed where they are read: triu in the product's
    # epilogue; tril, the weighted x and the reversed gather over x's elements; diag_embed's
    # matrix; the row scaling's product; the weighted sum.
    "index_masks.py": ["gemm", "elementwise", "elementwise", "gemm", "reduce"],
    # The Swin table's index wrapped and its gather; the bias; the embedding; index_select; the 2-D
    # constant index wrapped and its gather; the mean; the roll's first cat; its second with the
    # gather at the shifted indices (computed from the arange where read) beside it.
    "index_gather.py": ["elementwise"] * 7 + ["reduce"] + ["elementwise"] * 2,
    # The batch arange and the lengths' linear index, its gather; the constant index tensors
    # wrapped and range-checked (a small kernel per shape), and the three gathers.
    "index_tensors.py": ["elementwise"] * 9,
    "rank7_broadcast.py": ["reduce"],
    # The causal mask (triu of ones, .bool()) written once; the masked softmax; the truncation
    # to int64 and back with the truth of x.
    "conversions.py": ["elementwise", "reduce", "elementwise"],
    # The embedding's gather computing the buckets where it reads them, the bias permuted and added
    # to x, the two int64 results over (q, k) written.
    "int64_buckets.py": ["elementwise"] * 3,
    # One kernel per interpolation (its indices and weights computed where read), but bicubic's:
    # its cats of weights and indices written first (four small kernels), then four kernels of
    # taps.
    "interpolate_forms.py": ["elementwise"] * 15,
    # The input and weight converted to float32 (K = 67: rows the TMA GEMM cannot read), the Linear
    # (its float16 bias loaded and its float16 result stored by its epilogue), one row kernel for
    # the softmax, its bfloat16 rounding and product with y (read as bfloat16) and y's row sum
    # (stored in bfloat16), the amax.
    "half_forms.py": ["elementwise"] * 2 + ["gemm", "reduce", "reduce"],
    # Row kernels storing half results: two softmaxes, the channel norm, logsumexp with the cumsum
    # over the same rows; and reading half inputs as they are: a softmax times a row sum plus a
    # per-row bias, a channel norm, the last softmax.
    "half_rows.py": ["reduce"] * 7,
    "half_gemm_forms.py": ["gemm"] * 4,  # half operands read as they are (an activation stored in half): no conversions
    "half_mn_forms.py": ["gemm"] * 5,  # B read MN-major: no conversions
    "norms_batch_eval_instance.py": ["conv", "elementwise", "elementwise", "reduce"],
    # The counters; the 2-D BatchNorm's partial moments, then its statistics with the running
    # ones updated from them in the same kernel; its normalisation; the 1-D BatchNorm whole.
    "norms_batch_train.py": ["elementwise", "reduce", "reduce", "elementwise", "reduce"],
    # The hidden state plus c0, its concatenation with x, i2h with its tanh (the new hidden state)
    # and the decay's product in its epilogue, h2o, the decay's sum (its new level), the copy of
    # h0 into c0.
    "hidden_state.py": ["elementwise", "elementwise", "gemm", "gemm", "elementwise", "elementwise"],
    # Each LSTM one recurrent group after the cats packing its weights (the first's 12 parameters
    # in two levels of cats; the third's zero state written first), then the tanh and scale of the
    # first's output, c + 1, and copies of the outputs that are views of the LSTMs' outputs.
    "lstm_forms.py": ["elementwise", "elementwise", "recurrent", "elementwise", "recurrent", "elementwise",
                      "elementwise", "recurrent"] + ["elementwise"] * 7,
}


@pytest.mark.parametrize("path", GPU_FAMILY_MODELS, ids=os.path.basename)
def test_gpu_family_models_plan(path, tmp_path):
    """The GPU suite's irregular forms plan as meant: each GEMM form to a GEMM group each (no
    copies), each reduction form to its reduce groups, each convolution to its own conv group."""
    plan = plan_of(path, tmp_path / "out")
    expected = GPU_FAMILY_PLANS.get(os.path.basename(path), ["gemm"])
    assert [g["family"] for g in plan["groups"]] == expected
