#include "python/bindings/array.h"

#include <cstring>

#include "runtime/cuda/driver.h"

namespace onecat::python {
namespace {

// DLPack's C ABI (dlpack.h, version 0.x "dltensor" capsules), which onecat does not include.
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
constexpr int32_t kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;

struct DTypeInfo {
  DType type;
  int size;
};

DTypeInfo from_name(const std::string& name) {
  static const std::pair<const char*, DTypeInfo> kNames[] = {
      {"float16", {DType::kFloat16, 2}}, {"bfloat16", {DType::kBFloat16, 2}}, {"float32", {DType::kFloat32, 4}},
      {"float64", {DType::kFloat64, 8}}, {"int8", {DType::kInt8, 1}},         {"uint8", {DType::kUInt8, 1}},
      {"int16", {DType::kInt16, 2}},     {"int32", {DType::kInt32, 4}},       {"uint32", {DType::kUInt32, 4}},
      {"int64", {DType::kInt64, 8}},     {"bool", {DType::kBool, 1}},         {"float8_e4m3fn", {DType::kFloat8, 1}},
      {"float8_e5m2", {DType::kFloat8, 1}}, {"float8_e8m0fnu", {DType::kFloat8, 1}}};
  for (const auto& [n, info] : kNames) {
    if (name == n) return info;
  }
  return {DType::kOther, 0};
}

// Array-interface type strings: "<f2", "|u1", "<i4".
DTypeInfo from_typestr(const std::string& t) {
  if (t.size() < 3) return {DType::kOther, 0};
  const char kind = t[1];
  const int size = std::atoi(t.c_str() + 2);
  switch (kind) {
    case 'f': return size == 2 ? DTypeInfo{DType::kFloat16, 2} : size == 4 ? DTypeInfo{DType::kFloat32, 4}
                   : size == 8 ? DTypeInfo{DType::kFloat64, 8} : DTypeInfo{DType::kOther, size};
    case 'i': return size == 1 ? DTypeInfo{DType::kInt8, 1} : size == 2 ? DTypeInfo{DType::kInt16, 2}
                   : size == 4 ? DTypeInfo{DType::kInt32, 4} : size == 8 ? DTypeInfo{DType::kInt64, 8}
                   : DTypeInfo{DType::kOther, size};
    case 'u': return size == 1 ? DTypeInfo{DType::kUInt8, 1} : size == 4 ? DTypeInfo{DType::kUInt32, 4}
                   : DTypeInfo{DType::kOther, size};
    case 'b': return {DType::kBool, 1};
    default: return {DType::kOther, size};
  }
}

// Buffer-protocol format characters (struct module), with an optional byte-order prefix.
DTypeInfo from_format(std::string f, ssize_t itemsize) {
  if (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@' || f[0] == '!' || f[0] == '>')) f = f.substr(1);
  const int size = int(itemsize);
  if (f == "e") return {DType::kFloat16, 2};
  if (f == "f") return {DType::kFloat32, 4};
  if (f == "d") return {DType::kFloat64, 8};
  if (f == "b") return {DType::kInt8, 1};
  if (f == "B") return {DType::kUInt8, 1};
  if (f == "?") return {DType::kBool, 1};
  if (f == "h") return {DType::kInt16, 2};
  if ((f == "i" || f == "l" || f == "q") && size == 4) return {DType::kInt32, 4};
  if ((f == "I" || f == "L" || f == "Q") && size == 4) return {DType::kUInt32, 4};
  if ((f == "i" || f == "l" || f == "q") && size == 8) return {DType::kInt64, 8};
  return {DType::kOther, size};
}

DTypeInfo from_dlpack(DLDataType t) {
  if (t.lanes != 1) return {DType::kOther, 0};
  switch (t.code) {
    case 0: return from_name("int" + std::to_string(t.bits));
    case 1: return from_name("uint" + std::to_string(t.bits));
    case 2: return from_name("float" + std::to_string(t.bits));
    case 4: return t.bits == 16 ? DTypeInfo{DType::kBFloat16, 2} : DTypeInfo{DType::kOther, t.bits / 8};
    case 6: return {DType::kBool, 1};
    default: return t.bits == 8 && t.code >= 7 ? DTypeInfo{DType::kFloat8, 1} : DTypeInfo{DType::kOther, t.bits / 8};
  }
}

// A sequence of ints (shape, strides); a tuple (torch.Size is one) read without pybind's casts.
Dims int_tuple(py::handle seq) {
  Dims out;
  if (!PyTuple_Check(seq.ptr())) {
    for (py::handle h : seq) out.push_back(h.cast<int64_t>());
    return out;
  }
  const Py_ssize_t n = PyTuple_GET_SIZE(seq.ptr());
  out.resize(size_t(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    out[size_t(i)] = PyLong_AsLongLong(PyTuple_GET_ITEM(seq.ptr(), i));
    if (out[size_t(i)] == -1 && PyErr_Occurred()) throw py::error_already_set();
  }
  return out;
}

Dims row_major_strides(const Dims& shape) {
  Dims s;
  s.resize(shape.size());
  int64_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = step;
    step *= shape[i];
  }
  return s;
}

// torch.Tensor once torch is imported (nullptr before): looked up by name until then, then
// held for the life of the process, so an op call on torch tensors does no lookup by text.
PyObject* torch_tensor_type() {
  static PyObject* type = nullptr;
  if (type) return type;
  PyObject* torch = PyImport_GetModule(py::str("torch").ptr());  // only if already imported; new reference
  if (!torch) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* tensor = PyObject_GetAttrString(torch, "Tensor");
  Py_DECREF(torch);
  if (!tensor) {
    PyErr_Clear();
    return nullptr;
  }
  type = tensor;  // kept: the reference is never released
  return type;
}

// A torch dtype's element type and name. torch dtypes are singletons, so each is read as text
// once and found by identity after that.
struct TorchDType {
  PyObject* dtype;  // held
  DTypeInfo info;
  std::string name;
};

const TorchDType& torch_dtype(py::handle dtype) {
  static std::vector<TorchDType>* seen = new std::vector<TorchDType>();  // never destroyed: holds Python objects
  for (const TorchDType& d : *seen) {
    if (d.dtype == dtype.ptr()) return d;
  }
  std::string name = py::str(dtype);
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  seen->push_back({dtype.inc_ref().ptr(), from_name(name), name});
  return seen->back();
}

// The attribute names a torch tensor is read through, interned once: an op call looks them up
// by pointer, with no string made per call.
struct TorchNames {
  PyObject* dtype = PyUnicode_InternFromString("dtype");
  PyObject* shape = PyUnicode_InternFromString("shape");
  PyObject* stride = PyUnicode_InternFromString("stride");
  PyObject* data_ptr = PyUnicode_InternFromString("data_ptr");
  PyObject* get_device = PyUnicode_InternFromString("get_device");
  PyObject* is_cuda = PyUnicode_InternFromString("is_cuda");
};

const TorchNames& torch_names() {
  static const TorchNames* names = new TorchNames();  // never destroyed: Python objects
  return *names;
}

py::object checked(PyObject* result) {
  if (!result) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(result);
}

// An op call reads each tensor argument here, so it stays on CPython's own calls: interned
// attribute names, vectorcall methods, tuple items read directly.
ArrayView torch_view(py::handle t) {
  const TorchNames& n = torch_names();
  PyObject* o = t.ptr();
  ArrayView v;
  const TorchDType& dt = torch_dtype(checked(PyObject_GetAttr(o, n.dtype)));
  v.dtype = dt.info.type;
  v.dtype_name = dt.name;
  v.itemsize = dt.info.size > 0 ? dt.info.size : t.attr("element_size")().cast<int>();
  v.shape = int_tuple(checked(PyObject_GetAttr(o, n.shape)));
  v.strides = int_tuple(checked(PyObject_CallMethodNoArgs(o, n.stride)));
  const py::object data = checked(PyObject_CallMethodNoArgs(o, n.data_ptr));
  v.data = uintptr_t(PyLong_AsUnsignedLongLong(data.ptr()));
  if (PyErr_Occurred()) throw py::error_already_set();
  // get_device(): the CUDA ordinal, −1 for a CPU tensor (one call, no device object or text).
  const long device = PyLong_AsLong(checked(PyObject_CallMethodNoArgs(o, n.get_device)).ptr());
  if (device == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (device >= 0) v.on_cuda = PyObject_IsTrue(checked(PyObject_GetAttr(o, n.is_cuda)).ptr()) == 1;
  if (v.on_cuda) v.device = int(device);
  return v;
}

ArrayView cuda_interface_view(py::handle obj, Arg arg) {
  py::object cai = obj.attr("__cuda_array_interface__");
  if (!py::isinstance<py::dict>(cai)) throw py::type_error(arg.prefix() + ": __cuda_array_interface__ is not a dict");
  py::dict d = cai.cast<py::dict>();
  for (const char* key : {"shape", "typestr", "data"}) {
    if (!d.contains(key)) throw py::type_error(arg.prefix() + ": __cuda_array_interface__ has no '" + key + "'");
  }
  ArrayView v;
  v.on_cuda = true;
  v.shape = int_tuple(d["shape"]);
  const std::string typestr = d["typestr"].cast<std::string>();
  const DTypeInfo info = from_typestr(typestr);
  v.dtype = info.type;
  v.itemsize = info.size;
  v.dtype_name = info.type == DType::kOther ? typestr : dtype_name(info.type);
  py::tuple data = d["data"].cast<py::tuple>();
  v.data = data[0].cast<uintptr_t>();
  if (d.contains("strides") && !d["strides"].is_none()) {
    for (int64_t s : int_tuple(d["strides"])) {
      if (v.itemsize == 0 || s % v.itemsize != 0) v.strides_in_bytes_unaligned = true;
      v.strides.push_back(v.itemsize ? s / v.itemsize : s);
    }
  } else {
    v.strides = row_major_strides(v.shape);
  }
  v.device_pending = v.data != 0;
  return v;
}

ArrayView dlpack_view(py::handle obj, Arg arg) {
  py::tuple dev = obj.attr("__dlpack_device__")();
  const int type = dev[0].cast<int>();
  py::object capsule;
  try {
    // -1: the consumer synchronises itself (onecat queues on the caller's stream).
    capsule = type == kDLCUDA ? obj.attr("__dlpack__")(py::arg("stream") = -1) : obj.attr("__dlpack__")();
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    capsule = obj.attr("__dlpack__")();
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!managed) {
    PyErr_Clear();
    throw py::type_error(arg.prefix() + ": __dlpack__ did not return a 'dltensor' capsule");
  }
  const DLTensor& t = managed->dl_tensor;
  ArrayView v;
  const DTypeInfo info = from_dlpack(t.dtype);
  v.dtype = info.type;
  v.itemsize = info.size;
  v.dtype_name = info.type == DType::kOther ? "dlpack(code=" + std::to_string(t.dtype.code) + ", bits=" +
                                                  std::to_string(t.dtype.bits) + ")"
                                            : dtype_name(info.type);
  v.shape.assign(t.shape, t.shape + t.ndim);
  if (t.strides) {
    v.strides.assign(t.strides, t.strides + t.ndim);
  } else {
    v.strides = row_major_strides(v.shape);
  }
  v.data = uintptr_t(t.data) + uintptr_t(t.byte_offset);
  v.on_cuda = t.device.device_type == kDLCUDA || t.device.device_type == kDLCUDAManaged;
  if (v.on_cuda) v.device = t.device.device_id;
  if (!v.on_cuda && t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost) {
    throw py::value_error(arg.prefix() + " is on DLPack device type " + std::to_string(t.device.device_type) +
                          ", neither CUDA nor the host");
  }
  // The capsule owns the tensor (its destructor calls the deleter): keep it for the call.
  auto* held = capsule.release().ptr();
  v.keep_alive = std::shared_ptr<void>(held, [](void* p) {
    py::gil_scoped_acquire gil;
    Py_DECREF(static_cast<PyObject*>(p));
  });
  return v;
}

ArrayView buffer_view(py::handle obj) {
  auto info = std::make_shared<py::buffer_info>(py::reinterpret_borrow<py::buffer>(obj).request());
  ArrayView v;
  const DTypeInfo t = from_format(info->format, info->itemsize);
  v.dtype = t.type;
  v.itemsize = int(info->itemsize);
  v.dtype_name = t.type == DType::kOther ? "format '" + info->format + "'" : dtype_name(t.type);
  v.shape.assign(info->shape.data(), info->shape.data() + info->shape.size());
  for (auto s : info->strides) {
    if (s % info->itemsize != 0) v.strides_in_bytes_unaligned = true;
    v.strides.push_back(s / info->itemsize);
  }
  v.data = uintptr_t(info->ptr);
  v.keep_alive = info;
  return v;
}

}  // namespace

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kUInt32: return "uint32";
    case DType::kInt64: return "int64";
    case DType::kBool: return "bool";
    case DType::kFloat8: return "float8";
    case DType::kOther: return "unsupported";
  }
  return "unsupported";
}

std::string shape_text(const Dims& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

int64_t ArrayView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool ArrayView::contiguous() const {
  if (strides_in_bytes_unaligned) return false;
  if (numel() == 0) return true;
  int64_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != step) return false;
    step *= shape[i];
  }
  return true;
}

