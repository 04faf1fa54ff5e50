// What cuBLASLt offers on this GPU for the shapes of the shared GEMM models: its version, how many
// algorithms its heuristic returns, and each one's time (L2 flushed, median of 10), so that the
// search can be designed from measurements rather than guesses.
//   nvcc -O2 -o cublaslt_probe cublaslt_probe.cpp -lcublasLt && ./cublaslt_probe
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                        \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) { std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); std::exit(1); } \
  } while (0)
#define LT(x)                                                                           \
  do {                                                                                  \
    cublasStatus_t s_ = (x);                                                            \
    if (s_ != CUBLAS_STATUS_SUCCESS) { std::fprintf(stderr, "%s: status %d\n", #x, (int)s_); std::exit(1); } \
  } while (0)

struct Shape {
  const char* name;
  int m, n, k;
  bool b_transposed;  // B given as W[N, K] (Linear)
  cublasLtEpilogue_t epilogue;
  cublasComputeType_t compute;
};

int main() {
  std::printf("cublasLtGetVersion %zu, cudart %d\n", cublasLtGetVersion(), CUDART_VERSION);
  cublasLtHandle_t lt;
  LT(cublasLtCreate(&lt));
  int l2 = 0;
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  void* flush;
  CHECK(cudaMalloc(&flush, 2 * (size_t)l2));
  const size_t ws_bytes = 64 << 20;
  void* ws;
  CHECK(cudaMalloc(&ws, ws_bytes));
  const Shape shapes[] = {
      {"matmul_square 6144^3 tf32", 6144, 6144, 6144, false, CUBLASLT_EPILOGUE_DEFAULT, CUBLAS_COMPUTE_32F_FAST_TF32},
      {"matmul_square 6144^3 fp32", 6144, 6144, 6144, false, CUBLASLT_EPILOGUE_DEFAULT, CUBLAS_COMPUTE_32F},
      {"gemm_bias_gelu 8192x4096x4096 bias", 8192, 4096, 4096, true, CUBLASLT_EPILOGUE_BIAS, CUBLAS_COMPUTE_32F_FAST_TF32},
      {"gemm_bias_gelu 8192x4096x4096 gelu_bias", 8192, 4096, 4096, true, CUBLASLT_EPILOGUE_GELU_BIAS, CUBLAS_COMPUTE_32F_FAST_TF32},
      {"gemm_relu_residual 6144x3072x3072", 6144, 3072, 3072, true, CUBLASLT_EPILOGUE_BIAS, CUBLAS_COMPUTE_32F_FAST_TF32},
      {"model.py 4096x2048x2048", 4096, 2048, 2048, true, CUBLASLT_EPILOGUE_BIAS, CUBLAS_COMPUTE_32F_FAST_TF32},
      {"mlp3 4096x1000x4096", 4096, 1000, 4096, true, CUBLASLT_EPILOGUE_BIAS, CUBLAS_COMPUTE_32F_FAST_TF32},
  };
  for (const Shape& s : shapes) {
    float *A, *B, *C, *bias;
    CHECK(cudaMalloc(&A, (size_t)s.m * s.k * 4));
    CHECK(cudaMalloc(&B, (size_t)s.k * s.n * 4));
    CHECK(cudaMalloc(&C, (size_t)s.m * s.n * 4));
    CHECK(cudaMalloc(&bias, (size_t)s.n * 4));
    CHECK(cudaMemset(A, 0, (size_t)s.m * s.k * 4));
    CHECK(cudaMemset(B, 0, (size_t)s.k * s.n * 4));
    CHECK(cudaMemset(bias, 0, (size_t)s.n * 4));
    // Row-major C[M, N] = A[M, K] @ B is column-major C^T[N, M] = op(B) A^T.
    cublasLtMatmulDesc_t op;
    LT(cublasLtMatmulDescCreate(&op, s.compute, CUDA_R_32F));
    cublasOperation_t ta = s.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &s.epilogue, sizeof s.epilogue));
    if (s.epilogue != CUBLASLT_EPILOGUE_DEFAULT)
      LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    cublasLtMatrixLayout_t la, lb, lc;
    if (s.b_transposed) LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, s.k, s.n, s.k));
    else LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, s.n, s.k, s.n));
    LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, s.k, s.m, s.k));
    LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, s.n, s.m, s.n));
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
    std::vector<cublasLtMatmulHeuristicResult_t> res(64);
    int count = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, (int)res.size(), res.data(), &count));
    std::printf("== %s: %d algorithms\n", s.name, count);
    const float alpha = 1.f, beta = 0.f;
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    for (int i = 0; i < count; ++i) {
      std::vector<float> ms;
      bool failed = false;
      for (int r = 0; r < 13 && !failed; ++r) {
        CHECK(cudaMemsetAsync(flush, r, 2 * (size_t)l2));
        CHECK(cudaEventRecord(e0));
        failed = cublasLtMatmul(lt, op, &alpha, B, la, A, lb, &beta, C, lc, C, lc, &res[i].algo, ws, ws_bytes, 0) !=
                 CUBLAS_STATUS_SUCCESS;
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float t;
        CHECK(cudaEventElapsedTime(&t, e0, e1));
        if (r >= 3) ms.push_back(t);
      }
      if (failed) { std::printf("  algo %2d: failed\n", i); continue; }
      std::sort(ms.begin(), ms.end());
      const double med = ms[ms.size() / 2];
      std::printf("  algo %2d: %.4f ms  %.1f TFLOP/s  workspace %zu  waves %.2f\n", i, med,
                  2.0 * s.m * s.n * (double)s.k / (med * 1e-3) / 1e12, res[i].workspaceSize, res[i].wavesCount);
    }
    CHECK(cudaFree(A));
    CHECK(cudaFree(B));
    CHECK(cudaFree(C));
    CHECK(cudaFree(bias));
  }
  return 0;
}
