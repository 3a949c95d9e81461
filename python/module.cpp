// The native half of `import pact` (python/pact/__init__.py is the API a user reads): pact.Tensor over the
// storage core's external import (Note [External host memory]) and a prepared read for export, the
// imported-model runner, planning, the CLI in-process, the allocation and copy ledgers, and pact::Error as
// pact.Error with its code.

#include <dlpack/dlpack.h>
#include <fmt/format.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "pact/capture/capture.hpp"
#include "pact/contract/check.hpp"
#include "pact/core/accounting.hpp"
#include "pact/core/checked_math.hpp"
#include "pact/core/json.hpp"
#include "pact/core/storage.hpp"
#include "pact/core/tensor.hpp"
#include "pact/ir/graph.hpp"
#include "pact/ir/torch_import.hpp"
#include "pact/plan/planner.hpp"
#include "pact/runtime/retention.hpp"
#include "pact/runtime/torch_run.hpp"
#include "tools/pact/command.hpp"

namespace py = pybind11;

namespace pact::python {

namespace {

// DLPack 0.6 (Debian's header) predates kDLBool; PyTorch 1.13 writes it for bool tensors.
constexpr std::uint8_t kDLBoolCode = 6;

// ---- Export: a read-only host view of a value, held for as long as a foreign consumer reads it ----------

// A prepared host read of a value kept alive together with the value's record: the borrow the core
// granted stays live while a numpy array or a DLPack consumer holds the pointer (declared after the
// record, so it ends first).
struct HostExport {
  runtime::ValueRef value;
  std::shared_ptr<void> prepared;
  const std::byte* base = nullptr;  // element [0, ..., 0]
};

template <class T>
std::shared_ptr<HostExport> export_as(runtime::ValueRef value) {
  auto out = std::make_shared<HostExport>();
  out->value = std::move(value);
  auto prepared = out->value->view().template prepare_host<T>();
  if (!prepared) throw prepared.error().error;
  auto held = std::make_shared<PreparedHostRead<T>>(std::move(*prepared));
  const T* base = std::holds_alternative<PreparedContiguousRead<T>>(*held)
                      ? std::get<PreparedContiguousRead<T>>(*held).begin()
                      : std::get<PreparedStridedRead<T>>(*held).unsafe_base();
  out->base = reinterpret_cast<const std::byte*>(base);
  out->prepared = std::move(held);
  return out;
}

std::shared_ptr<HostExport> export_host(runtime::ValueRef value) {
  switch (value->view().dtype()) {
#define PACT_EXPORT_CASE(name, wire, type, size) \
  case DType::name:                              \
    return export_as<type>(std::move(value));
    PACT_DTYPES(PACT_EXPORT_CASE)
#undef PACT_EXPORT_CASE
  }
  throw_error(ErrorCode::internal, "pact.Tensor", "unknown dtype");
}

// Every dtype's name in the two exchange protocols, the one table both directions of both read: its
// buffer-protocol format (bf16 has none: numpy has no bfloat16) and its DLPack type.
struct Exchange {
  DType dtype;
  const char* format;  // nullptr: no buffer-protocol format
  DLDataType dl;
};
constexpr Exchange kExchange[] = {
    {DType::f32, "f", {kDLFloat, 32, 1}},    {DType::f64, "d", {kDLFloat, 64, 1}},
    {DType::f16, "e", {kDLFloat, 16, 1}},    {DType::bf16, nullptr, {kDLBfloat, 16, 1}},
    {DType::c64, "Zf", {kDLComplex, 64, 1}}, {DType::i64, "q", {kDLInt, 64, 1}},
    {DType::i32, "i", {kDLInt, 32, 1}},      {DType::i8, "b", {kDLInt, 8, 1}},
    {DType::u8, "B", {kDLUInt, 8, 1}},       {DType::boolean, "?", {kDLBoolCode, 8, 1}},
};

const Exchange& exchange_of(DType dtype) {
  for (const auto& e : kExchange)
    if (e.dtype == dtype) return e;
  throw_error(ErrorCode::internal, "pact.Tensor", fmt::format("dtype {} has no exchange entry", dtype_name(dtype)));
}

// The buffer-protocol format of a dtype, or nullopt.
std::optional<std::string> buffer_format(DType dtype) {
  const char* format = exchange_of(dtype).format;
  return format == nullptr ? std::nullopt : std::optional<std::string>(format);
}

// ---- Import: a foreign buffer becomes a root whose keeper holds the Python object ------------------------

// The dtype of a buffer-protocol format with its item size, or nullopt. A signed integer is known by its
// size whatever its letter (q, l or i); unsigned integers wider than a byte have no dtype.
std::optional<DType> dtype_of_format(std::string format, py::ssize_t itemsize) {
  if (!format.empty() && (format[0] == '<' || format[0] == '=' || format[0] == '@')) format.erase(0, 1);
  const bool signed_integer = format == "q" || format == "l" || format == "i";
  for (const auto& e : kExchange) {
    const bool named =
        signed_integer ? e.dl.code == kDLInt && e.dl.bits == 8 * itemsize : e.format != nullptr && format == e.format;
    if (named && static_cast<py::ssize_t>(dtype_size(e.dtype)) == itemsize) return e.dtype;
  }
  return std::nullopt;
}

// A root over `data` (element [0, ..., 0]) with element strides `strides`: the root spans the byte
// envelope of every element, so negative strides work; the view's byte offset points back at `data`.
runtime::ValueRef adopt(std::byte* data, DType dtype, const std::vector<std::int64_t>& shape,
                        const std::vector<std::int64_t>& strides, std::shared_ptr<void> keeper,
                        const std::string& what) {
  const auto item = static_cast<std::int64_t>(dtype_size(dtype));
  std::int64_t low = 0, high = 0;  // element offsets of the envelope
  bool empty = false;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0)
      throw_error(ErrorCode::invalid_argument, "pact.Tensor", fmt::format("{}: a negative extent", what));
    if (shape[d] == 0) empty = true;
  }
  if (shape.size() > static_cast<std::size_t>(kMaxRank))
    throw_error(ErrorCode::rank_exceeded, "pact.Tensor",
                fmt::format("{}: {} dimensions, more than Pact's {}", what, shape.size(), kMaxRank));
  std::optional<std::int64_t> span = 0;
  if (!empty) {
    for (std::size_t d = 0; d < shape.size() && span; ++d) {
      const auto reach = core::checked_mul(shape[d] - 1, strides[d]);
      std::int64_t& side = reach && *reach < 0 ? low : high;
      const auto moved = reach ? core::checked_add(side, *reach) : std::nullopt;
      if (moved) side = *moved;
      span = moved;
    }
    if (span) span = core::checked_add(high, -low);
    if (span) span = core::checked_add(*span, 1);
    if (span) span = core::checked_mul(*span, item);
  }
  if (!span) throw_error(ErrorCode::layout_overflow, "pact.Tensor", what + ": the strides reach past 64 bits");
  const std::uint64_t bytes = empty ? 0 : static_cast<std::uint64_t>(*span);
  Storage storage = Storage::import_host(data + low * item, bytes, std::move(keeper));
  LayoutRequest request;
  request.dtype = dtype;
  request.shape = Dims(shape);
  request.strides = Dims(strides);
  request.byte_offset = empty ? 0 : -low * item;
  auto tensor = Tensor::from_storage(std::move(storage), request);
  if (!tensor) {
    const Error& e = tensor.error().error;
    throw_error(e.code(), "pact.Tensor", fmt::format("{}: {}", what, e.detail()));
  }
  return runtime::retain(std::move(*tensor));
}

