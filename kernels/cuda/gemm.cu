// CUDA GEMM through cuBLASLt (Note [GEMM family]). The library is opened on first use (dynlib.h) — torch's
// own CUDA wheel has usually loaded libcublasLt.so.13 already — so the extension links no cuBLAS and a
// CUDA build still imports where there is none. Handles are per device; algorithms come from cuBLASLt's
// heuristic for each shape (a cache keyed on shape is the obvious next step once GPU timings ask for it).
#include <cublasLt.h>

#include <mutex>
#include <string>

#include "common.cuh"
#include "mytorch/dynlib.h"
#include "mytorch/gemm.h"

namespace mytorch::cuda {
namespace {

// clang-format off: a list of the library's functions, one X-macro entry each
#define MT_LT_FUNCS(_)                                                                                   \
  _(cublasLtCreate) _(cublasLtMatmulDescCreate) _(cublasLtMatmulDescDestroy) _(cublasLtMatmulDescSetAttribute) \
  _(cublasLtMatrixLayoutCreate) _(cublasLtMatrixLayoutDestroy) _(cublasLtMatrixLayoutSetAttribute)        \
  _(cublasLtMatmulPreferenceCreate) _(cublasLtMatmulPreferenceDestroy)                                   \
  _(cublasLtMatmulPreferenceSetAttribute) _(cublasLtMatmulAlgoGetHeuristic) _(cublasLtMatmul)             \
  _(cublasLtGetStatusString)
// clang-format on

#if defined(MYTORCH_EMU_ACTIVE)
// The emulated build links the emulator's library instead (kernels/emu/): its functions, no loading.
MT_DYNLIB_LINKED(Lt, lt, MT_LT_FUNCS)
#else
MT_DYNLIB(Lt, lt, MT_LT_FUNCS, "cuBLASLt", "install the CUDA toolkit's cuBLAS or the nvidia-cublas wheel",
          "libcublasLt.so.13", "libcublasLt.so")
#endif

rt::Status fail(const char* what, cublasStatus_t s) {
  std::string msg = std::string("gemm: ") + what +
                    " failed: " + (lt().cublasLtGetStatusString ? lt().cublasLtGetStatusString(s) : "?");
  return rt::report(rt::Status::Unknown, msg.c_str());
}

cublasLtHandle_t handle_for(int device, rt::Status* st) {
  static std::mutex mu;
  static cublasLtHandle_t handles[64] = {};
  std::lock_guard<std::mutex> lock(mu);
  if (device < 0 || device >= 64) {
    *st = rt::report(rt::Status::InvalidDevice, "gemm: device index out of range");
    return nullptr;
  }
  if (!handles[device]) {
    cublasStatus_t s = lt().cublasLtCreate(&handles[device]);
    if (s != CUBLAS_STATUS_SUCCESS) {
      *st = fail("cublasLtCreate", s);
      return nullptr;
    }
  }
  return handles[device];
}

cudaDataType_t data_type(DType t) {
  switch (t) {
    case DType::Half: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    case DType::Double: return CUDA_R_64F;
    default: return CUDA_R_32F;
  }
}

// RAII for the descriptors of one call.
struct Descs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descs() {
    if (pref) lt().cublasLtMatmulPreferenceDestroy(pref);
    if (c) lt().cublasLtMatrixLayoutDestroy(c);
    if (b) lt().cublasLtMatrixLayoutDestroy(b);
    if (a) lt().cublasLtMatrixLayoutDestroy(a);
    if (op) lt().cublasLtMatmulDescDestroy(op);
  }
};

#define MT_LT_TRY(call, what)                               \
  do {                                                      \
    cublasStatus_t s_ = (call);                             \
    if (s_ != CUBLAS_STATUS_SUCCESS) return fail(what, s_); \
  } while (0)

// A column-major layout of `rows` x `cols` with leading dimension ld, batched with `stride`.
rt::Status layout(cublasLtMatrixLayout_t* out, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                  int64_t stride) {
  MT_LT_TRY(lt().cublasLtMatrixLayoutCreate(out, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
            "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    int32_t count = static_cast<int32_t>(batch);
    MT_LT_TRY(lt().cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
              "batch count");
    MT_LT_TRY(lt().cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                    sizeof(stride)),
              "batch stride");
  }
  return rt::Status::Success;
}

// cuBLASLt picks an algorithm assuming each operand is aligned to the preference's minimum, 256 bytes unless
// set: sliced operands, odd leading dimensions and offset `out=` views would get NOT_SUPPORTED or a misaligned
// access. The alignment an operand really has: the largest power of two (at most 256) dividing its pointer and
// every column and batch offset.
uint32_t alignment(const void* p, int64_t ld, int64_t stride, int64_t batch, size_t elem) {
  const uint64_t bits = reinterpret_cast<uint64_t>(p) | (static_cast<uint64_t>(ld) * elem) |
                        (batch > 1 ? static_cast<uint64_t>(stride) * elem : 0);
  uint32_t a = 256;
  while (a > 1 && bits % a != 0) a >>= 1;
  return a;
}

} // namespace

