// What the C++ wrapper of a mytorch graph includes in AOTInductor (torch/csrc/inductor/aoti_include/<device>.h).
#pragma once

#include <torch/csrc/inductor/aoti_include/common.h>
#include <torch/csrc/inductor/cpp_wrapper/device_internal/mytorch.h>
