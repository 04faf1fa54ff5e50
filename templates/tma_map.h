// Host side of templates/gemm_tma.cuh: its two operands as TMA tensor maps, encoded the same way
// by the measuring worker (cuTensorMapEncodeTiled from the dlopen'd driver) and by the generated
// extension (the same function through the CUDA runtime's driver entry point; libcuda is not
// linked). With FUSETUNE_TMA_LAUNCH, also the extension's launcher of the tuned kernel.
#pragma once
#include <cuda.h>  // CUtensorMap and its enums

#include "fusetune_args.h"
#include "gemm_tma_split.h"
#include "launch.h"

#ifdef FUSETUNE_TMA_LAUNCH
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#endif

namespace fusetune {

static_assert(sizeof(TmaMap) == sizeof(CUtensorMap) && alignof(TmaMap) == alignof(CUtensorMap),
              "TmaMap stands for CUtensorMap in NVRTC-compiled kernels");

using TensorMapEncoder = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                      const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                      CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// Operand `slot` of a GEMM group (0: A [batch][m][k] with stride[0][2] == 1; 1: B [batch][k][n]
// with stride[1][1] == 1, i.e. [batch][n][k] rows) of element type `operand` (kGemmTma*) as a 3-D
// tensor (k, rows, batch) read in boxes of one k-tile (128 B, the swizzle span: 32 floats or 64
// halves) x box_rows x 1. With mn_major, B is [batch][k][n] with stride[1][2] == 1 instead (half
// operands only), a tensor (n, k, batch) read in boxes of 64 columns (128 B) x box_rows rows of
// k. Out-of-bounds elements of a box (k, row
// and batch edges) read as zeros. A broadcast batch (stride 0) is encoded as one batch, which
// the kernel then always reads; k = 0 is encoded as 1 (the kernel then issues no loads). The
// family's supports() has checked what TMA requires of strides (multiples of 16 bytes); a base
// address that is not 16-byte aligned makes the encoder fail.
inline CUresult encode_gemm_operand(TensorMapEncoder encode, TmaMap* map, const KernelArgs& a, int slot, int box_rows,
                                    int operand = kGemmTmaFloat32, bool mn_major = false) {
  const long long bytes = gemm_tma_half(operand) ? 2 : 4;
  const CUtensorMapDataType type = !gemm_tma_half(operand)      ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : operand == kGemmTmaFloat16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const long long extent = slot == 0 ? a.m : a.n;
  const long long k = a.k > 0 ? a.k : 1, rows = extent > 0 ? extent : 1;
  const long long inner = mn_major ? rows : k, outer = mn_major ? k : rows;
  const long long ld = slot == 0 ? a.stride[0][1] : mn_major ? a.stride[1][1] : a.stride[1][2];
  const long long batch_stride = a.stride[slot][0];
  const long long batch = batch_stride == 0 ? 1 : a.batch;
  const cuuint64_t dims[3] = {(cuuint64_t)inner, (cuuint64_t)outer, (cuuint64_t)batch};
  // Strides of dimensions 1 and 2 in bytes; the batch one only matters when there are batches.
  const cuuint64_t strides[2] = {(cuuint64_t)(ld * bytes), (cuuint64_t)((batch > 1 ? batch_stride : ld * dims[1]) * bytes)};
  const cuuint32_t box[3] = {(cuuint32_t)(mn_major ? 64 : gemm_tma_k_tile(operand)), (cuuint32_t)box_rows, 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  return encode(reinterpret_cast<CUtensorMap*>(map), type, 3, a.ptr[slot], dims, strides, box,
                elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

#ifdef FUSETUNE_TMA_LAUNCH
// The extension's launch of gemm_tma_kernel<BM, BN, STAGES, ..., CLUSTER, ...>: the shared-memory
// opt-in once, the tensor maps per call (microseconds on the host; the operands may move between
// calls), and gemm_tma_grid's blocks for the blocks resident at once (persistent blocks: one per
// SM, in whole clusters of CLUSTER as many as fit, as the measuring worker launches them). The
// workspace of a split tail is allocated once per device (zeroed; the kernel leaves it zeroed)
// and grows when a larger one is needed; launches of one kernel on concurrent streams would share
// it, as they share the reduce kernels' workspaces. The kernel is a template argument: the
// opt-in and the resident count belong to it, and two groups' kernels of one tile configuration
// (the same other arguments) must not share them.
template <auto kKernel, int BM, int BN, int STAGES, int CLUSTER, int OPERAND = kGemmTmaFloat32, int B_MN = 0>
void launch_gemm_tma(const KernelArgs& args, cudaStream_t stream) {
  const LaunchDims d = gemm_tma_launch(BM, BN, STAGES * gemm_tma_stage_units(OPERAND), CLUSTER, args.m, args.n, args.batch);
  auto fail = [](const std::string& what) { throw std::runtime_error("fusetune: TMA GEMM: " + what); };
  static TensorMapEncoder encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<TensorMapEncoder>(fn);
  }();
  if (!encode) fail("the CUDA driver has no cuTensorMapEncodeTiled (needs CUDA 12 or newer)");
  static int resident = 0;  // blocks resident at once
  static const std::string prepared = [&]() -> std::string {
    const cudaError_t e = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)d.shared_bytes);
    if (e != cudaSuccess) return std::string("shared-memory opt-in refused: ") + cudaGetErrorString(e);
    // The consumers' setmaxnreg.inc waits for the registers the producer frees: 168 per thread
    // (65536 / 384) are what the split assumes; with fewer it would wait forever.
    cudaFuncAttributes attr;
    if (cudaFuncGetAttributes(&attr, kKernel) != cudaSuccess) return "cannot read the kernel's attributes";
    if (attr.numRegs < 65536 / kGemmTmaThreads / 8 * 8)
      return "the kernel was built with " + std::to_string(attr.numRegs) + " registers per thread, setmaxnreg needs 168";
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
      return "cannot read the device's SM count";
    resident = std::max(sms, 1);
    if (CLUSTER > 1) {
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(d.grid[0]);
      config.blockDim = dim3(d.block[0]);
      config.dynamicSmemBytes = d.shared_bytes;
      int clusters = 0;
      if (cudaOccupancyMaxActiveClusters(&clusters, kKernel, &config) != cudaSuccess || clusters < 1)
        clusters = std::max(sms / CLUSTER, 1);
      resident = clusters * CLUSTER;
    }
    return "";
  }();
  if (!prepared.empty()) fail(prepared);
  TmaMap ta, tb;
  // Each block of a cluster loads BN / CLUSTER rows of B (MN-major: k-tile / CLUSTER rows of each
  // 64-column block) and multicasts them.
  if (encode_gemm_operand(encode, &ta, args, 0, BM, OPERAND) != CUDA_SUCCESS ||
      encode_gemm_operand(encode, &tb, args, 1, gemm_tma_b_box_rows(BN, CLUSTER, OPERAND, B_MN != 0), OPERAND,
                          B_MN != 0) != CUDA_SUCCESS)
    fail("cannot describe the operands as tensor maps (their addresses must be 16-byte aligned)");
  const GemmTmaGrid grid =
      gemm_tma_grid(BM, BN, CLUSTER, args.m, args.n, args.k, args.batch, resident, gemm_tma_k_tile(OPERAND));
  unsigned* split_ws = nullptr;
  if (grid.workspace_bytes > 0) {
    static std::map<int, std::pair<void*, long long>> workspaces;  // device -> (memory, bytes)
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) fail("cannot read the current device");
    auto& ws = workspaces[device];
    if (ws.second < grid.workspace_bytes) {
      if (ws.first && cudaFree(ws.first) != cudaSuccess) fail("cannot free the split workspace");
      ws = {nullptr, 0};
      // Zeroed on the kernel's stream, so that the kernel runs after it.
      if (cudaMalloc(&ws.first, (size_t)grid.workspace_bytes) != cudaSuccess ||
          cudaMemsetAsync(ws.first, 0, (size_t)grid.workspace_bytes, stream) != cudaSuccess)
        fail("cannot allocate the split workspace (" + std::to_string(grid.workspace_bytes) + " bytes)");
      ws.second = grid.workspace_bytes;
    }
    split_ws = static_cast<unsigned*>(ws.first);
  }
  kKernel<<<grid.blocks, d.block[0], d.shared_bytes, stream>>>(args, ta, tb, split_ws);
}
#endif

}  // namespace fusetune
