// What the C++ wrapper of a mytorch graph includes in cpp_wrapper mode (torch/csrc/inductor/cpp_wrapper/<device>.h).
#pragma once

#include <torch/csrc/inductor/cpp_wrapper/common.h>
#include <torch/csrc/inductor/cpp_wrapper/device_internal/mytorch.h>
