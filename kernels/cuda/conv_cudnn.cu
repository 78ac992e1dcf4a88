// CUDA convolutions through cuDNN (Note [Convolution family]): forward, backward data and backward filter
// with cuDNN's convolution API. libcudnn.so.9 is opened at first use (dynlib.h; torch's CUDA wheel has usually
// loaded it already), so the extension does not link cuDNN and a CUDA build imports without it; when it
// cannot be loaded the launcher reports Unavailable and the glue takes im2col + GEMM.
#include <cudnn.h>

#include <string>

#include "common.cuh"
#include "handle_pool.h"
#include "mytorch/conv.h"
#include "mytorch/dynlib.h"

namespace mytorch::cuda {
namespace {

// clang-format off: a list of the library's functions, one X-macro entry each
#define MT_DNN_FUNCS(_)                                                                                        \
  _(cudnnCreate) _(cudnnSetStream) _(cudnnGetErrorString) _(cudnnCreateTensorDescriptor)                        \
  _(cudnnSetTensor4dDescriptor) _(cudnnDestroyTensorDescriptor) _(cudnnCreateFilterDescriptor)                  \
  _(cudnnSetFilter4dDescriptor) _(cudnnDestroyFilterDescriptor) _(cudnnCreateConvolutionDescriptor)             \
  _(cudnnSetConvolution2dDescriptor) _(cudnnSetConvolutionGroupCount) _(cudnnSetConvolutionMathType)            \
  _(cudnnDestroyConvolutionDescriptor) _(cudnnGetConvolutionForwardAlgorithm_v7)                                \
  _(cudnnSetTensorNdDescriptor) _(cudnnSetFilterNdDescriptor) _(cudnnSetConvolutionNdDescriptor)                \
  _(cudnnGetConvolutionForwardWorkspaceSize) _(cudnnConvolutionForward)                                         \
  _(cudnnGetConvolutionBackwardDataAlgorithm_v7) _(cudnnGetConvolutionBackwardDataWorkspaceSize)                \
  _(cudnnConvolutionBackwardData) _(cudnnGetConvolutionBackwardFilterAlgorithm_v7)                              \
  _(cudnnGetConvolutionBackwardFilterWorkspaceSize) _(cudnnConvolutionBackwardFilter)
// clang-format on

MT_DYNLIB(Dnn, dnn, MT_DNN_FUNCS, "cuDNN", "", "libcudnn.so.9", "libcudnn.so")

rt::Status fail(const char* what, cudnnStatus_t s) {
  std::string msg = std::string("convolution: ") + what + " failed: " + dnn().cudnnGetErrorString(s);
  return rt::report(rt::Status::Unknown, msg.c_str());
}

#define MT_DNN_TRY(call, what)                             \
  do {                                                     \
    cudnnStatus_t s_ = (call);                             \
    if (s_ != CUDNN_STATUS_SUCCESS) return fail(what, s_); \
  } while (0)

// One handle per (host thread, device): handle_pool.h.
cudnnHandle_t handle_for(int device, rt::Status* st) {
  cudnnHandle_t h = nullptr;
  *st = HandlePool<cudnnHandle_t>::get(device, &h, [](cudnnHandle_t* made) {
    cudnnStatus_t s = dnn().cudnnCreate(made);
    return s == CUDNN_STATUS_SUCCESS ? rt::Status::Success : fail("cudnnCreate", s);
  });
  return *st == rt::Status::Success ? h : nullptr;
}

cudnnDataType_t dnn_type(DType t) {
  switch (t) {
    case DType::Half: return CUDNN_DATA_HALF;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    case DType::Double: return CUDNN_DATA_DOUBLE;
    default: return CUDNN_DATA_FLOAT;
  }
}

struct Descs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~Descs() {
    if (x) dnn().cudnnDestroyTensorDescriptor(x);
    if (y) dnn().cudnnDestroyTensorDescriptor(y);
    if (w) dnn().cudnnDestroyFilterDescriptor(w);
    if (conv) dnn().cudnnDestroyConvolutionDescriptor(conv);
  }
};

// A 3-D convolution's descriptors: contiguous NCDHW tensors, an NCDHW filter, the geometry per spatial dim.
rt::Status describe_volumetric(const ConvArgs& a, Descs& d, cudnnDataType_t t, cudnnDataType_t compute) {
  const Im2ColArgs& g = a.geom;
  auto tensor = [&](cudnnTensorDescriptor_t desc, int64_t channels, int64_t z, int64_t y, int64_t x) {
    const int dims[5] = {int(g.n), int(channels), int(z), int(y), int(x)};
    const int strides[5] = {int(channels * z * y * x), int(z * y * x), int(y * x), int(x), 1};
    return dnn().cudnnSetTensorNdDescriptor(desc, t, 5, dims, strides);
  };
  MT_DNN_TRY(dnn().cudnnCreateTensorDescriptor(&d.x), "tensor descriptor");
  MT_DNN_TRY(tensor(d.x, g.c, g.id, g.ih, g.iw), "input layout");
  MT_DNN_TRY(dnn().cudnnCreateTensorDescriptor(&d.y), "tensor descriptor");
  MT_DNN_TRY(tensor(d.y, a.cout, g.od, g.oh, g.ow), "output layout");
  const int filter[5] = {int(a.cout), int(g.c / a.groups), g.kd, g.kh, g.kw};
  MT_DNN_TRY(dnn().cudnnCreateFilterDescriptor(&d.w), "filter descriptor");
  MT_DNN_TRY(dnn().cudnnSetFilterNdDescriptor(d.w, t, CUDNN_TENSOR_NCHW, 5, filter), "filter layout");
  const int pad[3] = {g.pd, g.ph, g.pw}, stride[3] = {g.sd, g.sh, g.sw}, dilation[3] = {g.dd, g.dh, g.dw};
  MT_DNN_TRY(dnn().cudnnCreateConvolutionDescriptor(&d.conv), "convolution descriptor");
  MT_DNN_TRY(dnn().cudnnSetConvolutionNdDescriptor(d.conv, 3, pad, stride, dilation, CUDNN_CROSS_CORRELATION, compute),
             "convolution geometry");
  return rt::Status::Success;
}

// A 1-D or 2-D convolution's descriptors: NCHW tensors and filter (1-D as height 1).
rt::Status describe_planar(const ConvArgs& a, Descs& d, cudnnDataType_t t, cudnnDataType_t compute) {
  const Im2ColArgs& g = a.geom;
  MT_DNN_TRY(dnn().cudnnCreateTensorDescriptor(&d.x), "tensor descriptor");
  MT_DNN_TRY(dnn().cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, t, int(g.n), int(g.c), int(g.ih), int(g.iw)),
             "input layout");
  MT_DNN_TRY(dnn().cudnnCreateTensorDescriptor(&d.y), "tensor descriptor");
  MT_DNN_TRY(dnn().cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NCHW, t, int(g.n), int(a.cout), int(g.oh), int(g.ow)),
             "output layout");
  MT_DNN_TRY(dnn().cudnnCreateFilterDescriptor(&d.w), "filter descriptor");
  MT_DNN_TRY(dnn().cudnnSetFilter4dDescriptor(d.w, t, CUDNN_TENSOR_NCHW, int(a.cout), int(g.c / a.groups), g.kh, g.kw),
             "filter layout");
  MT_DNN_TRY(dnn().cudnnCreateConvolutionDescriptor(&d.conv), "convolution descriptor");
  MT_DNN_TRY(dnn().cudnnSetConvolution2dDescriptor(d.conv, g.ph, g.pw, g.sh, g.sw, g.dh, g.dw, CUDNN_CROSS_CORRELATION,
                                                   compute),
             "convolution geometry");
  return rt::Status::Success;
}

