// Self-registration of kernel bindings: each extension/kernels/<name>_binding.cpp registers a
// function that adds its ops to the module, and binding.cpp runs them all at import.
#pragma once
#include <torch/extension.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace fusetune {

using BindingFn = void (*)(pybind11::module&);

inline std::vector<std::pair<std::string, BindingFn>>& binding_registry() {
  static std::vector<std::pair<std::string, BindingFn>> registry;
  return registry;
}

struct RegisterBinding {
  RegisterBinding(const char* name, BindingFn fn) { binding_registry().emplace_back(name, fn); }
};

// The kernels were generated for the captured shapes: anything else is refused, never guessed.
inline void check_input(const torch::Tensor& t, const char* name, std::initializer_list<int64_t> shape,
                        torch::ScalarType dtype = torch::kFloat32) {
  TORCH_CHECK(t.is_cuda(), "fusetune: input ", name, " must be a CUDA tensor");
  TORCH_CHECK(t.scalar_type() == dtype, "fusetune: input ", name, " must be ", dtype, ", got ", t.scalar_type());
  TORCH_CHECK(t.sizes().equals(shape), "fusetune: input ", name, " has shape ", t.sizes(), " but these kernels were tuned for ",
              c10::IntArrayRef(shape), "; run fusetune again for other shapes");
  TORCH_CHECK(t.is_contiguous(), "fusetune: input ", name, " must be contiguous");
}

}  // namespace fusetune

#define REGISTER_BINDING(name, fn) \
  static const ::fusetune::RegisterBinding fusetune_register_##name(#name, fn)
