// The cuda_extension module: adds every self-registered kernel binding (see binding_registry.h).
#include "binding_registry.h"

PYBIND11_MODULE(cuda_extension, m) {
  m.doc() = "fusetune tuned kernels";
  for (const auto& [name, bind] : fusetune::binding_registry()) bind(m);
}
