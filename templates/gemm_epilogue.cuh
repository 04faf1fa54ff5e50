// The fused epilogue of a GEMM group as its own elementwise pass, for products computed by a
// library (cuBLASLt): out = Op(product, ...). The product, contiguous [batch, m, n], is passed in
// slot kFullSlot - 1 (the B operand's slot, which the epilogue never reads), so that it becomes
// the first of the contiguous inputs that elementwise_body loads: x[0], as Op expects. With
// BIAS_IN_PRODUCT the library has already added the group's per-column bias (Group::bias_slot).
// PRODUCT is its type: 0 float32, loaded with the full inputs; 1 float16 or 2 bfloat16 (a half
// product of half operands, rounded as PyTorch's own), loaded element by element.
#pragma once
#include "elementwise.cuh"
#include "half.cuh"

namespace fusetune {

template <class Op, bool BIAS_IN_PRODUCT, int PRODUCT = 0>
struct ProductFirst {
  static_assert(Op::kFullSlot >= 1, "the product needs the slot before the full inputs");
  static constexpr bool kHalf = PRODUCT != 0;
  static constexpr int kFullSlot = kHalf ? Op::kFullSlot : Op::kFullSlot - 1;
  static constexpr int kFull = kHalf ? Op::kFull : Op::kFull + 1;
  static constexpr int kOutSlot = Op::kOutSlot;
  static constexpr int kOut = Op::kOut;
  static constexpr int kIn = Op::kIn;
  template <int MATH>
  __device__ __forceinline__ static void apply(const KernelArgs& a, long long idx, const float* x, float* y) {
    if constexpr (kHalf) {
      const unsigned short h = reinterpret_cast<const unsigned short*>(a.ptr[Op::kFullSlot - 1])[idx];
      float xs[Op::kIn];
      xs[0] = PRODUCT == 1 ? f16_to_float(h) : bf16_to_float(h);
#pragma unroll
      for (int s = 0; s < Op::kFull; ++s) xs[1 + s] = x[s];
      Op::template apply<MATH, BIAS_IN_PRODUCT>(a, idx, xs, y);
    } else {
      Op::template apply<MATH, BIAS_IN_PRODUCT>(a, idx, x, y);
    }
  }
};

template <int BLOCK, int VEC, int ILP, int MATH, bool BIAS_IN_PRODUCT, class Op, int PRODUCT = 0>
__global__ void __launch_bounds__(BLOCK) gemm_epilogue_kernel(const KernelArgs a) {
  elementwise_body<BLOCK, VEC, ILP, MATH, ProductFirst<Op, BIAS_IN_PRODUCT, PRODUCT>>(a);
}

}  // namespace fusetune