// Releases a Py_buffer with the GIL held, whichever thread drops the last reference to the root.
void release_buffer(Py_buffer* b) {
  py::gil_scoped_acquire gil;
  PyBuffer_Release(b);
  delete b;
}

runtime::ValueRef import_buffer(const py::handle& object, const std::string& what) {
  auto* raw = new Py_buffer();
  if (PyObject_GetBuffer(object.ptr(), raw, PyBUF_RECORDS_RO) != 0) {
    delete raw;
    throw py::error_already_set();
  }
  std::shared_ptr<Py_buffer> keeper(raw, release_buffer);
  const std::string format = raw->format != nullptr ? raw->format : "B";
  const auto dtype = dtype_of_format(format, raw->itemsize);
  if (!dtype)
    throw_error(ErrorCode::dtype_mismatch, "pact.Tensor",
                fmt::format("{}: buffer format '{}' ({} bytes an item) is no Pact dtype (f32, f64, f16, c64, i64, "
                            "i32, u8, bool, i8)",
                            what, printable(format), raw->itemsize));
  std::vector<std::int64_t> shape(static_cast<std::size_t>(raw->ndim)), strides(shape.size());
  std::int64_t expected = raw->itemsize;
  for (int d = raw->ndim - 1; d >= 0; --d) {
    const auto k = static_cast<std::size_t>(d);
    shape[k] = raw->shape[d];
    const std::int64_t stride = raw->strides != nullptr ? raw->strides[d] : expected;
    if (stride % raw->itemsize != 0)
      throw_error(ErrorCode::misaligned, "pact.Tensor",
                  fmt::format("{}: dimension {} has a stride of {} bytes, not a multiple of the {}-byte element", what,
                              d, stride, raw->itemsize));
    strides[k] = stride / raw->itemsize;
    expected *= std::max<std::int64_t>(shape[k], 1);
  }
  return adopt(static_cast<std::byte*>(raw->buf), *dtype, shape, strides, std::move(keeper), what);
}

