// A kernel group's matrix product through cuBLASLt, shared by the tuner (which loads cuBLASLt with
// dlopen and times its algorithms) and the extension (which links it and runs the baked winner),
// so that both describe the very same operation. Host C++ only.
//
// The group's product is row-major C[b] = A[b] @ B[b] with A in slot 0 ([batch, m, k]) and B in
// slot 1 ([batch, k, n]), each read through its strides. cuBLASLt is column-major, so it computes
// C^T = B^T A^T: its "A" is our B and its "B" is our A, each transposed or not as the strides say.
// float32 operands multiply in TF32 or in fp32; float16 and bfloat16 ones in fp32 (their products
// are exact there), into a product of their own type (lt_data_type).
#pragma once
#include <cublasLt.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "fusetune_args.h"

namespace fusetune {

#define FT_CUBLASLT_FUNCTIONS(X)                                                                    \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtMatmul)                      \
  X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute)        \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) X(cublasLtMatrixLayoutSetAttribute)  \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)                              \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmulAlgoCheck) \
  X(cublasLtMatmulAlgoConfigGetAttribute)

// The cuBLASLt entry points: filled by dlsym in the tuner, by the linker in the extension.
struct CublasLt {
#define FT_CUBLASLT_MEMBER(name) decltype(&::name) name = nullptr;
  FT_CUBLASLT_FUNCTIONS(FT_CUBLASLT_MEMBER)
#undef FT_CUBLASLT_MEMBER
};

#ifdef FUSETUNE_CUBLASLT_LINKED
inline const CublasLt& cublaslt_linked() {
  static const CublasLt api = [] {
    CublasLt a;
#define FT_CUBLASLT_LINK(name) a.name = &::name;
    FT_CUBLASLT_FUNCTIONS(FT_CUBLASLT_LINK)
#undef FT_CUBLASLT_LINK
    return a;
  }();
  return api;
}
#endif

constexpr unsigned long long kCublasLtWorkspaceBytes = 32ull << 20;

// The element type of the operands (both alike), of the bias and of the product cuBLASLt writes
// (its D), from a tensor dtype: float32, or float16 / bfloat16, whose products PyTorch rounds to
// their own type too.
inline cudaDataType_t lt_data_type(const std::string& dtype) {
  return dtype == "float16" ? CUDA_R_16F : dtype == "bfloat16" ? CUDA_R_16BF : CUDA_R_32F;
}

inline int lt_bytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

// An R x C matrix whose element (r, c) lives at r * sr + c * sc, as a cuBLASLt operand: a
// column-major rows x cols matrix with leading dimension ld, transposed by op.
struct LtMatrix {
  cublasOperation_t op;
  uint64_t rows, cols;
  int64_t ld;
};

inline bool lt_matrix(long long R, long long C, long long sr, long long sc, LtMatrix& m) {
  if ((sr == 1 || R == 1) && (C == 1 || sc >= R)) {
    m = LtMatrix{CUBLAS_OP_N, (uint64_t)R, (uint64_t)C, C == 1 ? R : sc};
    return true;
  }
  if ((sc == 1 || C == 1) && (R == 1 || sr >= C)) {
    m = LtMatrix{CUBLAS_OP_T, (uint64_t)C, (uint64_t)R, R == 1 ? C : sr};
    return true;
  }
  return false;
}

// The largest of 16, 8, 4, 2 bytes that divides every address the product reads or writes:
// operands of `operand` bytes an element (batch strides in elements), rows of the output
// `out_row` bytes apart and batches `out_batch` bytes apart.
inline int lt_alignment(const void* a, const void* b, const void* c, const LtMatrix& ma, const LtMatrix& mb,
                        long long batch_a, long long batch_b, int operand = 4, long long out_row = 0,
                        long long out_batch = 0) {
  unsigned long long bits = (unsigned long long)a | (unsigned long long)b | (unsigned long long)c;
  bits |= (unsigned long long)(ma.ld * operand) | (unsigned long long)(mb.ld * operand);
  bits |= (unsigned long long)(batch_a * operand) | (unsigned long long)(batch_b * operand);
  bits |= (unsigned long long)out_row | (unsigned long long)out_batch;
  return bits % 16 == 0 ? 16 : bits % 8 == 0 ? 8 : bits % 4 == 0 ? 4 : 2;
}

