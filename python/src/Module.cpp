// pejit._pejit: the nanobind extension behind the `pejit` Python package.
// It is thin on purpose: it turns Python buffers (DLPack: NumPy arrays,
// torch CPU tensors) into TensorViews and pejit's error values into
// pejit.Error, and exposes the Runtime, its kernels, the C++ builder's
// structs and the disk cache. The Python layer (pejit/*.py) owns the
// user-facing API: argument checking, HF names, kernel reuse.
#include "Common.h"
#include "pejit/runtime/Pejit.h"
#include "pejit/runtime/cache/DiskCache.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <tuple>

namespace nb = nanobind;
using namespace nb::literals;

namespace pejit::python {

namespace {

using Buffer = nb::ndarray<nb::ro, nb::device::cpu>;

/// The pejit dtype of a buffer. `bf16Bits`: a uint16 buffer holds bf16
/// values (ml_dtypes.bfloat16 arrays reach us viewed as uint16).
DType dtypeOf(const Buffer &buffer, bool bf16Bits, const std::string &what) {
  nb::dlpack::dtype t = buffer.dtype();
  using Code = nb::dlpack::dtype_code;
  if (t.lanes == 1) {
    if (t.code == uint8_t(Code::Float) && t.bits == 32)
      return DType::F32;
    if (t.code == uint8_t(Code::Float) && t.bits == 16)
      return DType::F16;
    if (t.code == uint8_t(Code::Bfloat) && t.bits == 16)
      return DType::BF16;
    if (t.code == uint8_t(Code::Int) && t.bits == 32)
      return DType::I32;
    if (t.code == uint8_t(Code::Int) && t.bits == 64)
      return DType::I64;
    if (bf16Bits && t.code == uint8_t(Code::UInt) && t.bits == 16)
      return DType::BF16;
  }
  throw Error(what + ": element type (DLPack code " + std::to_string(t.code) + ", " +
              std::to_string(t.bits) + " bits) is not one pejit reads " +
              "(float32, float16, bfloat16, int32, int64)");
}

TensorView viewOf(const Buffer &buffer, bool bf16Bits, const std::string &what) {
  TensorView view;
  view.dtype = dtypeOf(buffer, bf16Bits, what);
  view.data = const_cast<void *>(buffer.data());
  for (size_t i = 0; i < buffer.ndim(); ++i) {
    view.shape.push_back(int64_t(buffer.shape(i)));
    view.strides.push_back(int64_t(buffer.stride(i)));
  }
  return view;
}

/// A compiled kernel for the host or an NVIDIA GPU.
struct Kernel {
  std::optional<X86Kernel> x86;
  std::optional<NvidiaKernel> nvidia;
  std::string target;

  const KernelSignature &signature() const { return x86 ? x86->signature() : nvidia->signature(); }

  /// inputs: in the order of the source function's arguments; bf16: one
  /// flag per input and a last one for `out`.
  void run(const std::vector<Buffer> &inputs, nb::ndarray<nb::device::cpu> out,
           const std::vector<bool> &bf16) const {
    std::vector<TensorView> views;
    std::vector<std::string> labels = signature().labels();
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::string what = i < labels.size() ? labels[i] : "input " + std::to_string(i);
      views.push_back(viewOf(inputs[i], i < bf16.size() && bf16[i], what));
    }
    Buffer outBuffer(out);
    TensorView outView = viewOf(outBuffer, bf16.size() > inputs.size() && bf16.back(), "out");
    Status status;
    {
      nb::gil_scoped_release release;
      status = x86 ? x86->run(views, outView) : nvidia->run(views, outView);
    }
    if (!status)
      throw Error(status.message());
  }

  /// A raw buffer: data pointer, DType, shape, strides (elements). The
  /// caller vouches for it (pejit/_attention.py passes torch CPU tensors
  /// this way: their DLPack export costs microseconds each).
  using Raw = std::tuple<uintptr_t, int, std::vector<int64_t>, std::vector<int64_t>>;

  static TensorView rawView(const Raw &raw) {
    auto &[data, dtype, shape, strides] = raw;
    if (dtype < 0 || dtype > int(DType::I64))
      throw Error("raw buffer: unknown dtype code " + std::to_string(dtype));
    return TensorView{reinterpret_cast<void *>(data), DType(dtype), shape, strides};
  }