rt::Status describe(const ConvArgs& a, Descs& d) {
  const Im2ColArgs& g = a.geom;
  const cudnnDataType_t t = dnn_type(g.dtype);
  const cudnnDataType_t compute = g.dtype == DType::Double ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  const rt::Status st = g.volumetric() ? describe_volumetric(a, d, t, compute) : describe_planar(a, d, t, compute);
  if (st != rt::Status::Success) return st;
  MT_DNN_TRY(dnn().cudnnSetConvolutionGroupCount(d.conv, int(a.groups)), "group count");
  const cudnnMathType_t math = g.dtype == DType::Float    ? (a.allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH)
                               : g.dtype == DType::Double ? CUDNN_DEFAULT_MATH
                                                          : CUDNN_TENSOR_OP_MATH;
  MT_DNN_TRY(dnn().cudnnSetConvolutionMathType(d.conv, math), "math type");
  return rt::Status::Success;
}

// The first heuristic choice that succeeds (and is deterministic when asked).
template <typename Perf>
int pick(const Perf* perf, int count, bool deterministic) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    return i;
  }
  return -1;
}

} // namespace

rt::Status convolution(const ConvArgs& a, size_t* workspace_bytes, rt::Stream stream) {
  if (!dnn().error.empty()) return rt::report(rt::Status::Unavailable, dnn().error.c_str());
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return check_launch("convolution");
  rt::Status st = rt::Status::Success;
  cudnnHandle_t h = handle_for(device, &st);
  if (!h) return st;
  MT_DNN_TRY(dnn().cudnnSetStream(h, native(stream)), "cudnnSetStream");
  Descs d;
  if ((st = describe(a, d)) != rt::Status::Success) return st;
  const bool dbl = a.geom.dtype == DType::Double;
  const float one_f = 1.f, zero_f = 0.f;
  const double one_d = 1.0, zero_d = 0.0;
  const void* one = dbl ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
  const void* zero = dbl ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
  constexpr int kAlgos = 16;
  int returned = 0;
  size_t ws = 0;
  switch (a.pass) {
    case ConvPass::Forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[kAlgos];
      MT_DNN_TRY(dnn().cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, kAlgos, &returned, perf),
                 "forward heuristic");
      const int i = pick(perf, returned, a.deterministic);
      if (i < 0) return rt::report(rt::Status::InvalidValue, "convolution: cuDNN offers no forward algorithm");
      MT_DNN_TRY(dnn().cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, perf[i].algo, &ws),
                 "forward workspace");
      if (workspace_bytes) {
        *workspace_bytes = ws;
        return rt::Status::Success;
      }
      MT_DNN_TRY(dnn().cudnnConvolutionForward(h, one, d.x, a.x, d.w, a.w, d.conv, perf[i].algo, a.workspace,
                                               a.workspace_bytes, zero, d.y, a.out),
                 "cudnnConvolutionForward");
      break;
    }
    case ConvPass::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[kAlgos];
      MT_DNN_TRY(dnn().cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, kAlgos, &returned, perf),
                 "backward-data heuristic");
      const int i = pick(perf, returned, a.deterministic);
      if (i < 0) return rt::report(rt::Status::InvalidValue, "convolution: cuDNN offers no backward-data algorithm");
      MT_DNN_TRY(dnn().cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, perf[i].algo, &ws),
                 "backward-data workspace");
      if (workspace_bytes) {
        *workspace_bytes = ws;
        return rt::Status::Success;
      }
      MT_DNN_TRY(dnn().cudnnConvolutionBackwardData(h, one, d.w, a.w, d.y, a.dy, d.conv, perf[i].algo, a.workspace,
                                                    a.workspace_bytes, zero, d.x, a.out),
                 "cudnnConvolutionBackwardData");
      break;
    }
    case ConvPass::BackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[kAlgos];
      MT_DNN_TRY(dnn().cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, kAlgos, &returned, perf),
                 "backward-filter heuristic");
      const int i = pick(perf, returned, a.deterministic);
      if (i < 0) return rt::report(rt::Status::InvalidValue, "convolution: cuDNN offers no backward-filter algorithm");
      MT_DNN_TRY(dnn().cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, perf[i].algo, &ws),
                 "backward-filter workspace");
      if (workspace_bytes) {
        *workspace_bytes = ws;
        return rt::Status::Success;
      }
      MT_DNN_TRY(dnn().cudnnConvolutionBackwardFilter(h, one, d.x, a.x, d.y, a.dy, d.conv, perf[i].algo, a.workspace,
                                                      a.workspace_bytes, zero, d.w, a.out),
                 "cudnnConvolutionBackwardFilter");
      break;
    }
  }
  return rt::Status::Success;
}

} // namespace mytorch::cuda