// Why cuBLASLt cannot run the product in `a` (nullptr when it can).
inline const char* lt_unsupported(const KernelArgs& a) {
  LtMatrix m;
  if (!lt_matrix(a.n, a.k, a.stride[1][2], a.stride[1][1], m) || !lt_matrix(a.k, a.m, a.stride[0][2], a.stride[0][1], m))
    return "an operand has no unit stride along its rows or columns";
  if (a.batch > 2147483647LL || a.m > 2147483647LL || a.n > 2147483647LL || a.k > 2147483647LL) return "a size over 2^31";
  return nullptr;
}

// The product of one group, described once from the sizes and strides in `a` (its pointers are
// the caller's at each run); run() computes it into `c` (contiguous [batch, m, n]).
class LtGemm {
 public:
  // epilogue: what cuBLASLt applies to the product (CUBLASLT_EPILOGUE_DEFAULT, _BIAS, _RELU,
  // _RELU_BIAS; the bias is of the output's type). tf32 applies to float32 operands only.
  LtGemm(const CublasLt& api, const KernelArgs& a, bool tf32, cublasLtEpilogue_t epilogue, cudaDataType_t type = CUDA_R_32F)
      : api_(api), a_(a), epilogue_(epilogue), type_(type) {
    lt_matrix(a.n, a.k, a.stride[1][2], a.stride[1][1], ma_);  // our B^T
    lt_matrix(a.k, a.m, a.stride[0][2], a.stride[0][1], mb_);  // our A^T
    const bool fast = tf32 && type == CUDA_R_32F;
    status_ = api.cublasLtMatmulDescCreate(&op_, fast ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F);
    set_desc(CUBLASLT_MATMUL_DESC_TRANSA, ma_.op);
    set_desc(CUBLASLT_MATMUL_DESC_TRANSB, mb_.op);
    if (status_ == CUBLAS_STATUS_SUCCESS)
      status_ = api.cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue_, sizeof epilogue_);
    layout(&la_, type, ma_, a.stride[1][0]);
    layout(&lb_, type, mb_, a.stride[0][0]);
    layout(&lc_, type, LtMatrix{CUBLAS_OP_N, (uint64_t)a.n, (uint64_t)a.m, a.n}, a.batch > 1 ? a.m * a.n : 0);
  }
  ~LtGemm() {
    if (op_) api_.cublasLtMatmulDescDestroy(op_);
    for (cublasLtMatrixLayout_t l : {la_, lb_, lc_})
      if (l) api_.cublasLtMatrixLayoutDestroy(l);
  }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  cublasStatus_t status() const { return status_; }
  // The alignment (bytes) of operands a.ptr[0], a.ptr[1] and output c, for the heuristic and for
  // checking that a baked algorithm's assumption holds at run time.
  int alignment(const KernelArgs& a, const void* c) const {
    const int bytes = lt_bytes(type_);
    return lt_alignment(a.ptr[0], a.ptr[1], c, ma_, mb_, a_.stride[0][0], a_.stride[1][0], bytes, a_.n * bytes,
                        a_.batch > 1 ? a_.m * a_.n * bytes : 0);
  }

  // Up to `max` algorithms from cuBLASLt's heuristic for operands a and output c, best first.
  int heuristic(cublasLtHandle_t h, const KernelArgs& a, const void* c, cublasLtMatmulHeuristicResult_t* out,
                int max) const {
    cublasLtMatmulPreference_t pref = nullptr;
    if (api_.cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return 0;
    const uint64_t ws = kCublasLtWorkspaceBytes;
    const uint32_t align = (uint32_t)alignment(a, c);
    api_.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      api_.cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof align);
    int count = 0;
    if (api_.cublasLtMatmulAlgoGetHeuristic(h, op_, la_, lb_, lc_, lc_, pref, max, out, &count) != CUBLAS_STATUS_SUCCESS)
      count = 0;
    api_.cublasLtMatmulPreferenceDestroy(pref);
    return count;
  }

  // Whether `algo` runs this product (cuBLASLt's own check), with the workspace it needs.
  cublasStatus_t check(cublasLtHandle_t h, const cublasLtMatmulAlgo_t& algo, size_t* workspace) const {
    cublasLtMatmulHeuristicResult_t r{};
    const cublasStatus_t s = api_.cublasLtMatmulAlgoCheck(h, op_, la_, lb_, lc_, lc_, &algo, &r);
    if (workspace) *workspace = r.workspaceSize;
    return s;
  }

  bool has_bias() const { return epilogue_ == CUBLASLT_EPILOGUE_BIAS || epilogue_ == CUBLASLT_EPILOGUE_RELU_BIAS; }

  // c = epilogue(A @ B [+ bias per column]) for the operands of a (same sizes and strides as at
  // construction); bias: one value of the output's type per output column when the epilogue adds one.
  cublasStatus_t run(cublasLtHandle_t h, const KernelArgs& a, void* c, const void* bias, const cublasLtMatmulAlgo_t& algo,
                     void* workspace, size_t workspace_bytes, cudaStream_t stream) const {
    const float alpha = 1.f, beta = 0.f;
    if (has_bias()) {
      const cublasStatus_t s = api_.cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
      if (s != CUBLAS_STATUS_SUCCESS) return s;
    }
    return api_.cublasLtMatmul(h, op_, &alpha, a.ptr[1], la_, a.ptr[0], lb_, &beta, c, lc_, c, lc_, &algo, workspace,
                               workspace_bytes, stream);
  }

 private:
  void set_desc(cublasLtMatmulDescAttributes_t attr, cublasOperation_t v) {
    if (status_ == CUBLAS_STATUS_SUCCESS) status_ = api_.cublasLtMatmulDescSetAttribute(op_, attr, &v, sizeof v);
  }
  void layout(cublasLtMatrixLayout_t* l, cudaDataType_t type, const LtMatrix& m, long long batch_stride) {
    if (status_ != CUBLAS_STATUS_SUCCESS) return;
    status_ = api_.cublasLtMatrixLayoutCreate(l, type, m.rows, m.cols, m.ld);
    const int32_t count = (int32_t)a_.batch;
    const int64_t stride = a_.batch > 1 ? batch_stride : 0;
    if (status_ == CUBLAS_STATUS_SUCCESS && a_.batch > 1) {
      status_ = api_.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
      if (status_ == CUBLAS_STATUS_SUCCESS)
        status_ = api_.cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                        sizeof stride);
    }
  }

  const CublasLt& api_;
  KernelArgs a_;
  cublasLtEpilogue_t epilogue_;
  cudaDataType_t type_;
  LtMatrix ma_{}, mb_{};
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  cublasStatus_t status_ = CUBLAS_STATUS_SUCCESS;
};

