# Shared plumbing for the fusetune helpers: loading user model files, the one seeding rule,
# atomic writes and the "error: ..." / exit-status convention the C++ driver relies on.
import argparse
import contextlib
import hashlib
import importlib.util
import io
import json
import logging
import math
import operator
import os
import re
import sys
import tempfile
import warnings

import torch

MODEL_NAMES = ("Model", "get_inputs", "get_init_inputs")
_UMASK = os.umask(0)
os.umask(_UMASK)


class UserError(Exception):
    """A problem the user can fix; reported as one line, no traceback."""

    def __init__(self, message, status=2):
        super().__init__(message)
        self.status = status


class ArgumentParser(argparse.ArgumentParser):
    """The helpers' options come from the C++ driver, not from the user: a bad one is fusetune's
    bug. It exits 1, so that the driver names the failed stage, not argparse's 2, which the driver
    reads as "one user-error line was printed"."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def run_main(main, argv=None):
    """Run a CLI entry point, turning UserError into one stderr line and its exit status."""
    try:
        main(argv)
    except UserError as e:
        message = " ".join(str(e).splitlines())  # the driver reads exactly one line
        print(f"error: {message}", file=sys.stderr)
        sys.exit(e.status)


@contextlib.contextmanager
def quiet():
    """Silence torch's own chatter (warnings, log records, partial graphs printed on export errors):
    the driver expects at most one line from us on stderr."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()), \
                contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def first_line(exc):
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def load_module(path, module_name, required=MODEL_NAMES):
    """Import a Python file by path and check it defines the names fusetune calls."""
    path = os.path.abspath(path)
    base = os.path.basename(path)
    if not os.path.isfile(path):
        raise UserError(f"model file not found: {path}")
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    # Registered before exec so that inspect (used by torch.compile/export) can find the source.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[module_name]
        raise UserError(f"cannot import {base}: {first_line(e)}") from None
    for name in required:
        obj = getattr(module, name, None)
        if name[0].isupper():
            if not isinstance(obj, type):
                raise UserError(f"{base} has no class {name}")
        elif not callable(obj):
            raise UserError(f"{base} has no function {name}")
    return module


def _call_user(base, fn, what):
    try:
        return fn()
    except UserError:
        raise
    except Exception as e:
        raise UserError(f"{base}: {what} failed: {first_line(e)}") from None


def build_model(module, seed, cls_name="Model", init_module=None):
    """Construct cls_name with the seeding rule; get_init_inputs comes from init_module (default: module).

    Returns (model, init_args). The mode (train/eval) is left as the constructor set it.
    """
    init_module = init_module or module
    torch.manual_seed(seed)
    init_args = _call_user(os.path.basename(init_module.__file__), lambda: list(init_module.get_init_inputs()),
                           "get_init_inputs()")
    cls = getattr(module, cls_name)
    model = _call_user(os.path.basename(module.__file__), lambda: cls(*init_args),
                       f"{cls_name}(*get_init_inputs())")
    return model, init_args


def attribute_owner(model, path):
    """(the submodule of model that holds the attribute at path ("hidden", "cell.h"), its name);
    AttributeError where no submodule is at that path."""
    owner_path, _, name = path.rpartition(".")
    return model.get_submodule(owner_path), name


def keep_as_buffers(model, paths):
    """Turns the plain tensor attributes at paths ("hidden", "cell.h") into non-persistent buffers:
    forward's reassignments of them (a recurrent model's hidden state) are then updates torch.export
    records, .to() moves them, and state_dict() stays as it was."""
    for path in paths:
        owner, name = attribute_owner(model, path)
        owner.register_buffer(name, owner.__dict__.pop(name), persistent=False)


def build_inputs(module, seed):
    """Call get_inputs() right after seeding with `seed` (callers pass seed + 1 for the rule)."""
    base = os.path.basename(module.__file__)
    torch.manual_seed(seed)
    inputs = _call_user(base, module.get_inputs, "get_inputs()")
    if not isinstance(inputs, (list, tuple)):
        raise UserError(f"{base}: get_inputs() must return a list, got {type(inputs).__name__}")
    return list(inputs)