  void runRaw(const std::vector<Raw> &inputs, const Raw &out) const {
    std::vector<TensorView> views;
    for (const Raw &raw : inputs)
      views.push_back(rawView(raw));
    TensorView outView = rawView(out);
    Status status;
    {
      nb::gil_scoped_release release;
      status = x86 ? x86->run(views, outView) : nvidia->run(views, outView);
    }
    if (!status)
      throw Error(status.message());
  }

  /// A training forward's run (docs/backward.md): run_raw that also writes
  /// each row's lse to `lse` (f32 [b, hq, sq]).
  void runTrainingRaw(const std::vector<Raw> &inputs, const Raw &out, const Raw &lse) const {
    if (!x86)
      throw Error("run_training: the training forward runs on the host (x86) so far");
    std::vector<TensorView> views;
    for (const Raw &raw : inputs)
      views.push_back(rawView(raw));
    TensorView outView = rawView(out), lseView = rawView(lse);
    Status status;
    {
      nb::gil_scoped_release release;
      status = x86->runTraining(views, outView, lseView);
    }
    if (!status)
      throw Error(status.message());
  }

  /// A backward kernel's run (docs/backward.md): raw inputs (q, k, v, o,
  /// dO) and raw gradients (dq, dk, dv), written in place.
  void runBackwardRaw(const std::vector<Raw> &inputs, const std::vector<Raw> &gradients) const {
    if (!x86)
      throw Error("run_backward: the backward runs on the host (x86) so far");
    std::vector<TensorView> views, grads;
    for (const Raw &raw : inputs)
      views.push_back(rawView(raw));
    for (const Raw &raw : gradients)
      grads.push_back(rawView(raw));
    Status status;
    {
      nb::gil_scoped_release release;
      status = x86->runBackward(views, grads);
    }
    if (!status)
      throw Error(status.message());
  }

  /// The median microseconds of `repeats` run() calls made from C++ on the
  /// same buffers: the C++ side of the Python call-overhead benchmark.
  double timeRun(const std::vector<Buffer> &inputs, nb::ndarray<nb::device::cpu> out,
                 const std::vector<bool> &bf16, int repeats) const {
    std::vector<TensorView> views;
    for (size_t i = 0; i < inputs.size(); ++i)
      views.push_back(viewOf(inputs[i], i < bf16.size() && bf16[i], "input"));
    Buffer outBuffer(out);
    TensorView outView = viewOf(outBuffer, bf16.size() > inputs.size() && bf16.back(), "out");
    std::vector<double> micros;
    nb::gil_scoped_release release;
    for (int i = 0; i < std::max(repeats, 1); ++i) {
      auto start = std::chrono::steady_clock::now();
      Status status = x86 ? x86->run(views, outView) : nvidia->run(views, outView);
      auto end = std::chrono::steady_clock::now();
      if (!status) {
        nb::gil_scoped_acquire acquire;
        throw Error(status.message());
      }
      micros.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
    std::sort(micros.begin(), micros.end());
    return micros[micros.size() / 2];
  }
};

std::vector<std::string> shapeDims(const std::vector<int64_t> &dims) {
  std::vector<std::string> out;
  for (int64_t d : dims)
    out.push_back(dimText(d));
  return out;
}

nb::dict signatureDict(const KernelArgument &argument) {
  nb::dict entry;
  entry["role"] = argumentRoleName(argument.role);
  entry["name"] = argument.label();
  nb::list shape;
  for (int64_t d : argument.shape)
    shape.append(d == kDynamicDim ? nb::object(nb::none()) : nb::object(nb::int_(d)));
  entry["shape"] = shape;
  entry["dtype"] = dtypeName(argument.dtype);
  entry["optional"] = argument.optional();
  return entry;
}

DiskCache userCache() {
  CacheSettings settings = CacheSettings::fromEnvironment();
  settings.enabled = true; // inspecting works even while PEJIT_DISABLE_CACHE is set
  return DiskCache(settings);
}

} // namespace
} // namespace pejit::python

using namespace pejit;
using namespace pejit::python;

