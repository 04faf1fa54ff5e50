// sm_90 PTX as templates/gemm_tma.cuh uses it: mbarriers (also a cluster peer's), TMA tensor
// loads (also multicast to a cluster), the cluster barrier, register reallocation, named
// barriers and shared-memory access, TF32 rounding, and the sm_90a warpgroup MMA (TF32 m64nNk8 with A and B
// read through shared-memory descriptors, the K-major 128-byte-swizzle descriptor, and the
// fences and waits around it). NVRTC has no <cstdint>: built-in types.
#pragma once

namespace fusetune {
namespace sm90 {

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
}
// Makes the initialized barriers visible to the async proxy (the TMA unit that signals them);
// the __syncthreads after it makes them visible to the other threads (CUTLASS fence_barrier_init).
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// One arrival plus `bytes` of expected transactions: the phase completes when the TMA loads
// have delivered that many bytes (out-of-bounds zero fill included: the full box counts).
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// Blocks until the phase of parity `parity` has completed. A freshly initialized barrier is in
// phase 0, so waiting on parity 1 (the phase "before" it) returns at once. The loop is inside
// the asm, as in CUTLASS's ClusterBarrier::wait: a timeout check here (trap or exit on the
// consumers' path) made ptxas serialize the wgmmas (C7515/C7517/C7518), so the watchdog is a
// separate warp (gemm_tma.cuh's watch_progress).
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_AGAIN:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_AGAIN;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void red_release_gpu_add(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void st_volatile_shared(unsigned addr, unsigned v) {
  asm volatile("st.volatile.shared.u32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned ld_volatile_shared(unsigned addr) {
  unsigned v;
  asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}

// 3-D tiled TMA load (coordinates: k, row, batch) into this CTA's shared memory; completion is
// reported to `bar` as transaction bytes. `map` is a __grid_constant__ kernel parameter.
__device__ __forceinline__ void tma_load_3d(unsigned dst, const void* map, unsigned bar, int k, int row, int batch) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(k), "r"(row), "r"(batch)
      : "memory");
}
// The same load multicast to every CTA of the cluster in `mask` (bit r: rank r): each receives
// the box at the same shared-memory offset `dst`, and its barrier at offset `bar` the bytes.
__device__ __forceinline__ void tma_load_3d_multicast(unsigned dst, const void* map, unsigned bar, int k, int row,
                                                      int batch, unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4, %5}], [%2], %6;" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(k), "r"(row), "r"(batch), "h"(mask)
      : "memory");
}
// One arrival on the barrier at this CTA's offset `bar` in the shared memory of cluster rank
// `rank` (CUTLASS's ClusterBarrier::arrive(cta_id)), with the default .release.cta semantics:
// .release.cluster would wait for every earlier global store of the thread (the epilogue's) to
// reach cluster scope at every arrival, which made each k-tile cost about 1 us on the H200.
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned rank) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(bar),
      "r"(rank)
      : "memory");
}
// Every thread of every CTA of the cluster: what each wrote to its shared memory before (the
// barriers' initialization) is visible to the others after.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ unsigned cluster_ctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void prefetch_tensormap(const void* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// Per-warp register budget changes; every warp of the warpgroup must execute the same one.
template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}
// Barrier over `threads` threads (a warpgroup); id 0 is __syncthreads'.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// The shared-window address (what the wrappers here take) of a pointer into shared memory.
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void st_shared_v2(unsigned addr, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(x), "f"(y) : "memory");
}
__device__ __forceinline__ float4 ld_shared_v4(unsigned addr) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}
__device__ __forceinline__ void st_shared_v4(unsigned addr, float4 v) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
               : "memory");
}
// Orders this thread's generic-proxy writes to shared memory before later async-proxy reads of
// it (wgmma operands) that a barrier makes wait for them.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// What a TF32 read of x drops: x minus x with its low 13 bits cleared (exact in float32).
__device__ __forceinline__ float tf32_remainder(float x) { return x - __uint_as_float(__float_as_uint(x) & 0xffffe000u); }

// ---- warpgroup MMA ----
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Compiler-level fence on accumulator registers: keeps the compiler from moving ordinary
// reads/writes of the accumulators across wgmma fence/wait points (no instruction emitted).
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format"):
//   bits  0-13 : (start address & 0x3FFFF) >> 4
//   bits 16-29 : leading-dimension byte offset >> 4  (unused for swizzled K-major; set to 1)
//   bits 32-45 : stride-dimension byte offset >> 4   (1024 B between consecutive 8-row groups)
//   bits 49-51 : base offset = 0 (every swizzle pattern starts on a 1024 B boundary)
//   bits 62-63 : swizzle mode, 1 = 128-byte swizzle
// Advancing along K by 8 tf32 (32 bytes) inside the 128-byte swizzled row = adding 32>>4 = 2
// to the start-address field (what CUTLASS' DescriptorIterator and DeepGEMM do).
__device__ __forceinline__ unsigned long long make_desc_k_sw128(unsigned smem_addr) {
  unsigned long long d = 0;
  d |= static_cast<unsigned long long>((smem_addr & 0x3FFFFu) >> 4);
  d |= static_cast<unsigned long long>(16u >> 4) << 16;
  d |= static_cast<unsigned long long>(1024u >> 4) << 32;
  d |= static_cast<unsigned long long>(1) << 62;
  return d;
}