def build_model_and_inputs(module, seed):
    """The seeding rule every fusetune tool uses, so that all of them see the same weights and inputs."""
    model, init_args = build_model(module, seed)
    inputs = build_inputs(module, seed + 1)
    return model, inputs, init_args


# Half-precision tensors fusetune stores as they are and computes in float32 (capture's
# compute_half_in_float32).
HALF_DTYPES = (torch.float16, torch.bfloat16)
_SUPPORTED = "float32, float16, bfloat16, int64 and bool tensors"


def check_input_dtypes(base, inputs):
    """float32 tensors; float16 and bfloat16 ones, which capture converts to float32 where the graph
    starts; int64 and bool ones (indices, targets, masks), which the planner lets elementwise ops
    read and says so where another op would need them; and Python numbers, which torch.export
    bakes into the graph (ModelNew then checks that it is called with the same ones)."""
    for i, x in enumerate(inputs):
        if isinstance(x, (bool, int, float)):
            if not math.isfinite(x):
                raise UserError(f"{base}: input {i} is {x!r}; fusetune supports finite numbers only")
            continue
        if not isinstance(x, torch.Tensor):
            raise UserError(f"{base}: input {i} is {type(x).__name__}, not a tensor or a number; "
                            f"fusetune supports {_SUPPORTED} and Python numbers only")
        if x.dtype not in (torch.float32, *HALF_DTYPES, torch.int64, torch.bool):
            raise UserError(f"{base}: input {i} has dtype {x.dtype}; fusetune supports {_SUPPORTED} only")


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dtype_name(dtype):
    return str(dtype).removeprefix("torch.")


def json_float(x):
    """Strict JSON has no inf/nan; encode them as {"float": "inf"|"-inf"|"nan"}."""
    x = float(x)
    if math.isfinite(x):
        return x
    return {"float": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temp path next to `path`; it replaces `path` only if the block succeeds."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    # Keep the real extension last: torch.export.save complains about names not ending in .pt2.
    stem, ext = os.path.splitext(os.path.basename(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{stem}.", suffix=f".tmp{ext}", dir=directory)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp's 0600 would surprise whoever reads the results
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_json_atomic(path, obj):
    with atomic_path(path) as tmp:
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=1, allow_nan=False)
            f.write("\n")


def read_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise UserError(f"{what} not found: {path}") from None
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read {what} {path}: {first_line(e)}") from None


def pick_device(requested):
    """Resolve a device name; asking for cuda on a machine without it is a user error, not a crash."""
    device = requested or ("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cuda", "cpu"):
        raise UserError(f"--device must be cuda or cpu, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("no CUDA device is available: this step needs an NVIDIA GPU")
    return torch.device(device)


def set_tf32(matmul, cudnn):
    torch.backends.cuda.matmul.allow_tf32 = matmul
    torch.backends.cudnn.allow_tf32 = cudnn


def strict_fp32():
    """References are computed without TF32 so that they are the fp32 truth."""
    set_tf32(False, False)


def pytorch_default_precision():
    """PyTorch's own defaults: fp32 matmuls, TF32 convolutions."""
    set_tf32(False, True)


def to_device(x, device):
    return x.to(device) if isinstance(x, torch.Tensor) else x


_FRAME = re.compile(r'^\s*File "(.*)", line (\d+), in ')


def op_name(target):
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    if target is operator.getitem:
        return "getitem"
    return getattr(target, "__name__", str(target))


def parse_frames(trace):
    """(file, line, code) for each frame of an fx stack trace, oldest first."""
    frames, lines = [], trace.splitlines()
    for i, line in enumerate(lines):
        m = _FRAME.match(line)
        if m:
            nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
            code = "" if _FRAME.match(nxt) else nxt
            frames.append((m.group(1), int(m.group(2)), code))
    return frames
