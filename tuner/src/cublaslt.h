// cuBLASLt for the measuring worker, loaded with dlopen from the library PyTorch itself loads (the
// one the built extension will run with), so that the tuner times exactly what ships.
#pragma once
#include <string>

#include "cublaslt_gemm.h"

namespace fusetune {

// Loads cuBLASLt from `path` (or the dynamic loader's search path when empty) once per process;
// throws UserError naming the library when it cannot be loaded.
const CublasLt& cublaslt_api(const std::string& path);

}  // namespace fusetune
