// A shared library opened with dlopen, so onecat starts on machines without a GPU or a
// CUDA toolkit and says what is missing instead of failing to load.
#pragma once
#include <string>

namespace onecat {

class DynLib {
 public:
  DynLib() = default;
  // Empty when the library cannot be opened; error() says why.
  static DynLib open(const std::string& name_or_path);
  DynLib(DynLib&& other) noexcept;
  DynLib& operator=(DynLib&& other) noexcept;
  DynLib(const DynLib&) = delete;
  DynLib& operator=(const DynLib&) = delete;
  ~DynLib();

  explicit operator bool() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }
  // The file the loader actually opened (resolved through the search path).
  std::string path() const;
  void* symbol(const char* name) const;  // nullptr when absent

  // Loads a symbol into a typed function pointer; throws Error naming the library.
  template <class Fn>
  void bind(Fn& fn, const char* name) const {
    fn = reinterpret_cast<Fn>(require(name));
  }

 private:
  void* require(const char* name) const;
  void* handle_ = nullptr;
  std::string name_;
  std::string error_;
};

}  // namespace onecat
