// The emulated cuBLASLt (include/cublasLt.h): a reference GEMM in stream order that refuses what the real
// library refuses, so that kernels/cuda/gemm.cu's use of it is checked without a GPU.
//
// Note [What the emulated cuBLASLt checks]
//  - the handle is used on the device it was created on, with a stream of that device;
//  - layouts: ld >= rows, shapes that agree with the transposes, types that agree with the compute type;
//  - alignment: an algorithm from cublasLtMatmulAlgoGetHeuristic assumes every A, B, C and D pointer (each
//    batch's too) is aligned to the preference's minimum (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, 256 bytes
//    unless set), as the documentation says; a matmul given less gets CUBLAS_STATUS_NOT_SUPPORTED;
//  - epilogues: a BIAS epilogue needs a bias pointer in device memory of D's type;
//  - every operand, the bias and the workspace lie in a live allocation of the handle's device (without peer
//    access another device's memory is an illegal address).
// The arithmetic accumulates in double and rounds once; the GELU epilogue is the tanh approximation, as
// cuBLASLt's.
#include <cmath>
#include <string>
#include <vector>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "cublasLt.h"
#include "internal.h"

struct EmuLtContext { int device; };
struct EmuLtMatmulDesc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  cudaDataType_t bias_type = CUDA_R_32F;
  bool bias_type_set = false;
};
struct EmuLtLayout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};
struct EmuLtPreference {
  uint64_t workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D
};

namespace mytorch::emu {
namespace {
thread_local std::string t_reason;

cublasStatus_t refuse(cublasStatus_t s, std::string why) {
  t_reason = std::move(why);
  return s;
}

size_t elem_size(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    case CUDA_R_64F: return 8;
    default: return 4;
  }
}

double load(const void* base, cudaDataType_t t, int64_t i) {
  switch (t) {
    case CUDA_R_16F: return static_cast<float>(static_cast<const c10::Half*>(base)[i]);
    case CUDA_R_16BF: return static_cast<float>(static_cast<const c10::BFloat16*>(base)[i]);
    case CUDA_R_64F: return static_cast<const double*>(base)[i];
    default: return static_cast<const float*>(base)[i];
  }
}

void store(void* base, cudaDataType_t t, int64_t i, double v) {
  switch (t) {
    case CUDA_R_16F: static_cast<c10::Half*>(base)[i] = static_cast<float>(v); break;
    case CUDA_R_16BF: static_cast<c10::BFloat16*>(base)[i] = static_cast<float>(v); break;
    case CUDA_R_64F: static_cast<double*>(base)[i] = v; break;
    default: static_cast<float*>(base)[i] = static_cast<float>(v); break;
  }
}

const char* kName[4] = {"A", "B", "C", "D"};

// Bytes the layout spans from its base pointer.
uint64_t span(const EmuLtLayout& l) {
  if (l.rows == 0 || l.cols == 0) return 0;
  const uint64_t one = ((l.cols - 1) * static_cast<uint64_t>(l.ld) + l.rows) * elem_size(l.type);
  return one + static_cast<uint64_t>(l.batch - 1) * static_cast<uint64_t>(l.stride) * elem_size(l.type);
}

}  // namespace

const char* cublaslt_last_reason() { return t_reason.c_str(); }

}  // namespace mytorch::emu

using mytorch::emu::refuse;

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new EmuLtContext{mytorch::emu::current_device()};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  *desc = new EmuLtMatmulDesc{compute, scale};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