// The same for an MN-major operand (16-bit types only: B read as [k][n] rows, n contiguous) in
// 128-byte-swizzled blocks of 64 elements along MN by the k-tile's 64 rows along K, the blocks
// `block_bytes` apart: CuTe's canonical ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)) with LBO the
// distance between 64-element blocks along MN and SBO = 1024 B between 8-row groups along K (PTX
// ISA "Canonical Layouts", MN-major, 128B swizzling). A k16 step advances 16 rows = 2048 B.
__device__ __forceinline__ unsigned long long make_desc_mn_sw128(unsigned smem_addr, unsigned block_bytes) {
  unsigned long long d = 0;
  d |= static_cast<unsigned long long>((smem_addr & 0x3FFFFu) >> 4);
  d |= static_cast<unsigned long long>(block_bytes >> 4) << 16;
  d |= static_cast<unsigned long long>(1024u >> 4) << 32;
  d |= static_cast<unsigned long long>(1) << 62;
  return d;
}

// ---- wgmma.mma_async.sync.aligned.m64nNkK.f32.<type>.<type>, A and B from smem descriptors ----
// Wgmma<N, OPERAND, B_MN>::mma: N/2 fp32 accumulator registers per thread. scale-d != 0:
// D = A*B + D. imm-scale-a = imm-scale-b = 1 (no negation). OPERAND (kGemmTma* of
// gemm_tma_split.h): 0, float32 data as TF32, k8, no transpose operands (K-major only); 1,
// float16 and 2, bfloat16, k16 with imm-trans-a = 0 (A K-major) and imm-trans-b = B_MN (0: B
// K-major, 1: MN-major, make_desc_mn_sw128's layout). One step reads 32 bytes of every row of a
// K-major operand either way (k8 of TF32, k16 of half), so its descriptor advances alike.
template <int N, int OPERAND, int B_MN = 0>
struct Wgmma;

#define FUSETUNE_WGMMA_INSTR_0(N) "wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 "
#define FUSETUNE_WGMMA_INSTR_1(N) "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.f16.f16 "
#define FUSETUNE_WGMMA_INSTR_2(N) "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 "
#define FUSETUNE_WGMMA_TAIL_0_0 ""
#define FUSETUNE_WGMMA_TAIL_1_0 ", 0, 0"
#define FUSETUNE_WGMMA_TAIL_2_0 ", 0, 0"
#define FUSETUNE_WGMMA_TAIL_1_1 ", 0, 1"
#define FUSETUNE_WGMMA_TAIL_2_1 ", 0, 1"

