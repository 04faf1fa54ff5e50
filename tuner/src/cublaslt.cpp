// dlopen-based cuBLASLt loader.
#include "cublaslt.h"

#include <dlfcn.h>

#include "error.h"

namespace fusetune {

const CublasLt& cublaslt_api(const std::string& path) {
  static const std::string loaded_path = path;
  static const CublasLt api = [&] {
    const std::string lib_name = path.empty() ? "libcublasLt.so.13" : path;
    void* lib = ::dlopen(lib_name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) FT_USER_ERROR("cannot load cuBLASLt (" + lib_name + "): " + std::string(::dlerror()));
    CublasLt a;
#define FT_LOAD(name)                                                                          \
  a.name = reinterpret_cast<decltype(&::name)>(::dlsym(lib, #name));                           \
  if (!a.name) FT_USER_ERROR(lib_name + " lacks " + #name + ": fusetune needs cuBLASLt 13 or newer");
    FT_CUBLASLT_FUNCTIONS(FT_LOAD)
#undef FT_LOAD
    return a;
  }();
  if (path != loaded_path) FT_THROW("cuBLASLt already loaded from " + loaded_path + ", not " + path);
  return api;
}

}  // namespace fusetune