std::string ArrayView::shape_text() const { return python::shape_text(shape); }

namespace {

ArrayView read_view(py::handle obj, Arg arg) {
  if (PyObject* tensor_type = torch_tensor_type()) {
    const int is_tensor = PyObject_IsInstance(obj.ptr(), tensor_type);
    if (is_tensor < 0) throw py::error_already_set();
    if (is_tensor) return torch_view(obj);
  }
  if (py::hasattr(obj, "__cuda_array_interface__")) return cuda_interface_view(obj, arg);
  if (PyObject_CheckBuffer(obj.ptr())) return buffer_view(obj);
  if (py::hasattr(obj, "__dlpack__") && py::hasattr(obj, "__dlpack_device__")) return dlpack_view(obj, arg);
  throw py::type_error(arg.prefix() + " must be a tensor or array (torch, or an object with __cuda_array_interface__, "
                       "__dlpack__ or the buffer protocol), got " + std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
}

}  // namespace

ArrayView view_of(py::handle obj, Arg arg) {
  if (obj.is_none()) throw py::type_error(arg.prefix() + " must be an array, got None");
  try {
    return read_view(obj, arg);
  } catch (const std::length_error&) {
    throw py::value_error(arg.prefix() + " has more than " + std::to_string(Dims::kMax) +
                          " dimensions; onecat's ops take arrays of at most " + std::to_string(Dims::kMax));
  }
}

void require_cuda(const ArrayView& v, Arg arg) {
  if (!v.on_cuda) throw py::value_error(arg.prefix() + " must be on a CUDA device, got a host (CPU) array");
}

void require_host(const ArrayView& v, Arg arg) {
  if (v.on_cuda) throw py::value_error(arg.prefix() + " must be a host (CPU) array (packing runs on the host; call .cpu())");
}

void require_dtype(const ArrayView& v, DType want, Arg arg) {
  if (v.dtype != want) throw py::type_error(arg.prefix() + " must be " + dtype_name(want) + ", got " + v.dtype_name);
}

void require_dtype_size(const ArrayView& v, std::initializer_list<DType> allowed, const char* what, Arg arg) {
  for (DType t : allowed) {
    if (v.dtype == t) return;
  }
  throw py::type_error(arg.prefix() + " must be " + what + ", got " + v.dtype_name);
}

void require_contiguous(const ArrayView& v, Arg arg) {
  if (!v.contiguous()) {
    throw py::value_error(arg.prefix() + " must be contiguous (row-major, innermost stride 1), got shape " +
                          v.shape_text() + " with strides " + python::shape_text(v.strides) + "; call .contiguous()");
  }
}

void require_ndim(const ArrayView& v, size_t ndim, Arg arg) {
  if (v.shape.size() != ndim) {
    throw py::value_error(arg.prefix() + " must have " + std::to_string(ndim) + " dimension" + (ndim == 1 ? "" : "s") +
                          ", got shape " + v.shape_text());
  }
}

void require_shape(const ArrayView& v, const Dims& shape, Arg arg) {
  if (v.shape != shape) {
    throw py::value_error(arg.prefix() + " must have shape " + python::shape_text(shape) + ", got " + v.shape_text());
  }
}

void require_same_device(const ArrayView& v, int device, Arg arg) {
  if (device >= 0 && v.device >= 0 && v.device != device) {
    throw py::value_error(arg.prefix() + " is on cuda:" + std::to_string(v.device) + ", the other arguments on cuda:" +
                          std::to_string(device));
  }
}

void require_aligned(const ArrayView& v, int bytes, Arg arg) {
  if (v.data % uintptr_t(bytes) != 0) {
    throw py::value_error(arg.prefix() + "'s data must be " + std::to_string(bytes) +
                          "-byte aligned for this kernel (a fresh tensor is); got an offset view");
  }
}

ArrayView cuda_array(py::handle obj, DType dtype, size_t ndim, Arg arg, int device) {
  ArrayView v = view_of(obj, arg);
  require_cuda(v, arg);
  require_dtype(v, dtype, arg);
  if (ndim) require_ndim(v, ndim, arg);
  require_contiguous(v, arg);
  require_same_device(v, device, arg);
  return v;
}

}  // namespace onecat::python

namespace onecat::python {

int resolve_devices(std::initializer_list<std::pair<ArrayView*, Arg>> arrays) {
  int device = -1;
  const char* first = nullptr;
  Driver* d = Driver::find();
  const bool gpu = d && d->device_count() > 0;
  for (auto [v, arg] : arrays) {
    if (!v) continue;
    if (v->device_pending && gpu) {
      int ordinal = -1;
      if (d->cuPointerGetAttribute(&ordinal, kPointerDeviceOrdinal, CUdeviceptr(v->data)) != 0) {
        throw py::value_error(arg.prefix() + "'s data pointer is not CUDA memory");
      }
      v->device = ordinal;
      v->device_pending = false;
    }
    if (v->device < 0) continue;
    if (device >= 0 && v->device != device) {
      throw py::value_error(arg.prefix() + " is on cuda:" + std::to_string(v->device) + ", " + first + " on cuda:" +
                            std::to_string(device));
    }
    if (device < 0) {
      device = v->device;
      first = arg.name;
    }
  }
  return device;
}

}  // namespace onecat::python
