// What code compiled by Inductor (torch.compile) calls per buffer and per kernel launch, bound without pybind11's
// argument conversion (python/mytorch/backend/inductor.py, Note [Inductor on mytorch]):
// - _empty_strided_mytorch(size, stride, dtype, device): a buffer from mytorch's caching allocator on that device (-1: the current one),
//   the counterpart of torch._C._dynamo.guards._empty_strided_cuda (the generic
//   torch.empty_strided(..., device=...) goes through the Python arg parser and the dispatcher per buffer);
// - _current_raw_stream(device): the runtime handle of the current stream (a cudaStream_t on the cuda runtime)
//   as an integer, what Triton kernels are launched on (Inductor's get_raw_stream);
// - _raw_stream(stream_id, device): the same for a given stream (torch.mytorch.Stream.native_handle).
#include <Python.h>

#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/python_numbers.h>

#include "csrc/core/DeviceAllocator.h"
#include "csrc/core/Stream.h"

namespace mytorch {
namespace {

void unpackInts(PyObject* seq, const char* what, c10::SmallVector<int64_t, 8>& out) {
  TORCH_CHECK_TYPE(PyTuple_Check(seq) || PyList_Check(seq), "_empty_strided_mytorch: expected ", what,
                   " as a tuple of ints, but got ", Py_TYPE(seq)->tp_name);
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  out.reserve(n);
  for (Py_ssize_t i = 0; i < n; ++i) out.push_back(THPUtils_unpackLong(PySequence_Fast_GET_ITEM(seq, i)));
}

PyObject* emptyStrided(PyObject* /*self*/, PyObject* args) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(PyTuple_GET_SIZE(args) == 4,
                   "_empty_strided_mytorch: expected (size, stride, dtype, device index), "
                   "but got ",
                   PyTuple_GET_SIZE(args), " arguments");
  c10::SmallVector<int64_t, 8> sizes, strides;
  unpackInts(PyTuple_GET_ITEM(args, 0), "size", sizes);
  unpackInts(PyTuple_GET_ITEM(args, 1), "stride", strides);
  PyObject* dtype = PyTuple_GET_ITEM(args, 2);
  TORCH_CHECK_TYPE(THPDtype_Check(dtype), "_empty_strided_mytorch: expected a torch.dtype, but got ",
                   Py_TYPE(dtype)->tp_name);
  TORCH_CHECK(sizes.size() == strides.size(), "_empty_strided_mytorch: expected as many strides as sizes, but got ",
              strides.size(), " and ", sizes.size());
  const auto index = resolveDevice(static_cast<c10::DeviceIndex>(THPUtils_unpackLong(PyTuple_GET_ITEM(args, 3))));
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index));
  return THPVariable_Wrap(at::detail::empty_strided_generic(sizes, strides, deviceAllocator(),
                                                            c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                            reinterpret_cast<THPDtype*>(dtype)->scalar_type));
  END_HANDLE_TH_ERRORS
}

PyObject* currentRawStream(PyObject* /*self*/, PyObject* device) {
  HANDLE_TH_ERRORS
  const auto index = static_cast<c10::DeviceIndex>(THPUtils_unpackLong(device));
  return PyLong_FromVoidPtr(nativeHandle(currentStream(index)));
  END_HANDLE_TH_ERRORS
}

PyObject* rawStream(PyObject* /*self*/, PyObject* args) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(PyTuple_GET_SIZE(args) == 2, "_raw_stream: expected (stream_id, device index)");
  const auto id = THPUtils_unpackLong(PyTuple_GET_ITEM(args, 0));
  const auto index = resolveDevice(static_cast<c10::DeviceIndex>(THPUtils_unpackLong(PyTuple_GET_ITEM(args, 1))));
  return PyLong_FromVoidPtr(nativeHandle(c10::Stream::unpack3(id, index, c10::DeviceType::PrivateUse1)));
  END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {
    {"_empty_strided_mytorch", emptyStrided, METH_VARARGS, "A mytorch buffer for Inductor's generated code"},
    {"_current_raw_stream", currentRawStream, METH_O, "The current stream's runtime handle as an integer"},
    {"_raw_stream", rawStream, METH_VARARGS, "A stream's runtime handle as an integer"},
    {nullptr, nullptr, 0, nullptr}};

} // namespace

void addInductorBindings(PyObject* module) {
  if (PyModule_AddFunctions(module, methods) != 0)
    throw std::runtime_error("mytorch: could not add Inductor's bindings");
}

} // namespace mytorch
