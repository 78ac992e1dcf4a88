// The one loader of dynamic libraries (cuBLASLt, cuDNN, cuFFT, NCCL): opened with dlopen at first use, so a build needs
// only their headers and still imports where they are absent (the launchers then report Unavailable with the
// loader's message). Used as
//   #define MY_FUNCS(_) _(fooCreate) _(fooRun)
//   MT_DYNLIB(Foo, foo, MY_FUNCS, "libfoo", "install the foo wheel", "libfoo.so.2", "libfoo.so")
// which declares `struct Foo { <a pointer per function>; std::string error; }` and `const Foo& foo()`: the first
// library of the list that opens, each function resolved, `error` empty when all were found.
#pragma once

#include <dlfcn.h>

#include <initializer_list>
#include <string>

namespace mytorch::dynlib {

class Library {
 public:
  Library(const char* what, std::initializer_list<const char*> names, const char* hint) : what_(what) {
    for (const char* name : names) {
      handle_ = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
      if (handle_) return;
    }
    const char* why = dlerror();
    error_ = std::string("cannot load ") + what + " (" + *names.begin() + "): " + (why ? why : "not found") +
             (hint && *hint ? std::string("; ") + hint : std::string());
  }
  // fn = the symbol `name`, or null with the first missing symbol named in error().
  template <typename F>
  void bind(F*& fn, const char* name) {
    fn = handle_ ? reinterpret_cast<F*>(dlsym(handle_, name)) : nullptr;
    if (!fn && error_.empty()) error_ = what_ + " lacks the symbol " + name;
  }
  const std::string& error() const { return error_; }

 private:
  void* handle_ = nullptr;
  std::string what_, error_;
};

} // namespace mytorch::dynlib

#define MT_DYNLIB_POINTER(f) decltype(&::f) f = nullptr;
#define MT_DYNLIB_BIND(f) lib.bind(t.f, #f);
#define MT_DYNLIB(Type, getter, FUNCS, what, hint, ...)          \
  struct Type {                                                  \
    FUNCS(MT_DYNLIB_POINTER)                                     \
    std::string error;                                           \
  };                                                             \
  inline const Type& getter() {                                  \
    static const Type loaded = [] {                              \
      Type t;                                                    \
      ::mytorch::dynlib::Library lib(what, {__VA_ARGS__}, hint); \
      FUNCS(MT_DYNLIB_BIND)                                      \
      t.error = lib.error();                                     \
      return t;                                                  \
    }();                                                         \
    return loaded;                                               \
  }
// The same struct bound to functions linked into the binary: the emulated build's stand-ins for the libraries
// (kernels/emu/cublaslt.cpp, cufft.cpp), so the CUDA code calls them through the same pointers.
#define MT_DYNLIB_LINK(f) t.f = &::f;
#define MT_DYNLIB_LINKED(Type, getter, FUNCS) \
  struct Type {                               \
    FUNCS(MT_DYNLIB_POINTER)                  \
    std::string error;                        \
  };                                          \
  inline const Type& getter() {               \
    static const Type linked = [] {           \
      Type t;                                 \
      FUNCS(MT_DYNLIB_LINK)                   \
      return t;                               \
    }();                                      \
    return linked;                            \
  }