void release_managed(DLManagedTensor* m) {
  py::gil_scoped_acquire gil;
  if (m->deleter != nullptr) m->deleter(m);
}

std::optional<DType> dtype_of_dl(DLDataType t) {
  if (t.lanes != 1) return std::nullopt;
  for (const auto& e : kExchange)
    if (e.dl.code == t.code && e.dl.bits == t.bits) return e.dtype;
  return std::nullopt;
}

runtime::ValueRef import_dlpack(const py::object& object, const std::string& what) {
  py::object capsule = py::hasattr(object, "__dlpack__") ? object.attr("__dlpack__")() : object;
  if (!PyCapsule_IsValid(capsule.ptr(), "dltensor"))
    throw_error(ErrorCode::invalid_argument, "pact.from_dlpack",
                fmt::format("{}: not a DLPack tensor (no __dlpack__, not an unused 'dltensor' capsule)", what));
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  // Consumed: the capsule no longer frees the tensor; the root's keeper does (the DLPack protocol).
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  PyCapsule_SetDestructor(capsule.ptr(), nullptr);
  std::shared_ptr<DLManagedTensor> keeper(managed, release_managed);
  const DLTensor& t = managed->dl_tensor;
  if (t.device.device_type != kDLCPU)
    throw_error(ErrorCode::unsupported, "pact.from_dlpack",
                fmt::format("{}: a tensor on DLPack device type {}; Pact imports host (CPU) memory", what,
                            static_cast<int>(t.device.device_type)));
  const auto dtype = dtype_of_dl(t.dtype);
  if (!dtype)
    throw_error(
        ErrorCode::dtype_mismatch, "pact.from_dlpack",
        fmt::format("{}: DLPack dtype code {} with {} bits and {} lanes is no Pact dtype", what,
                    static_cast<int>(t.dtype.code), static_cast<int>(t.dtype.bits), static_cast<int>(t.dtype.lanes)));
  if (t.ndim < 0) throw_error(ErrorCode::invalid_argument, "pact.from_dlpack", what + ": a negative rank");
  std::vector<std::int64_t> shape(t.shape, t.shape + t.ndim), strides(shape.size());
  std::int64_t running = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    const auto k = static_cast<std::size_t>(d);
    strides[k] = t.strides != nullptr ? t.strides[d] : running;
    running *= std::max<std::int64_t>(shape[k], 1);
  }
  auto* data = static_cast<std::byte*>(t.data) + t.byte_offset;
  return adopt(data, *dtype, shape, strides, std::move(keeper), what);
}

// ---- pact.Tensor ------------------------------------------------------------------------------------------

// A read-only shared record of a value (what every Pact value handle is, seed 001 G7), plus the host
// export made the first time something reads its bytes.
class PyTensor {
 public:
  explicit PyTensor(runtime::ValueRef value) : value_(std::move(value)) {}
  const runtime::ValueRef& value() const noexcept { return value_; }
  TensorView view() const { return value_->view(); }
  const HostExport& exported() {
    if (!export_) export_ = export_host(value_);
    return *export_;
  }

 private:
  runtime::ValueRef value_;
  std::shared_ptr<HostExport> export_;
};

std::vector<py::ssize_t> to_ssize(const Dims& dims, py::ssize_t scale = 1) {
  std::vector<py::ssize_t> out;
  for (std::int64_t d : dims) out.push_back(static_cast<py::ssize_t>(d) * scale);
  return out;
}

// pact.Error, made once at import.
py::object& error_type() {
  static py::object type;
  return type;
}

