// CUDA elementwise launcher: routes each op to the translation unit of its group (the pointwise table's group
// column; Note [Op tables] in ew_ops.h).
#include "elementwise.cuh"

namespace mytorch::cuda {

rt::Status elementwise(const ElementwiseArgs& a, rt::Stream s) {
  switch (ew_group(a.op)) {
#define MT_EW_GROUP_CASE(g) \
  case EwGroup::g: return ew_group_launch<EwGroup::g>(a, s);
    MT_EW_GROUPS(MT_EW_GROUP_CASE)
#undef MT_EW_GROUP_CASE
  }
  return rt::report(rt::Status::InvalidValue, "elementwise: unknown op group");
}

} // namespace mytorch::cuda
