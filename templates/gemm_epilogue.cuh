// The fused epilogue of a GEMM group as its own elementwise pass, for products computed by a
// library (cuBLASLt): out = Op(product, ...). The product, contiguous [batch, m, n], is passed in
// slot kFullSlot - 1 (the B operand's slot, which the epilogue never reads), so that it becomes
// the first of the contiguous inputs that elementwise_body loads: x[0], as Op expects. With
// BIAS_IN_PRODUCT the library has already added the group's per-column bias (Group::bias_slot).
// PRODUCT is its type: 0 float32, loaded with the full inputs; 1 float16 or 2 bfloat16 (a half
// product of half operands, rounded as PyTorch's own), loaded by half_product_body.
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
      float xs[Op::kIn];
      xs[0] = half_to_float(reinterpret_cast<const unsigned short*>(a.ptr[Op::kFullSlot - 1])[idx], PRODUCT);
#pragma unroll
      for (int s = 0; s < Op::kFull; ++s) xs[1 + s] = x[s];
      Op::template apply<MATH, BIAS_IN_PRODUCT>(a, idx, xs, y);
    } else {
      Op::template apply<MATH, BIAS_IN_PRODUCT>(a, idx, x, y);
    }
  }
};

// A half product (PRODUCT 1, 2) loaded VEC elements at a time with the full inputs, and the half
// outputs stored VEC at a time (Op leaves them in y: kHalfInY), the loop and the float accesses
// as elementwise_body's; the tail and misaligned tensors element by element (ProductFirst).
template <int BLOCK, int VEC, int ILP, int MATH, bool BIAS_IN_PRODUCT, class Op, int PRODUCT>
__device__ __forceinline__ void half_product_body(const KernelArgs& a) {
  constexpr int kHalf = HalfOutputs<Op>::kCount, kAll = Op::kOut + kHalf > 0 ? Op::kOut + kHalf : 1;
  const unsigned short* product = reinterpret_cast<const unsigned short*>(a.ptr[Op::kFullSlot - 1]);
  unsigned long long halves = (unsigned long long)product;
#pragma unroll
  for (int h = 0; h < kHalf; ++h) halves |= (unsigned long long)a.ptr[Op::kOutSlot + Op::kOut + h];
  const bool aligned = vector_aligned<Op, VEC>(a) && halves % (VEC * sizeof(unsigned short)) == 0;
  const long long n = a.numel;
  const long long chunk = (long long)BLOCK * VEC * ILP;
  for (long long base = (long long)blockIdx.x * chunk; base < n; base += (long long)gridDim.x * chunk) {
    if (aligned && base + chunk <= n) {
      float in[ILP][Op::kIn][VEC];  // [0]: the product, [1 + s]: full input s
#pragma unroll
      for (int u = 0; u < ILP; ++u) {
        const long long i = base + ((long long)u * BLOCK + threadIdx.x) * VEC;
        load_halves<VEC>(product + i, PRODUCT, in[u][0]);
#pragma unroll
        for (int s = 0; s < Op::kFull; ++s) load_vec<VEC>(a.ptr[Op::kFullSlot + s] + i, in[u][1 + s]);
      }
#pragma unroll
      for (int u = 0; u < ILP; ++u) {
        const long long i = base + ((long long)u * BLOCK + threadIdx.x) * VEC;
        float out[kAll][VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          float x[Op::kIn];
          float y[kAll];
#pragma unroll
          for (int s = 0; s < Op::kIn; ++s) x[s] = in[u][s][j];
          if constexpr (kHalf > 0)
            Op::template apply<MATH, BIAS_IN_PRODUCT, true>(a, i + j, x, y);
          else
            Op::template apply<MATH, BIAS_IN_PRODUCT>(a, i + j, x, y);
#pragma unroll
          for (int o = 0; o < Op::kOut + kHalf; ++o) out[o][j] = y[o];
        }
#pragma unroll
        for (int o = 0; o < Op::kOut; ++o) store_vec<VEC>(a.ptr[Op::kOutSlot + o] + i, out[o]);
#pragma unroll
        for (int h = 0; h < kHalf; ++h)
          store_halves<VEC>(reinterpret_cast<unsigned short*>(a.ptr[Op::kOutSlot + Op::kOut + h]) + i,
                            HalfOutputs<Op>::kind(h), out[Op::kOut + h]);
      }
    } else {
      for (long long i = base + threadIdx.x; i < n && i < base + chunk; i += BLOCK)
        apply_scalar<ProductFirst<Op, BIAS_IN_PRODUCT, PRODUCT>, MATH>(a, i);
    }
  }
}

template <int BLOCK, int VEC, int ILP, int MATH, bool BIAS_IN_PRODUCT, class Op, int PRODUCT = 0>
__global__ void __launch_bounds__(BLOCK) gemm_epilogue_kernel(const KernelArgs a) {
  if constexpr (PRODUCT == 0)
    elementwise_body<BLOCK, VEC, ILP, MATH, ProductFirst<Op, BIAS_IN_PRODUCT>>(a);
  else
    half_product_body<BLOCK, VEC, ILP, MATH, BIAS_IN_PRODUCT, Op, PRODUCT>(a);
}

}  // namespace fusetune