// Raises pact.Error for `e` (with its code, operation and detail) as the pending Python exception.
void set_python_error(const Error& e) {
  py::object err = error_type()(e.what());
  err.attr("code") = std::string(error_code_name(e.code()));
  err.attr("operation") = e.operation();
  err.attr("detail") = e.detail();
  PyErr_SetObject(error_type().ptr(), err.ptr());
}

// Note [Buffer export]
// pact.Tensor's buffer protocol is written against CPython's slots rather than pybind11's def_buffer: a
// tensor that cannot be exported (bf16, which numpy has no type for) must raise, and an exception thrown
// through pybind11's getbuffer slot would terminate the interpreter. The buffer is read-only (every Pact
// value is shared) and holds the tensor, whose host export holds the value and its borrow.
struct BufferShape {
  std::vector<py::ssize_t> shape, strides;
  std::string format;
};

int get_buffer(PyObject* self, Py_buffer* view, int flags) {
  view->obj = nullptr;
  try {
    auto& t = py::cast<PyTensor&>(py::handle(self));
    if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE) {
      PyErr_SetString(PyExc_BufferError, "a pact.Tensor is read-only (Pact's values are shared)");
      return -1;
    }
    const TensorView v = t.view();
    const auto format = buffer_format(v.dtype());
    if (!format)
      throw_error(ErrorCode::unsupported, "pact.Tensor",
                  fmt::format("a {} tensor has no buffer-protocol format (numpy has no bfloat16); use __dlpack__",
                              dtype_name(v.dtype())));
    if (!v.is_contiguous() && (flags & PyBUF_STRIDES) != PyBUF_STRIDES) {
      PyErr_SetString(PyExc_BufferError, "a strided pact.Tensor needs a consumer that takes strides");
      return -1;
    }
    const auto item = static_cast<py::ssize_t>(dtype_size(v.dtype()));
    auto shape = std::make_unique<BufferShape>(BufferShape{to_ssize(v.shape()), to_ssize(v.strides(), item), *format});
    view->buf = const_cast<std::byte*>(t.exported().base);
    view->len = static_cast<py::ssize_t>(v.numel()) * item;
    view->readonly = 1;
    view->itemsize = item;
    view->format = (flags & PyBUF_FORMAT) == PyBUF_FORMAT ? shape->format.data() : nullptr;
    view->ndim = v.rank();
    view->shape = (flags & PyBUF_ND) == PyBUF_ND ? shape->shape.data() : nullptr;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? shape->strides.data() : nullptr;
    view->suboffsets = nullptr;
    view->internal = shape.release();
    view->obj = self;
    Py_INCREF(self);
    return 0;
  } catch (const Error& e) {
    set_python_error(e);
  } catch (const py::error_already_set& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
  }
  return -1;
}

void release_buffer_view(PyObject*, Py_buffer* view) { delete static_cast<BufferShape*>(view->internal); }

// What a DLPack consumer holds: the export (value and borrow) and the shape and strides DLTensor points at.
struct DlpackHold {
  DLManagedTensor managed{};
  std::shared_ptr<HostExport> source;
  std::vector<std::int64_t> shape, strides;
};

py::capsule to_dlpack(PyTensor& t) {
  auto hold = std::make_unique<DlpackHold>();
  hold->source = export_host(t.value());
  const TensorView v = t.view();
  const Dims shape = v.shape(), strides = v.strides();
  hold->shape.assign(shape.begin(), shape.end());
  hold->strides.assign(strides.begin(), strides.end());
  DLTensor& dl = hold->managed.dl_tensor;
  dl.data = const_cast<std::byte*>(hold->source->base);
  dl.device = {kDLCPU, 0};
  dl.ndim = v.rank();
  dl.dtype = exchange_of(v.dtype()).dl;
  dl.shape = hold->shape.data();
  dl.strides = hold->strides.data();
  dl.byte_offset = 0;
  hold->managed.manager_ctx = hold.get();
  hold->managed.deleter = [](DLManagedTensor* self) { delete static_cast<DlpackHold*>(self->manager_ctx); };
  DLManagedTensor* managed = &hold.release()->managed;
  // An unconsumed capsule frees its tensor; a consumer renames it to used_dltensor and frees it itself.
  return py::capsule(managed, "dltensor", [](PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
      m->deleter(m);
    }
  });
}

// ---- Models -----------------------------------------------------------------------------------------------

