// The fused epilogue of a GEMM group as its own elementwise pass, for products computed by a
// library (cuBLASLt): out = Op(product, ...). The product, contiguous [batch, m, n], is passed in
// slot kFullSlot - 1 (the B operand's slot, which the epilogue never reads), so that it becomes
// the first of the contiguous inputs that elementwise_body loads: x[0], as Op expects. With
// BIAS_IN_PRODUCT the library has already added the group's per-column bias (Group::bias_slot).
// PRODUCT is its type (FullKinds' codes): 0 float32; 1 float16 or 2 bfloat16, a half product of
// half operands rounded as PyTorch's own.
#pragma once
#include "elementwise.cuh"
#include "half.cuh"

namespace fusetune {

template <class Op, bool BIAS_IN_PRODUCT, int PRODUCT = 0>
struct ProductFirst {
  static_assert(Op::kFullSlot >= 1, "the product needs the slot before the full inputs");
  static constexpr int kFullSlot = Op::kFullSlot - 1;
  static constexpr int kFull = Op::kFull + 1;
  static constexpr unsigned kFullHalf = PRODUCT | FullKinds<Op>::kBits << 2;  // the product's kind, then Op's inputs'
  static constexpr int kOutSlot = Op::kOutSlot;
  static constexpr int kOut = Op::kOut;
  static constexpr int kIn = Op::kIn;
  static constexpr int kHalfOut = HalfOutputs<Op>::kCount;
  static constexpr unsigned kHalfOutBf16 = HalfOutputs<Op>::kBf16;
  // The generated Ops' shape of apply; its bias flag is BIAS_IN_PRODUCT here, so the second is unused.
  template <int MATH, bool /*unused*/ = false, bool HALF_IN_Y = false>
  __device__ __forceinline__ static void apply(const KernelArgs& a, long long idx, const float* x, float* y) {
    if constexpr (HALF_IN_Y)
      Op::template apply<MATH, BIAS_IN_PRODUCT, true>(a, idx, x, y);
    else
      Op::template apply<MATH, BIAS_IN_PRODUCT>(a, idx, x, y);
  }
};

template <int BLOCK, int VEC, int ILP, int MATH, bool BIAS_IN_PRODUCT, class Op, int PRODUCT = 0>
__global__ void __launch_bounds__(BLOCK) gemm_epilogue_kernel(const KernelArgs a) {
  elementwise_body<BLOCK, VEC, ILP, MATH, ProductFirst<Op, BIAS_IN_PRODUCT, PRODUCT>>(a);
}

}  // namespace fusetune
