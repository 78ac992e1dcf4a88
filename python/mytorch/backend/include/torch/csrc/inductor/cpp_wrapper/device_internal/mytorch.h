// The C shims of the mytorch device for the C++ wrapper Inductor generates (torch._inductor.config.cpp_wrapper,
// and AOTInductor), included through cpp_wrapper/mytorch.h or aoti_include/mytorch.h, as torch's
// device_internal/<device>.h are (python/mytorch/backend/inductor.py, Note [Inductor's C++ wrapper on mytorch]).
//
// The generated kernels are C++ over host memory on the sim runtime, as the CPU's are, so the CPU's wrapper
// support applies. Torch generates C shims (aoti_torch_<device>_<op>) for its own devices only; the wrapper runs
// every ATen fallback op through the dispatcher instead, and the extern kernels Inductor calls by shim name (the
// GEMMs and the convolution) are defined here, through the dispatcher too, so they run mytorch's kernels; so is
// the fused attention, whose integer outputs the run-time lookup cannot return. The wrapper uses a shim for
// exactly the names this file defines (inductor.py reads them from it).
#pragma once

#include <ATen/ops/_int_mm.h>
#include <ATen/ops/_scaled_dot_product_fused_attention_overrideable.h>
#include <ATen/ops/_scaled_dot_product_fused_attention_overrideable_backward.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/mm.h>
#include <torch/csrc/inductor/aoti_torch/utils.h>

namespace mytorch_cpp_wrapper {
inline at::Tensor& T(AtenTensorHandle h) { return *torch::aot_inductor::tensor_handle_to_tensor_pointer(h); }
inline at::Tensor orUndefined(AtenTensorHandle h) { return h ? T(h) : at::Tensor(); }
inline AtenTensorHandle handle(at::Tensor t) { return torch::aot_inductor::new_tensor_handle(std::move(t)); }
}  // namespace mytorch_cpp_wrapper

inline AOTITorchError aoti_torch_mytorch_mm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2) {
  using mytorch_cpp_wrapper::T;
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({ at::mm_out(T(out), T(self), T(mat2)); });
}

inline AOTITorchError aoti_torch_mytorch__int_mm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2) {
  using mytorch_cpp_wrapper::T;
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({ at::_int_mm_out(T(out), T(self), T(mat2)); });
}

inline AOTITorchError aoti_torch_mytorch_bmm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat2) {
  using mytorch_cpp_wrapper::T;
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({ at::bmm_out(T(out), T(self), T(mat2)); });
}

inline AOTITorchError aoti_torch_mytorch_addmm_out(AtenTensorHandle out, AtenTensorHandle self, AtenTensorHandle mat1,
                                                   AtenTensorHandle mat2, double beta, double alpha) {
  using mytorch_cpp_wrapper::T;
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({ at::addmm_out(T(out), T(self), T(mat1), T(mat2), beta, alpha); });
}

inline AOTITorchError aoti_torch_mytorch_baddbmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                     AtenTensorHandle batch1, AtenTensorHandle batch2, double beta,
                                                     double alpha) {
  using mytorch_cpp_wrapper::T;
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({ at::baddbmm_out(T(out), T(self), T(batch1), T(batch2), beta, alpha); });
}

inline AOTITorchError aoti_torch_mytorch_convolution(AtenTensorHandle input, AtenTensorHandle weight,
                                                     AtenTensorHandle* bias, const int64_t* stride, int64_t stride_len_,
                                                     const int64_t* padding, int64_t padding_len_,
                                                     const int64_t* dilation, int64_t dilation_len_, int32_t transposed,
                                                     const int64_t* output_padding, int64_t output_padding_len_,
                                                     int64_t groups, AtenTensorHandle* ret0) {
  using mytorch_cpp_wrapper::T;
  using torch::aot_inductor::pointer_to_list;
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
    *ret0 = torch::aot_inductor::new_tensor_handle(at::convolution(
        T(input), T(weight), bias ? std::optional<at::Tensor>(T(*bias)) : std::nullopt, pointer_to_list(stride, stride_len_),
        pointer_to_list(padding, padding_len_), pointer_to_list(dilation, dilation_len_), transposed != 0,
        pointer_to_list(output_padding, output_padding_len_), groups));
  });
}

inline AOTITorchError aoti_torch_mytorch__scaled_dot_product_fused_attention_overrideable(
    AtenTensorHandle query, AtenTensorHandle key, AtenTensorHandle value, AtenTensorHandle* attn_bias,
    double dropout_p, int32_t is_causal, int32_t return_debug_mask, double* scale, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1, AtenTensorHandle* ret2, AtenTensorHandle* ret3, int64_t* ret4, int64_t* ret5,
    AtenTensorHandle* ret6, AtenTensorHandle* ret7, AtenTensorHandle* ret8) {
  using namespace mytorch_cpp_wrapper;
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
    auto r = at::_scaled_dot_product_fused_attention_overrideable(
        T(query), T(key), T(value), attn_bias ? std::optional<at::Tensor>(T(*attn_bias)) : std::nullopt, dropout_p,
        is_causal != 0, return_debug_mask != 0, scale ? std::optional<double>(*scale) : std::nullopt);
    *ret0 = handle(std::get<0>(r));
    *ret1 = handle(std::get<1>(r));
    if (ret2) *ret2 = handle(std::get<2>(r));
    if (ret3) *ret3 = handle(std::get<3>(r));
    *ret4 = std::get<4>(r).expect_int();
    *ret5 = std::get<5>(r).expect_int();
    *ret6 = handle(std::get<6>(r));
    *ret7 = handle(std::get<7>(r));
    if (ret8) *ret8 = handle(std::get<8>(r));
  });
}

inline AOTITorchError aoti_torch_mytorch__scaled_dot_product_fused_attention_overrideable_backward(
    AtenTensorHandle grad_out, AtenTensorHandle query, AtenTensorHandle key, AtenTensorHandle value,
    AtenTensorHandle attn_bias, const int32_t* grad_input_mask, int64_t grad_input_mask_len_, AtenTensorHandle out,
    AtenTensorHandle logsumexp, AtenTensorHandle cum_seq_q, AtenTensorHandle cum_seq_k, int64_t max_q, int64_t max_k,
    double dropout_p, int32_t is_causal, AtenTensorHandle philox_seed, AtenTensorHandle philox_offset, double* scale,
    AtenTensorHandle* ret0, AtenTensorHandle* ret1, AtenTensorHandle* ret2, AtenTensorHandle* ret3) {
  using namespace mytorch_cpp_wrapper;
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
    TORCH_CHECK(grad_input_mask_len_ == 4, "fused attention backward: expected 4 gradient flags, but got ",
                grad_input_mask_len_);
    std::array<bool, 4> mask{grad_input_mask[0] != 0, grad_input_mask[1] != 0, grad_input_mask[2] != 0,
                             grad_input_mask[3] != 0};
    auto r = at::_scaled_dot_product_fused_attention_overrideable_backward(
        T(grad_out), T(query), T(key), T(value), orUndefined(attn_bias), mask, T(out), T(logsumexp),
        orUndefined(cum_seq_q), orUndefined(cum_seq_k), max_q, max_k, dropout_p, is_causal != 0, T(philox_seed),
        T(philox_offset), scale ? std::optional<double>(*scale) : std::nullopt);
    if (ret0) *ret0 = handle(std::get<0>(r));
    if (ret1) *ret1 = handle(std::get<1>(r));
    if (ret2) *ret2 = handle(std::get<2>(r));
    if (ret3) *ret3 = handle(std::get<3>(r));
  });
}
