// GPU-test template: the real elementwise kernel, except two planted configs that misbehave so
// that the test can check the search survives them: BLOCK 256 VEC 2 ILP 1 writes to an illegal
// address, BLOCK 128 VEC 2 ILP 1 never returns (VEC 1 is offered to pooling groups only).
#pragma once
#define elementwise_kernel elementwise_kernel_unplanted
#include "elementwise.cuh"
#undef elementwise_kernel

namespace fusetune {

template <int BLOCK, int VEC, int ILP, int MATH, class Op>
__global__ void __launch_bounds__(BLOCK) elementwise_kernel(const KernelArgs a) {
  if (BLOCK == 256 && VEC == 2 && ILP == 1) {
    *reinterpret_cast<volatile float*>(16) = 1.f;  // illegal address
  } else if (BLOCK == 128 && VEC == 2 && ILP == 1) {
    volatile long long spin = 1;
    while (spin > 0) spin = spin + 1 > 0 ? 1 : 1;  // never ends
  } else {
    elementwise_body<BLOCK, VEC, ILP, MATH, Op>(a);
  }
}

}  // namespace fusetune
