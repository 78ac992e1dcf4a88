// Op trace: which operators ran with mytorch inputs, at any nesting depth and on any thread (backward
// included). Used by the alignment suite to attribute cases to native kernels.
#pragma once

#include <map>
#include <string>

namespace mytorch {

void startOpTrace();                          // clears and starts recording
std::map<std::string, int64_t> stopOpTrace(); // "aten::add.Tensor" -> calls since start

} // namespace mytorch