NB_MODULE(_pejit, m) {
  m.doc() = "pejit's C++ runtime (use the `pejit` package, not this module)";
  nb::exception<Error>(m, "Error", PyExc_ValueError);

  nb::class_<Kernel>(m, "Kernel")
      .def("run", &Kernel::run, "inputs"_a, "out"_a, "bf16"_a)
      .def("run_raw", &Kernel::runRaw, "inputs"_a, "out"_a)
      .def("run_backward_raw", &Kernel::runBackwardRaw, "inputs"_a, "gradients"_a)
      .def("run_training_raw", &Kernel::runTrainingRaw, "inputs"_a, "out"_a, "lse"_a)
      .def("time_run", &Kernel::timeRun, "inputs"_a, "out"_a, "bf16"_a, "repeats"_a)
      .def("ir",
           [](const Kernel &k, const std::string &stage) {
             return take(k.x86 ? k.x86->ir(stage) : k.nvidia->ir(stage));
           })
      .def_prop_ro("stages",
                   [](const Kernel &k) {
                     return k.x86 ? X86Kernel::stageNames() : NvidiaKernel::stageNames();
                   })
      .def_prop_ro("target", [](const Kernel &k) { return k.target; })
      .def_prop_ro("arguments",
                   [](const Kernel &k) {
                     nb::list out;
                     for (const KernelArgument &a : k.signature().arguments)
                       out.append(signatureDict(a));
                     return out;
                   })
      .def_prop_ro("operand_gradients",
                   [](const Kernel &k) {
                     // A backward's operand gradients after dq, dk, dv: the
                     // name of each one's operand, in that order.
                     nb::list out;
                     for (unsigned slot : k.signature().operandGradients)
                       for (const KernelArgument &a : k.signature().arguments)
                         if (std::find(a.slots.begin(), a.slots.end(), slot) != a.slots.end()) {
                           out.append(a.name);
                           break;
                         }
                     return out;
                   })
      .def_prop_ro("required_inputs",
                   [](const Kernel &k) { return k.signature().requiredInputs(); })
      .def_prop_ro(
          "dtype",
          [](const Kernel &k) { return dtypeName(k.x86 ? k.x86->dtype() : k.nvidia->dtype()); })
      .def_prop_ro("output_dtype",
                   [](const Kernel &k) {
                     return dtypeName(k.x86 ? k.x86->outputDtype() : k.nvidia->outputDtype());
                   })
      .def_prop_ro("compile_ms",
                   [](const Kernel &k) { return k.x86 ? k.x86->compileMilliseconds() : 0.0; })
      .def_prop_ro("from_disk",
                   [](const Kernel &k) { return k.x86 ? k.x86->loadedFromDisk() : false; })
      .def_prop_ro("ptx", [](const Kernel &k) { return k.nvidia ? k.nvidia->ptx() : ""; })
      .def_prop_ro("ptxas_log",
                   [](const Kernel &k) { return k.nvidia ? k.nvidia->ptxasLog() : ""; })
      .def(
          "call_shape",
          [](const Kernel &k, const std::vector<Buffer> &inputs, const std::vector<bool> &bf16) {
            std::vector<TensorView> views;
            for (size_t i = 0; i < inputs.size(); ++i)
              views.push_back(viewOf(inputs[i], i < bf16.size() && bf16[i], "input"));
            Shape s = take(k.x86 ? k.x86->callShape(views) : k.nvidia->callShape(views));
            return std::vector<int64_t>{s.batch,  s.queryHeads, s.kvHeads, s.querySeq,
                                        s.keySeq, s.headDim,    s.valueDim};
          },
          "inputs"_a, "bf16"_a)
      .def_prop_ro("id", [](const Kernel &k) {
        return uintptr_t(k.x86 ? k.x86->id() : static_cast<const void *>(&k.nvidia->ptx()));
      });

  nb::class_<Runtime>(m, "Runtime")
      .def(
          "__init__",
          [](Runtime *self, int threads, const std::string &cacheDir) {
            new (self) Runtime(RuntimeOptions{threads, cacheDir});
          },
          "threads"_a = 0, "cache_dir"_a = "")
      .def(
          "get",
          [](Runtime &rt, const std::string &source, const std::string &name,
             const std::string &target, std::optional<int64_t> queryTile,
             std::optional<int64_t> keyTile) {
            std::string error;
            std::optional<Target> parsed = Target::parse(target, &error);
            if (!parsed)
              throw Error(error);
            Spec spec = take(Spec::fromText(source, name));
            Kernel kernel;
            kernel.target = parsed->str();
            nb::gil_scoped_release release;
            if (parsed->kind == Target::Kind::X86) {
              std::optional<X86TileConfig> tiles;
              if (queryTile || keyTile) {
                tiles = Runtime::defaultX86Tiles();
                tiles->queryTile = queryTile.value_or(tiles->queryTile);
                tiles->keyTile = keyTile.value_or(tiles->keyTile);
              }
              Expected<X86Kernel> compiled = rt.getX86(spec, tiles);
              nb::gil_scoped_acquire acquire;
              kernel.x86 = take(std::move(compiled));
            } else {
              Expected<NvidiaKernel> compiled = rt.getNvidia(spec, parsed->arch);
              nb::gil_scoped_acquire acquire;
              kernel.nvidia = take(std::move(compiled));
            }
            return kernel;
          },
          "source"_a, "name"_a, "target"_a = "host", "query_tile"_a = nb::none(),
          "key_tile"_a = nb::none())
      .def(
          "get_backward",
          [](Runtime &rt, const std::string &source, const std::string &name, bool operandGradients,
             bool biasGradient) {
            Spec spec = take(Spec::fromText(source, name));
            Kernel kernel;
            kernel.target = "host";
            Expected<X86Kernel> compiled = [&] {
              nb::gil_scoped_release release;
              return rt.getX86Backward(spec, operandGradients, biasGradient);
            }();
            kernel.x86 = take(std::move(compiled));
            return kernel;
          },
          "source"_a, "name"_a, "operand_gradients"_a = true, "bias_gradient"_a = true)
      .def(
          "tune",
          [](Runtime &rt, const std::string &source, const std::string &name, int repeats,
             bool progress, const std::vector<std::pair<int64_t, int64_t>> &lengths) {
            Spec spec = take(Spec::fromText(source, name));
            TuneOptions options;
            options.repeats = repeats;
            options.progress = progress;
            options.lengths = lengths; // a shape class's (sq, skv) calls
            Expected<TuneReport> report = [&] {
              nb::gil_scoped_release release;
              return rt.tune(spec, options);
            }();
            TuneReport r = take(std::move(report));
            if (progress && !r.lengths.empty()) {
              std::string timed = "pejit.tune: timed at";
              for (const Shape &call : r.lengths)
                timed += " (sq=" + std::to_string(call.querySeq) +
                         ", skv=" + std::to_string(call.keySeq) + ")";
              nb::print(timed.c_str());
            }
            nb::list rows;
            for (const TuneCandidate &c : r.candidates) {
              nb::dict row;
              row["query_tile"] = c.tiles.queryTile;
              row["key_tile"] = c.tiles.keyTile;
              row["median_ms"] = c.medianMs;
              row["error"] = c.error;
              row["best"] = c.tiles.queryTile == r.best.queryTile &&
                            c.tiles.keyTile == r.best.keyTile && c.error.empty();
              rows.append(row);
            }
            return rows;
          },
          "source"_a, "name"_a, "repeats"_a = 5, "progress"_a = true,
          "lengths"_a = std::vector<std::pair<int64_t, int64_t>>())
      .def("stats", [](const Runtime &rt) {
        RuntimeStats s = rt.stats();
        nb::dict out;
        out["compiles"] = s.compiles;
        out["disk_hits"] = s.diskHits;
        out["memory_hits"] = s.memoryHits;
        return out;
      });

  m.def("host_target", &Runtime::hostTarget);
  m.def("cache_stats", [] {
    DiskCache cache = userCache();
    DiskCache::Stats s = cache.stats();
    nb::dict out;
    out["dir"] = cache.dir();
    out["entries"] = s.entries;
    out["bytes"] = s.bytes;
    out["tuned"] = s.tunedConfigs;
    out["hits"] = s.hits;
    out["misses"] = s.misses;
    return out;
  });
  m.def(
      "cache_list",
      [](bool verify) {
        nb::list out;
        for (const DiskCache::EntryInfo &e : userCache().list(verify)) {
          nb::dict row;
          row["name"] = e.name;
          row["summary"] = e.summary;
          row["bytes"] = e.bytes;
          row["age_s"] = e.ageSeconds;
          row["tuned"] = e.tuned;
          row["problem"] = e.problem;
          out.append(row);
        }
        return out;
      },
      "verify"_a = false);
  m.def("cache_clear", [] {
    std::string problem;
    int64_t removed = userCache().clear(&problem);
    if (!problem.empty())
      throw Error("cache clear: " + problem + " (" + std::to_string(removed) + " entries removed)");
    return removed;
  });

  bindBuilder(m);
}
