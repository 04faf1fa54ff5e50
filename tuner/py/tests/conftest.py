# Shared fixtures for the fusetune_py tests: tiny model files, shrunk copies of the shared models,
# and a way to run a CLI in-process while still seeing its exit status and stderr.
import glob
import os
import re
import textwrap

import pytest

from fusetune_py.common import run_main

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
MODELS_DIR = os.environ.get("FUSETUNE_MODELS_DIR", os.path.join(REPO, "..", "shared", "models"))
SHARED_MODELS = sorted(glob.glob(os.path.join(MODELS_DIR, "*.py")))
# Shared models whose inputs are not float32 (integer class targets): capture refuses them.
_SIZE_LINE = re.compile(r"^\w+(\s*,\s*\w+)*\s*=\s*[\d\s,.\[\]]+$")
_INT = re.compile(r"(?<![\d.])\d+(?![\d.eE])")


def shrink_source(text):
    """Make a model's module-level size constants small; keep parity so odd sizes stay odd."""
    def small(m):
        n = int(m.group())
        return str(16 + n % 2) if n > 16 else m.group()
    return "\n".join(_INT.sub(small, line) if _SIZE_LINE.match(line) else line for line in text.split("\n"))


@pytest.fixture
def write_model(tmp_path):
    def write(body, name="model.py"):
        path = tmp_path / name
        path.write_text("import torch\nimport torch.nn as nn\n\n" + textwrap.dedent(body))
        return str(path)
    return write


@pytest.fixture
def shrunk(tmp_path):
    def copy(shared_path):
        with open(shared_path) as f:
            text = shrink_source(f.read())
        path = tmp_path / os.path.basename(shared_path)
        path.write_text(text)
        return str(path)
    return copy


@pytest.fixture
def cli(capsys):
    """Run main(argv) like `python3 -m ...` would: returns (exit status, stderr)."""
    def run(main, argv):
        try:
            run_main(main, argv)
            code = 0
        except SystemExit as e:
            code = e.code
        return code, capsys.readouterr().err
    return run


LINEAR_MODEL = """
    class Model(nn.Module):
        def __init__(self, features, scale):
            super().__init__()
            self.fc = nn.Linear(features, features)
            self.scale = scale

        def forward(self, x, r):
            y = torch.relu(self.fc(x)) * self.scale
            return y + r


    def get_inputs():
        return [torch.randn(4, 8), torch.randn(4, 8)]


    def get_init_inputs():
        return [8, 2.0]
"""


@pytest.fixture
def linear_model(write_model):
    return write_model(LINEAR_MODEL)
