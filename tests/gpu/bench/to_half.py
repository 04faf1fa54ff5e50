# Writes a float16 or bfloat16 copy of a KernelBench model file: the model's source, then a Model
# that converts its parameters and buffers after construction, and get_inputs converting its
# floating-point tensors. For timing half-precision products on the shared models' shapes
# (docs/PERF.md):
#   python3 tests/gpu/bench/to_half.py MODEL.py bfloat16|float16 OUT.py
import sys

source, dtype, out = sys.argv[1:4]
if dtype not in ("float16", "bfloat16"):
    sys.exit("to_half.py: the dtype must be float16 or bfloat16, not %r" % dtype)
with open(source) as f:
    text = f.read()
text += f'''

_FloatModel, _float_inputs = Model, get_inputs


class Model(_FloatModel):
    def __init__(self, *args):
        super().__init__(*args)
        self.to(torch.{dtype})


def get_inputs():
    return [x.to(torch.{dtype}) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
            for x in _float_inputs()]
'''
with open(out, "w") as f:
    f.write(text)
