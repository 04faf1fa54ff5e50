# Builds the cuda_extension module from binding.cpp and the generated kernels/ pairs, for the
# arch in FUSETUNE_ARCH (sm_90a where a tuned kernel uses wgmma), including the templates the
# tuner timed (FUSETUNE_TEMPLATES).
# Run by `fusetune build`; by hand: FUSETUNE_ARCH=sm_90 python3 setup.py build_ext --inplace
import glob
import os
import re
import sys

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

here = os.path.dirname(os.path.abspath(__file__))
arch = os.environ.get("FUSETUNE_ARCH", "sm_90")
cc = re.fullmatch(r"sm_(\d+)(\d)(a?)", arch)
if not cc:
    sys.exit("FUSETUNE_ARCH must look like sm_90 or sm_90a, got " + repr(arch))
templates = os.environ.get("FUSETUNE_TEMPLATES", os.path.join(here, "..", "templates")).split(os.pathsep)
os.environ["TORCH_CUDA_ARCH_LIST"] = "%s.%s%s" % cc.groups()  # sm_90a -> 9.0a

os.chdir(here)
sources = ["binding.cpp"] + sorted(glob.glob("kernels/*_binding.cpp")) + sorted(glob.glob("kernels/*.cu"))


def cudnn_flags():
    """Convolution groups run a baked cuDNN engine: link the cuDNN that PyTorch loads (its
    nvidia-cudnn wheel when it has one, else the toolkit's)."""
    try:
        import nvidia.cudnn
        root = nvidia.cudnn.__path__[0]
        lib = os.path.join(root, "lib")
        return [os.path.join(root, "include")], [lib], [], ["-l:libcudnn.so.9"]
    except ImportError:
        return [], [], ["cudnn"], []


cudnn_include, cudnn_lib_dirs, cudnn_libraries, cudnn_link = cudnn_flags()

setup(
    name="cuda_extension",
    ext_modules=[
        CUDAExtension(
            "cuda_extension",
            sources,
            include_dirs=[os.path.join(here, "kernels")] + templates + cudnn_include,
            library_dirs=cudnn_lib_dirs,
            # GEMM groups tuned to a cuBLASLt algorithm; resolves to PyTorch's own copy, as cuDNN does
            libraries=["cublasLt"] + cudnn_libraries,
            extra_link_args=cudnn_link,
            extra_compile_args={"cxx": ["-O3", "-std=c++17"], "nvcc": ["-O3", "-std=c++17"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