rt::Status gemm_integer(const GemmArgs& g, rt::Stream stream);  // cuda/gemm_int.cu (Note [Integer GEMM])

rt::Status gemm(const GemmArgs& g, rt::Stream stream) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return rt::Status::Success;
  if (gemm_integer_dtype(g.dtype)) return gemm_integer(g, stream);
  if (g.dtype != DType::Half && g.dtype != DType::BFloat16 && g.dtype != DType::Float && g.dtype != DType::Double)
    return rt::report(rt::Status::InvalidValue, "gemm: expected a floating dtype");
  if (!lt().error.empty()) return rt::report(rt::Status::Unavailable, lt().error.c_str());
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return check_launch("gemm");
  rt::Status st = rt::Status::Success;
  cublasLtHandle_t h = handle_for(device, &st);
  if (!h) return st;

  const bool dbl = g.dtype == DType::Double;
  const cudaDataType_t t = data_type(g.dtype);
  const cublasComputeType_t compute =
      dbl ? CUBLAS_COMPUTE_64F
          : (g.dtype == DType::Float && g.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  const cudaDataType_t scale_t = dbl ? CUDA_R_64F : CUDA_R_32F;

  // Column-major view: C^T (n x m) = op(B)^T (n x k) * op(A)^T (k x m).
  Descs d;
  MT_LT_TRY(lt().cublasLtMatmulDescCreate(&d.op, compute, scale_t), "cublasLtMatmulDescCreate");
  const cublasOperation_t ta = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // first cuBLAS operand is B
  const cublasOperation_t tb = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  MT_LT_TRY(lt().cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "transa");
  MT_LT_TRY(lt().cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "transb");
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (g.bias) {
    epi = g.epilogue == GemmEpilogue::Relu   ? CUBLASLT_EPILOGUE_RELU_BIAS
          : g.epilogue == GemmEpilogue::Gelu ? CUBLASLT_EPILOGUE_GELU_BIAS
                                             : CUBLASLT_EPILOGUE_BIAS;
    MT_LT_TRY(lt().cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)),
              "bias pointer");
    MT_LT_TRY(lt().cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t, sizeof(t)),
              "bias type");
  } else if (g.epilogue != GemmEpilogue::None) {
    epi = g.epilogue == GemmEpilogue::Relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_GELU;
  }
  MT_LT_TRY(lt().cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), "epilogue");

  // B as stored: row-major (k x n, ld) is column-major (n x k); transposed, column-major (k x n).
  const int64_t brows = g.trans_b ? g.k : g.n, bcols = g.trans_b ? g.n : g.k;
  const int64_t arows = g.trans_a ? g.m : g.k, acols = g.trans_a ? g.k : g.m;
  if ((st = layout(&d.a, t, brows, bcols, g.ldb, g.batch, g.stride_b)) != rt::Status::Success) return st;
  if ((st = layout(&d.b, t, arows, acols, g.lda, g.batch, g.stride_a)) != rt::Status::Success) return st;
  if ((st = layout(&d.c, t, g.n, g.m, g.ldc, g.batch, g.stride_c)) != rt::Status::Success) return st;

  MT_LT_TRY(lt().cublasLtMatmulPreferenceCreate(&d.pref), "preference");
  const uint64_t ws = g.workspace ? g.workspace_bytes : 0;
  MT_LT_TRY(
      lt().cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
      "workspace preference");
  const size_t elem = dtype_size(g.dtype);
  const uint32_t align_a = alignment(g.b, g.ldb, g.stride_b, g.batch, elem);  // cuBLAS's A is our B
  const uint32_t align_b = alignment(g.a, g.lda, g.stride_a, g.batch, elem);
  const uint32_t align_cd = alignment(g.c, g.ldc, g.stride_c, g.batch, elem);
  MT_LT_TRY(lt().cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                      sizeof(align_a)),
            "alignment of A");
  MT_LT_TRY(lt().cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                      sizeof(align_b)),
            "alignment of B");
  MT_LT_TRY(lt().cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_cd,
                                                      sizeof(align_cd)),
            "alignment of C");
  MT_LT_TRY(lt().cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_cd,
                                                      sizeof(align_cd)),
            "alignment of D");
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  MT_LT_TRY(lt().cublasLtMatmulAlgoGetHeuristic(h, d.op, d.a, d.b, d.c, d.c, d.pref, 1, &heur, &found), "heuristic");
  if (found == 0) return rt::report(rt::Status::InvalidValue, "gemm: cuBLASLt found no algorithm for this problem");

  const float af = static_cast<float>(g.alpha), bf = static_cast<float>(g.beta);
  const void* alpha = dbl ? static_cast<const void*>(&g.alpha) : static_cast<const void*>(&af);
  const void* beta = dbl ? static_cast<const void*>(&g.beta) : static_cast<const void*>(&bf);
  MT_LT_TRY(lt().cublasLtMatmul(h, d.op, alpha, g.b, d.a, g.a, d.b, beta, g.c, d.c, g.c, d.c, &heur.algo, g.workspace,
                                ws, native(stream)),
            "cublasLtMatmul");
  return rt::Status::Success;
}

} // namespace mytorch::cuda
