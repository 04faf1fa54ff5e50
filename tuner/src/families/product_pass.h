// The generated epilogue pass of a group whose product (a matrix product or a convolution) a
// library computes: templates/gemm_epilogue.cuh over the group's Op, with the product in the B
// operand's slot, float32 or (product_type 1, 2) float16 or bfloat16. Shared by the cuBLASLt and
// cuDNN families.
#pragma once
#include <string>

#include "families.h"
#include "launch.h"

namespace fusetune {

// The pass is memory-bound, so one fixed vectorised shape.
constexpr int kPassBlock = 256, kPassVec = 4, kPassIlp = 2;

inline std::string product_pass_instance(const Group& g, bool bias_in_product, int product_type = 0) {
  return "fusetune::gemm_epilogue_kernel<" + std::to_string(kPassBlock) + ", " + std::to_string(kPassVec) + ", " +
         std::to_string(kPassIlp) + ", 0, " + (bias_in_product ? "true" : "false") + ", " + g.op_type() +
         (product_type ? ", " + std::to_string(product_type) : "") + ">";
}

inline LaunchDims product_pass_launch(const Group& g) { return elementwise_launch(kPassBlock, kPassVec, kPassIlp, g.numel()); }

inline std::string product_pass_launch_expr() {
  return "fusetune::elementwise_launch(" + std::to_string(kPassBlock) + ", " + std::to_string(kPassVec) + ", " +
         std::to_string(kPassIlp) + ", args.numel)";
}

// Extension code running the pass over the product at C++ pointer expression `product`.
inline std::string product_pass_code(const Group& g, bool bias_in_product, int product_type = 0) {
  return "  fusetune::KernelArgs epilogue = args;\n  epilogue.ptr[1] = product;  // see gemm_epilogue.cuh\n"
         "  const fusetune::LaunchDims d = " + product_pass_launch_expr() + ";\n  " + product_pass_instance(g, bias_in_product, product_type) +
         "<<<dim3(d.grid[0], d.grid[1], d.grid[2]), dim3(d.block[0], d.block[1], d.block[2]), d.shared_bytes, "
         "stream>>>(epilogue);\n";
}

}  // namespace fusetune