// An imported capture, planned once: pact.Model's native half.
struct PyModel {
  std::shared_ptr<runtime::ImportedModel> model;
  ir::Graph graph;  // as imported (before the inference fusions): what capture_structure describes
  std::string profile;
};

PyModel load_model(const std::string& dir, const std::string& profile_name, bool fuse) {
  const auto profile = contract::builtin_profile(profile_name);
  ir::TorchBundle bundle = ir::load_torch_export(dir);
  ir::require_weights(bundle.model, dir, "pact.Model");
  PyModel m;
  m.graph = bundle.model.graph;
  m.profile = profile_name;
  const contract::DefaultEvidenceResolver resolver;
  m.model = std::make_shared<runtime::ImportedModel>(std::move(bundle), profile, resolver, fuse);
  return m;
}

std::vector<PyTensor> run_model(const PyModel& m, const std::vector<std::pair<std::string, PyTensor*>>& inputs) {
  std::map<std::string, runtime::ValueRef> values;
  for (const auto& [name, t] : inputs) {
    if (t == nullptr) throw_error(ErrorCode::invalid_argument, "pact.Model.run", "input '" + name + "' is None");
    if (!values.emplace(name, t->value()).second)
      throw_error(ErrorCode::invalid_argument, "pact.Model.run", "input '" + name + "' is given twice");
  }
  std::map<std::string, runtime::EagerTensor> outputs;
  {
    py::gil_scoped_release unlocked;
    outputs = m.model->run(values).second;
  }
  std::vector<PyTensor> out;
  for (const auto& o : m.model->outputs()) out.emplace_back(outputs.at(o.name).value);
  return out;
}

std::string audit_text(const plan::PlanAudit& audit) { return plan::render_audit_json(audit).dump(); }

// Plans a pact.ir.v1 file, a torch_export.py directory or pact.ir.v1 JSON text; returns (accepted, audit).
std::pair<bool, std::string> plan_source(const std::string& source, const std::string& profile_name, bool vjp) {
  const auto profile = contract::builtin_profile(profile_name);
  const auto first = source.find_first_not_of(" \t\r\n");
  std::error_code ec;
  ir::Graph graph = first != std::string::npos && source[first] == '{' ? ir::parse_graph(source, "pact.plan")
                    : std::filesystem::is_directory(source, ec)        ? ir::load_torch_export(source).model.graph
                                                                       : ir::load_graph(source);
  const contract::DefaultEvidenceResolver resolver;
  auto planned =
      plan::plan_graph(graph, profile, resolver, vjp ? contract::VjpMode::with_vjp : contract::VjpMode::forward_only);
  return {planned.has_value(), audit_text(planned ? planned->audit() : planned.error().audit)};
}

std::string capture_structure(const PyModel& m) {
  capture::CaptureOptions options;
  options.structure_only = true;
  return capture::to_json(capture::capture(capture::graph_model(m.graph), options)).dump();
}

// ---- Ledgers ----------------------------------------------------------------------------------------------

// An AccountingRecorder open between start() and stop(): what pact.ledger() reads.
class PyRecorder {
 public:
  void start() { recorder_ = std::make_unique<AccountingRecorder>(); }
  void stop() {
    if (!recorder_) return;
    for (const auto& a : recorder_->allocations()) {
      allocations_.append(py::dict(py::arg("reason") = std::string(allocation_reason_name(a.reason)),
                                   py::arg("bytes") = a.bytes, py::arg("provider") = std::string(a.provider)));
    }
    for (const auto& c : recorder_->copies()) {
      copies_.append(py::dict(py::arg("reason") = std::string(copy_reason_name(c.reason)), py::arg("bytes") = c.bytes));
    }
    recorder_.reset();
  }
  py::list allocations() const { return allocations_; }
  py::list copies() const { return copies_; }

 private:
  std::unique_ptr<AccountingRecorder> recorder_;
  py::list allocations_, copies_;
};

}  // namespace

}  // namespace pact::python

