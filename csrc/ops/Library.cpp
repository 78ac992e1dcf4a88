// mytorch's own operators (torch.ops.mytorch.*): the one TORCH_LIBRARY(mytorch, m) block, every schema of the
// namespace in one list, as aten's are in native_functions.yaml. Their device kernels are registered beside their
// glue in this folder (TORCH_LIBRARY_IMPL(mytorch, PrivateUse1, m): AddNorm.cpp, FusedLlm.cpp, Moe.cpp, and
// PointwiseOps.cpp for the pointwise table's `Op` rows); their autograd, fake kernels for torch.compile and CPU
// references are in python/mytorch/ops/, each defined once from the schema here (Note [A fused op, defined once] in
// python/mytorch/ops/_define.py; docs/contributing.md, "Adding a fused op").
#include <torch/library.h>

TORCH_LIBRARY(mytorch, m) {
  // the residual add fused into LayerNorm / RMSNorm (AddNorm.cpp; python/mytorch/ops/norm.py)
  m.def(
      "add_layer_norm(Tensor x, Tensor residual, int[] normalized_shape, Tensor? weight, Tensor? bias, float eps) "
      "-> (Tensor y, Tensor mean, Tensor rstd, Tensor sum)");
  m.def(
      "add_rms_norm(Tensor x, Tensor residual, int[] normalized_shape, Tensor? weight, float? eps) "
      "-> (Tensor y, Tensor rstd, Tensor sum)");
  // the fused LLM ops (FusedLlm.cpp; python/mytorch/ops/glu.py, rope.py, cross_entropy.py)
  m.def("glu(Tensor gate, Tensor? up, str activation) -> Tensor");
  m.def("glu_backward(Tensor grad, Tensor gate, Tensor? up, str activation) -> Tensor");
  m.def(
      "rope(Tensor x, Tensor cos, Tensor sin, Tensor? position_ids, bool interleaved, int rotary_dim, bool inverse) "
      "-> Tensor");
  m.def(
      "rope_(Tensor(a!) x, Tensor cos, Tensor sin, Tensor? position_ids, bool interleaved, int rotary_dim) "
      "-> Tensor(a!)");
  m.def(
      "cross_entropy_rows_(Tensor(a!) logits, Tensor target, Tensor? divisor, Tensor? row_scale, int ignore_index, "
      "float label_smoothing, float softcap, float z_loss, float grad_scale, bool grad) -> (Tensor loss, Tensor lse)");
  // GPT-OSS's clamped SwiGLU and its gradients: pointwise table rows (PointwiseOps.cpp; python/mytorch/ops/glu.py)
  m.def("clamped_swiglu(Tensor gate, Tensor up, float alpha=1.702, float limit=7.0) -> Tensor");
  m.def("clamped_swiglu_grad_gate(Tensor grad, Tensor gate, Tensor up, float alpha, float limit) -> Tensor");
  m.def("clamped_swiglu_grad_up(Tensor grad, Tensor gate, Tensor up, float alpha, float limit) -> Tensor");
  // mixture-of-experts routing (Moe.cpp; python/mytorch/ops/moe.py)
  m.def(
      "moe_topk(Tensor logits, int k, str score, bool renormalize, Tensor? expert_bias, int n_group, int topk_group, "
      "int group_top, float scaling) -> (Tensor weights, Tensor ids)");
  m.def(
      "moe_topk_backward(Tensor grad_weights, Tensor logits, Tensor ids, int k, str score, bool renormalize, "
      "float scaling) -> Tensor");
  m.def("moe_combine(Tensor rows, Tensor pos, Tensor? weights) -> Tensor");
  m.def(
      "moe_combine_backward(Tensor grad, Tensor rows, Tensor pos, Tensor? weights, bool rows_grad, bool weights_grad) "
      "-> (Tensor, Tensor)");
}
