// Arrays handed in from Python, read in place (no copies): torch tensors through their own
// attributes (so parameters that require grad work too), objects with
// __cuda_array_interface__ (CuPy, Numba), DLPack producers, and for host data the buffer
// protocol (NumPy, bytes). The checks throw TypeError (wrong kind or dtype) or ValueError
// (device, shape, layout, alignment) naming the operation and the argument.
#pragma once
#include <pybind11/pybind11.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace onecat::python {

namespace py = pybind11;

enum class DType { kFloat16, kBFloat16, kFloat32, kFloat64, kInt8, kUInt8, kInt16, kInt32, kUInt32, kInt64, kBool, kFloat8, kOther };

// An array's sizes or strides, stored inline: an op call reads each argument without
// allocating. Arrays of more than kMax dimensions are refused when read (view_of).
class Dims {
 public:
  static constexpr size_t kMax = 8;
  Dims() = default;
  Dims(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  Dims(const std::vector<int64_t>& values) { assign(values.data(), values.data() + values.size()); }
  void assign(const int64_t* first, const int64_t* last) {
    resize(size_t(last - first));
    std::copy(first, last, d_.begin());
  }
  void resize(size_t n) {
    if (n > kMax) throw std::length_error("more than 8 dimensions");
    n_ = uint8_t(n);
  }
  void push_back(int64_t v) {
    resize(size() + 1);
    d_[size() - 1] = v;
  }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t operator[](size_t i) const { return d_[i]; }
  int64_t& operator[](size_t i) { return d_[i]; }
  int64_t back() const { return d_[n_ - 1]; }
  int64_t& back() { return d_[n_ - 1]; }
  const int64_t* begin() const { return d_.data(); }
  const int64_t* end() const { return d_.data() + n_; }
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  bool operator==(const Dims& o) const { return n_ == o.n_ && std::equal(begin(), end(), o.begin()); }

 private:
  std::array<int64_t, kMax> d_{};
  uint8_t n_ = 0;
};

struct ArrayView {
  uintptr_t data = 0;
  Dims shape;
  Dims strides;  // in elements
  DType dtype = DType::kOther;
  std::string dtype_name;  // "float16", "int32", … for messages
  int itemsize = 0;
  bool on_cuda = false;
  int device = -1;  // CUDA ordinal; -1 on the host, or not yet known (device_pending)
  bool device_pending = false;  // __cuda_array_interface__ does not say: resolve_devices asks the driver
  bool strides_in_bytes_unaligned = false;  // a byte stride that is not a whole element
  std::shared_ptr<void> keep_alive;         // a DLPack capsule or a buffer that owns the view

  int64_t numel() const;
  bool contiguous() const;  // row-major, innermost stride 1 (dims of extent 1 ignored)
  std::string shape_text() const;  // "(7, 4096)"
};

// Where a message points: "onecat.gemm: x".
struct Arg {
  const char* op;
  const char* name;
  std::string prefix() const { return std::string(op) + ": " + name; }
};

// Reads any supported array; TypeError for anything else. None is not an array.
ArrayView view_of(py::handle obj, Arg arg);

// A fp16 (etc.) CUDA array, contiguous, on the same device as `device` (−1: any).
void require_cuda(const ArrayView& v, Arg arg);
void require_host(const ArrayView& v, Arg arg);
void require_dtype(const ArrayView& v, DType want, Arg arg);
void require_dtype_size(const ArrayView& v, std::initializer_list<DType> allowed, const char* what, Arg arg);
void require_contiguous(const ArrayView& v, Arg arg);
void require_ndim(const ArrayView& v, size_t ndim, Arg arg);
void require_shape(const ArrayView& v, const Dims& shape, Arg arg);
void require_same_device(const ArrayView& v, int device, Arg arg);
void require_aligned(const ArrayView& v, int bytes, Arg arg);

// The checks most kernel arguments take, in this order: an array (view_of), on a GPU, of
// `dtype`, with `ndim` dimensions (0: any), contiguous, on `device` (−1: any).
ArrayView cuda_array(py::handle obj, DType dtype, size_t ndim, Arg arg, int device);

// After every other check (so a bad argument is reported before any driver call): finds the
// device of arrays whose interface does not name it, checks that all are on one GPU, and
// returns it (−1 when none is known, e.g. without a GPU).
int resolve_devices(std::initializer_list<std::pair<ArrayView*, Arg>> arrays);

const char* dtype_name(DType t);
std::string shape_text(const Dims& shape);

}  // namespace onecat::python
