// The radix sort and radix select of cuda/sort_radix.cu, for cuda/sort.cu's launcher (Note [CUDA radix sort and
// select] in sort.h). Both take the workspace SortArgs::scratch laid out by `plan` (sort_plan).
#pragma once

#include "mytorch/launch.h"
#include "mytorch/sort.h"

namespace mytorch::cuda {

// Sorts a's slices (length > kSharedSortMax) into a.values / a.indices (all of each slice).
rt::Status radix_sort(const SortArgs& a, const SortPlan& plan, rt::Stream stream);
// The k first pairs of each slice in the sort's order, compacted in element order into the plan's sel_values and
// sel_indices ([slices, k], not yet sorted).
rt::Status radix_select(const SortArgs& a, const SortPlan& plan, rt::Stream stream);

} // namespace mytorch::cuda