#define FUSETUNE_WGMMA_64(OP, TB)                                                                                                  \
template <> struct Wgmma<64, OP, TB> {                                                                                             \
  __device__ __forceinline__ static void mma(float (&d)[32], unsigned long long desc_a, unsigned long long desc_b, int scale_d) {  \
    asm volatile(                                                                                                                  \
        "{\n"                                                                                                                      \
        ".reg .pred p;\n"                                                                                                          \
        "setp.ne.b32 p, %34, 0;\n"                                                                                                 \
        FUSETUNE_WGMMA_INSTR_##OP(64)                                                                                              \
        "{"                                                                                                                        \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                                   \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"                                           \
        "}, "                                                                                                                      \
        "%32, %33, p, 1, 1" FUSETUNE_WGMMA_TAIL_##OP##_##TB ";\n"                                                                  \
        "}\n"                                                                                                                      \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),                          \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),                    \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),                  \
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                   \
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                                                                 \
  }                                                                                                                                \
};

#define FUSETUNE_WGMMA_128(OP, TB)                                                                                                 \
template <> struct Wgmma<128, OP, TB> {                                                                                            \
  __device__ __forceinline__ static void mma(float (&d)[64], unsigned long long desc_a, unsigned long long desc_b, int scale_d) {  \
    asm volatile(                                                                                                                  \
        "{\n"                                                                                                                      \
        ".reg .pred p;\n"                                                                                                          \
        "setp.ne.b32 p, %66, 0;\n"                                                                                                 \
        FUSETUNE_WGMMA_INSTR_##OP(128)                                                                                             \
        "{"                                                                                                                        \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                                   \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                                         \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                                         \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"                                           \
        "}, "                                                                                                                      \
        "%64, %65, p, 1, 1" FUSETUNE_WGMMA_TAIL_##OP##_##TB ";\n"                                                                  \
        "}\n"                                                                                                                      \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),                          \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),                    \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),                  \
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),                  \
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),                  \
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),                  \
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),                  \
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                   \
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                                                                 \
  }                                                                                                                                \
};

#define FUSETUNE_WGMMA_192(OP, TB)                                                                                                 \
template <> struct Wgmma<192, OP, TB> {                                                                                            \
  __device__ __forceinline__ static void mma(float (&d)[96], unsigned long long desc_a, unsigned long long desc_b, int scale_d) {  \
    asm volatile(                                                                                                                  \
        "{\n"                                                                                                                      \
        ".reg .pred p;\n"                                                                                                          \
        "setp.ne.b32 p, %98, 0;\n"                                                                                                 \
        FUSETUNE_WGMMA_INSTR_##OP(192)                                                                                             \
        "{"                                                                                                                        \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                                   \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                                         \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                                         \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "                                         \
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "                                         \
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"                                           \
        "}, "                                                                                                                      \
        "%96, %97, p, 1, 1" FUSETUNE_WGMMA_TAIL_##OP##_##TB ";\n"                                                                  \
        "}\n"                                                                                                                      \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),                          \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),                    \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),                  \
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),                  \
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),                  \
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),                  \
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),                  \
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),                  \
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),                  \
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),                  \
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),                  \
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])                   \
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                                                                 \
  }                                                                                                                                \
};

#define FUSETUNE_WGMMA_256(OP, TB)                                                                                                  \
template <> struct Wgmma<256, OP, TB> {                                                                                             \
  __device__ __forceinline__ static void mma(float (&d)[128], unsigned long long desc_a, unsigned long long desc_b, int scale_d) {  \
    asm volatile(                                                                                                                   \
        "{\n"                                                                                                                       \
        ".reg .pred p;\n"                                                                                                           \
        "setp.ne.b32 p, %130, 0;\n"                                                                                                 \
        FUSETUNE_WGMMA_INSTR_##OP(256)                                                                                              \
        "{"                                                                                                                         \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                                    \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                                          \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                                          \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "                                          \
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "                                          \
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "                                          \
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "                              \
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"                            \
        "}, "                                                                                                                       \
        "%128, %129, p, 1, 1" FUSETUNE_WGMMA_TAIL_##OP##_##TB ";\n"                                                                 \
        "}\n"                                                                                                                       \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),                           \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),                     \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),                   \
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),                   \
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),                   \
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),                   \
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),                   \
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),                   \
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),                   \
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),                   \
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),                   \
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),                   \
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),               \
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),           \
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),           \
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])            \
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                                                                  \
  }                                                                                                                                 \
};

FUSETUNE_WGMMA_64(0, 0)
FUSETUNE_WGMMA_64(1, 0)
FUSETUNE_WGMMA_64(1, 1)
FUSETUNE_WGMMA_64(2, 0)
FUSETUNE_WGMMA_64(2, 1)

FUSETUNE_WGMMA_128(0, 0)
FUSETUNE_WGMMA_128(1, 0)
FUSETUNE_WGMMA_128(1, 1)
FUSETUNE_WGMMA_128(2, 0)
FUSETUNE_WGMMA_128(2, 1)

FUSETUNE_WGMMA_192(0, 0)
FUSETUNE_WGMMA_192(1, 0)
FUSETUNE_WGMMA_192(1, 1)
FUSETUNE_WGMMA_192(2, 0)
FUSETUNE_WGMMA_192(2, 1)

FUSETUNE_WGMMA_256(0, 0)
FUSETUNE_WGMMA_256(1, 0)
FUSETUNE_WGMMA_256(1, 1)
FUSETUNE_WGMMA_256(2, 0)
FUSETUNE_WGMMA_256(2, 1)
#undef FUSETUNE_WGMMA_64
#undef FUSETUNE_WGMMA_128
#undef FUSETUNE_WGMMA_192
#undef FUSETUNE_WGMMA_256
#undef FUSETUNE_WGMMA_INSTR_0
#undef FUSETUNE_WGMMA_INSTR_1
#undef FUSETUNE_WGMMA_INSTR_2
#undef FUSETUNE_WGMMA_TAIL_0_0
#undef FUSETUNE_WGMMA_TAIL_1_0
#undef FUSETUNE_WGMMA_TAIL_2_0
#undef FUSETUNE_WGMMA_TAIL_1_1
#undef FUSETUNE_WGMMA_TAIL_2_1

}  // namespace sm90
}  // namespace fusetune