namespace {
template <typename T>
cublasStatus_t read_attr(T* out, const void* buf, size_t size) {
  if (size != sizeof(T)) return refuse(CUBLAS_STATUS_INVALID_VALUE, "attribute buffer of the wrong size");
  std::memcpy(out, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}
}  // namespace

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return read_attr(&d->ta, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return read_attr(&d->tb, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return read_attr(&d->epilogue, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return read_attr(&d->bias, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: d->bias_type_set = true; return read_attr(&d->bias_type, buf, size);
  }
  return refuse(CUBLAS_STATUS_INVALID_VALUE, "unknown matmul descriptor attribute");
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  *layout = new EmuLtLayout{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return read_attr(&l->batch, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return read_attr(&l->stride, buf, size);
  }
  return refuse(CUBLAS_STATUS_INVALID_VALUE, "unknown layout attribute");
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = new EmuLtPreference();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size) {
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return read_attr(&p->workspace, buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return read_attr(&p->align[0], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return read_attr(&p->align[1], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return read_attr(&p->align[2], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return read_attr(&p->align[3], buf, size);
  }
  return refuse(CUBLAS_STATUS_INVALID_VALUE, "unknown preference attribute");
}

namespace {
cublasStatus_t check_problem(const EmuLtMatmulDesc& d, const EmuLtLayout* l[4]) {
  for (int i = 0; i < 4; ++i) {
    if (l[i]->ld < static_cast<int64_t>(l[i]->rows) || l[i]->ld < 1)
      return refuse(CUBLAS_STATUS_INVALID_VALUE, std::string("leading dimension of ") + mytorch::emu::kName[i] + " (" +
                                                     std::to_string(l[i]->ld) + ") is below its rows (" +
                                                     std::to_string(l[i]->rows) + ")");
    if (l[i]->type != l[3]->type) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "operands of different types");
  }
  const bool dbl = l[3]->type == CUDA_R_64F;
  if (dbl != (d.compute == CUBLAS_COMPUTE_64F))
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "compute type does not fit the data type");
  const uint64_t m = d.ta == CUBLAS_OP_N ? l[0]->rows : l[0]->cols, ka = d.ta == CUBLAS_OP_N ? l[0]->cols : l[0]->rows;
  const uint64_t kb = d.tb == CUBLAS_OP_N ? l[1]->rows : l[1]->cols, n = d.tb == CUBLAS_OP_N ? l[1]->cols : l[1]->rows;
  if (ka != kb || m != l[3]->rows || n != l[3]->cols || l[2]->rows != l[3]->rows || l[2]->cols != l[3]->cols)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "operand shapes do not agree");
  const int32_t batch = l[3]->batch;
  for (int i = 0; i < 3; ++i)
    if (l[i]->batch != batch) return refuse(CUBLAS_STATUS_INVALID_VALUE, "batch counts differ");
  const bool bias = d.epilogue == CUBLASLT_EPILOGUE_BIAS || d.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS ||
                    d.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
  if (bias && d.bias == nullptr) return refuse(CUBLAS_STATUS_INVALID_VALUE, "a BIAS epilogue without a bias pointer");
  if (bias && d.bias_type_set && d.bias_type != l[3]->type)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "bias type differs from D's type");
  return CUBLAS_STATUS_SUCCESS;
}
}  // namespace

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t* results, int* found) {
  *found = 0;
  if (handle == nullptr || requested < 1) return refuse(CUBLAS_STATUS_INVALID_VALUE, "no handle or no result slot");
  const EmuLtLayout* l[4] = {a, b, c, d};
  if (cublasStatus_t s = check_problem(*desc, l); s != CUBLAS_STATUS_SUCCESS) return s;
  std::memset(&results[0], 0, sizeof(results[0]));
  // The algorithm remembers the alignment it was chosen under; the reference needs no workspace.
  for (int i = 0; i < 4; ++i) results[0].algo.data[i] = std::min<uint32_t>(pref->align[i], 256);
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t adesc, const void* B, cublasLtMatrixLayout_t bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t cdesc, void* D,
                              cublasLtMatrixLayout_t ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  using namespace mytorch::emu;
  if (handle == nullptr || algo == nullptr) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "no handle or no algorithm");
  if (handle->device != current_device())
    return refuse(CUBLAS_STATUS_EXECUTION_FAILED, "the handle was created on device " + std::to_string(handle->device) +
                                                      " but device " + std::to_string(current_device()) +
                                                      " is current");
  const EmuLtLayout* l[4] = {adesc, bdesc, cdesc, ddesc};
  if (cublasStatus_t s = check_problem(*desc, l); s != CUBLAS_STATUS_SUCCESS) return s;
  const void* ptr[4] = {A, B, C, D};
  for (int i = 0; i < 4; ++i) {
    const uint64_t need = algo->data[i] ? algo->data[i] : 256;
    const uint64_t stride_bytes = static_cast<uint64_t>(l[i]->stride) * elem_size(l[i]->type);
    for (int32_t k = 0; k < l[i]->batch; ++k) {
      const uint64_t addr = reinterpret_cast<uint64_t>(ptr[i]) + static_cast<uint64_t>(k) * stride_bytes;
      if (addr % need != 0)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                      std::string("matrix ") + kName[i] + (k ? " of batch " + std::to_string(k) : std::string()) +
                          " at " + std::to_string(addr) + " is not aligned to the " + std::to_string(need) +
                          " bytes its algorithm was chosen for (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_" + kName[i] +
                          "_BYTES)");
      if (k > 0 && stride_bytes == 0) break;
    }
    const int owner = device_of_range(ptr[i], span(*l[i]));
    if (owner < 0)
      return refuse(CUBLAS_STATUS_INVALID_VALUE,
                    std::string("matrix ") + kName[i] + " is not inside one live device allocation");
    if (owner != handle->device)  // without peer access, another device's memory is an illegal address
      return refuse(CUBLAS_STATUS_EXECUTION_FAILED,
                    std::string("matrix ") + kName[i] + " is memory of device " + std::to_string(owner) +
                        " but the handle and current device are " + std::to_string(handle->device));
  }
  const bool bias = desc->epilogue == CUBLASLT_EPILOGUE_BIAS || desc->epilogue == CUBLASLT_EPILOGUE_RELU_BIAS ||
                    desc->epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
  if (bias && device_of_range(desc->bias, l[3]->rows * elem_size(l[3]->type)) != handle->device)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "the bias is not inside one live device allocation");
  if (workspace_bytes > 0 && device_of_range(workspace, workspace_bytes) != handle->device)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "the workspace is not inside one live device allocation");

  const bool dbl = ddesc->type == CUDA_R_64F;
  const double al = dbl ? *static_cast<const double*>(alpha) : *static_cast<const float*>(alpha);
  const double be = dbl ? *static_cast<const double*>(beta) : *static_cast<const float*>(beta);
  const EmuLtMatmulDesc d = *desc;
  const EmuLtLayout la = *adesc, lb = *bdesc, lc = *cdesc, ld = *ddesc;
  cudaError_t e = submit(stream, [=] {
    const int64_t m = ld.rows, n = ld.cols, k = d.ta == CUBLAS_OP_N ? la.cols : la.rows;
    for (int32_t bi = 0; bi < ld.batch; ++bi) {
      const int64_t oa = bi * la.stride, ob = bi * lb.stride, oc = bi * lc.stride, od = bi * ld.stride;
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t i = 0; i < m; ++i) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p) {
            const double x = load(A, la.type, oa + (d.ta == CUBLAS_OP_N ? i + p * la.ld : p + i * la.ld));
            const double y = load(B, lb.type, ob + (d.tb == CUBLAS_OP_N ? p + j * lb.ld : j + p * lb.ld));
            acc += x * y;
          }
          double v = al * acc + (be != 0 ? be * load(C, lc.type, oc + i + j * lc.ld) : 0.0);
          if (bias) v += load(d.bias, ld.type, i);
          if (d.epilogue == CUBLASLT_EPILOGUE_RELU || d.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS) v = v > 0 ? v : 0;
          if (d.epilogue == CUBLASLT_EPILOGUE_GELU || d.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS)
            v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
          store(D, ld.type, od + i + j * ld.ld, v);
        }
      }
    }
  });
  if (e != cudaSuccess) return refuse(CUBLAS_STATUS_EXECUTION_FAILED, std::string("launch: ") + cudaGetErrorName(e));
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasLtGetStatusString(cublasStatus_t status) {
  const char* name = "CUBLAS_STATUS_UNKNOWN";
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: name = "CUBLAS_STATUS_SUCCESS"; break;
    case CUBLAS_STATUS_NOT_INITIALIZED: name = "CUBLAS_STATUS_NOT_INITIALIZED"; break;
    case CUBLAS_STATUS_INVALID_VALUE: name = "CUBLAS_STATUS_INVALID_VALUE"; break;
    case CUBLAS_STATUS_EXECUTION_FAILED: name = "CUBLAS_STATUS_EXECUTION_FAILED"; break;
    case CUBLAS_STATUS_NOT_SUPPORTED: name = "CUBLAS_STATUS_NOT_SUPPORTED"; break;
  }
  // The emulator appends why (the real library only logs it).
  thread_local std::string text;
  text = std::string(name) + " (emu: " + mytorch::emu::cublaslt_last_reason() + ")";
  return text.c_str();
}