PYBIND11_MODULE(_pact, m) {
  using namespace pact;
  using namespace pact::python;
  m.doc() = "Pact's native module; import pact (python/pact/__init__.py) for the API";

  static py::exception<Error> error_class(m, "Error");
  error_type() = error_class;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      set_python_error(e);
    }
  });
  m.def(
      "raise_error",
      [](const std::string& code, const std::string& operation, const std::string& detail) {
        for (int c = 0; c <= static_cast<int>(ErrorCode::internal); ++c) {
          if (error_code_name(static_cast<ErrorCode>(c)) == code)
            throw_error(static_cast<ErrorCode>(c), operation, detail);
        }
        throw_error(ErrorCode::internal, operation, detail + " (unknown error code " + code + ")");
      },
      "Raises pact.Error with a Pact error code (the Python layer's own checks use it)");

  py::class_<PyTensor> tensor(m, "Tensor", py::buffer_protocol(), "A read-only Pact value (numpy, DLPack)");
  auto* tensor_type = reinterpret_cast<PyTypeObject*>(tensor.ptr());  // Note [Buffer export]
  tensor_type->tp_as_buffer->bf_getbuffer = get_buffer;
  tensor_type->tp_as_buffer->bf_releasebuffer = release_buffer_view;
  tensor
      .def_property_readonly("shape",
                             [](const PyTensor& t) {
                               const Dims s = t.view().shape();
                               return std::vector<std::int64_t>(s.begin(), s.end());
                             })
      .def_property_readonly("strides",
                             [](const PyTensor& t) {
                               const Dims s = t.view().strides();
                               return std::vector<std::int64_t>(s.begin(), s.end());
                             })
      .def_property_readonly("dtype", [](const PyTensor& t) { return std::string(dtype_name(t.view().dtype())); })
      .def_property_readonly("provider", [](const PyTensor& t) { return std::string(t.view().provider_name()); })
      .def_property_readonly("is_contiguous", [](const PyTensor& t) { return t.view().is_contiguous(); })
      .def_property_readonly("nbytes", [](const PyTensor& t) { return t.view().nbytes(); })
      .def(
          "__dlpack__", [](PyTensor& t, const py::object&) { return to_dlpack(t); }, py::arg("stream") = py::none())
      .def("__dlpack_device__", [](const PyTensor&) { return py::make_tuple(static_cast<int>(kDLCPU), 0); })
      .def("__repr__", [](const PyTensor& t) { return "pact.Tensor(" + t.view().to_string() + ")"; });

  m.def(
      "from_buffer", [](const py::object& o, const std::string& what) { return PyTensor(import_buffer(o, what)); },
      py::arg("object"), py::arg("what") = "tensor");
  m.def(
      "from_dlpack", [](const py::object& o, const std::string& what) { return PyTensor(import_dlpack(o, what)); },
      py::arg("object"), py::arg("what") = "tensor");

  py::class_<PyModel>(m, "Model")
      .def_property_readonly("accepted", [](const PyModel& pm) { return pm.model->accepted(); })
      .def_property_readonly("profile", [](const PyModel& pm) { return pm.profile; })
      .def_property_readonly("capture_method", [](const PyModel& pm) { return pm.model->capture_method(); })
      .def("audit_json", [](const PyModel& pm) { return audit_text(pm.model->audit()); })
      .def_property_readonly("inputs",
                             [](const PyModel& pm) {
                               py::list out;
                               for (const auto& s : pm.model->inputs()) {
                                 const Dims& d = s.type.shape;
                                 out.append(py::make_tuple(s.name, std::string(dtype_name(s.type.dtype)),
                                                           std::vector<std::int64_t>(d.begin(), d.end())));
                               }
                               return out;
                             })
      .def_property_readonly("outputs",
                             [](const PyModel& pm) {
                               std::vector<std::string> out;
                               for (const auto& o : pm.model->outputs()) out.push_back(o.name);
                               return out;
                             })
      .def("run", [](const PyModel& pm,
                     const std::vector<std::pair<std::string, PyTensor*>>& inputs) { return run_model(pm, inputs); })
      .def("capture_structure", [](const PyModel& pm) { return capture_structure(pm); });
  m.def("load_capture", &load_model, py::arg("dir"), py::arg("profile"), py::arg("fuse") = true,
        "Imports a torch_export.py directory and plans it under a built-in profile");
  m.def("plan", &plan_source, py::arg("source"), py::arg("profile"), py::arg("vjp") = false);
  m.def(
      "cli",
      [](const std::vector<std::string>& args) { return cli::run_command_line(args, cli::ParseErrors::throw_error); },
      py::arg("args"), "Runs a pact command line in this process; returns its exit code");

  py::class_<PyRecorder>(m, "Recorder")
      .def(py::init<>())
      .def("start", &PyRecorder::start)
      .def("stop", &PyRecorder::stop)
      .def_property_readonly("allocations", &PyRecorder::allocations)
      .def_property_readonly("copies", &PyRecorder::copies);
}