#ifdef FUSETUNE_CUBLASLT_LINKED
// The tuned algorithm as the extension runs it. Construction checks that the cuBLASLt this
// process loaded is the one the algorithm was tuned with and that cuBLASLt accepts it for this
// product; every run checks that the operands keep the alignment it was tuned for.
class LtBaked {
 public:
  LtBaked(const KernelArgs& a, bool tf32, cublasLtEpilogue_t epilogue, const unsigned long long (&algo)[8],
          unsigned long long version, unsigned long long alignment, cudaDataType_t type = CUDA_R_32F)
      : gemm_(cublaslt_linked(), a, tf32, epilogue, type), alignment_((int)alignment) {
    const CublasLt& api = cublaslt_linked();
    if (api.cublasLtGetVersion() != version)
      throw std::runtime_error("fusetune: this kernel was tuned with cuBLASLt " + std::to_string(version) +
                               " but the process loaded cuBLASLt " + std::to_string(api.cublasLtGetVersion()) +
                               "; run fusetune again");
    static_assert(sizeof algo_.data == sizeof algo, "cublasLtMatmulAlgo_t is 8 words");
    std::memcpy(algo_.data, algo, sizeof algo);
    fail_if(gemm_.status(), "describing the product");
    fail_if(api.cublasLtCreate(&handle_), "creating a handle");
    size_t workspace = 0;
    fail_if(gemm_.check(handle_, algo_, &workspace), "checking the tuned algorithm");
    if (workspace > kCublasLtWorkspaceBytes) throw std::runtime_error("fusetune: the tuned cuBLASLt algorithm needs more workspace");
  }
  void run(const KernelArgs& a, void* c, const void* bias, void* workspace, cudaStream_t stream) const {
    const int now = gemm_.alignment(a, c);
    if (now < alignment_)
      throw std::runtime_error("fusetune: operand addresses are aligned to " + std::to_string(now) +
                               " bytes, the tuned cuBLASLt algorithm needs " + std::to_string(alignment_));
    fail_if(gemm_.run(handle_, a, c, bias, algo_, workspace, kCublasLtWorkspaceBytes, stream), "running the product");
  }

 private:
  static void fail_if(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error(std::string("fusetune: cuBLASLt failed ") + what + " (status " + std::to_string((int)s) + ")");
  }
  LtGemm gemm_;
  int alignment_;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};
#endif

}  // namespace fusetune
