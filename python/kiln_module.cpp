//===- kiln_module.cpp - Kiln's Python module (pybind11) ------------------===//
//
// The lazy Tensor API, devices, compile / save / load / run and the ONNX
// importer, as the `kiln._kiln` extension that python/kiln/__init__.py
// re-exports. Each op records the Python line that called it (an OpLabel of
// "file.py:line"), so profiles and device-conflict reports name the user's
// line, not this file's. Kiln's errors become Python exceptions of the same
// names, with the same messages.
//
//===----------------------------------------------------------------------===//

#include "kiln/Import.h"
#include "kiln/kiln.h"
#include "kiln/runtime/Version.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <frameobject.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace py = pybind11;
using namespace kiln;

namespace {
/// "file.py:line" of the Python code that called into the module.
std::string callerLine() {
  PyFrameObject *frame = PyEval_GetFrame();
  if (!frame)
    return "python";
  PyCodeObject *code = PyFrame_GetCode(frame);
  std::string file = py::str(code->co_filename);
  Py_DECREF(code);
  size_t slash = file.rfind('/');
  if (slash != std::string::npos)
    file = file.substr(slash + 1);
  return file + ":" + std::to_string(PyFrame_GetLineNumber(frame));
}

/// Records `make`'s ops under the caller's Python line.
template <typename F> Tensor recorded(F &&make) {
  OpLabel label(callerLine());
  return make();
}

DType dtypeOf(const std::string &name) {
  if (name == "float32" || name == "f32")
    return DType::f32;
  if (name == "float16" || name == "f16")
    return DType::f16;
  if (name == "bfloat16" || name == "bf16")
    return DType::bf16;
  if (name == "int32" || name == "i32")
    return DType::i32;
  if (name == "bool")
    return DType::boolean;
  throw Error("dtype '" + name + "' is not one of float32, float16, bfloat16, int32, bool");
}

/// A NumPy array as a tensor (float32, float16, float64 as f32, int32,
/// int64 as i32 where it fits, bool), on `device` or the default device.
Tensor fromArray(py::array array, std::optional<std::string> device) {
  OpLabel label(callerLine());
  Shape shape(array.shape(), array.shape() + array.ndim());
  std::optional<Device> on;
  if (device)
    on = Device::parse(*device);
  py::dtype dt = array.dtype();
  char kind = dt.kind();
  if (kind == 'i' || kind == 'u') {
    auto ints = py::array_t<int64_t, py::array::c_style | py::array::forcecast>(array);
    std::vector<int32_t> data(size_t(ints.size()));
    for (py::ssize_t i = 0; i < ints.size(); ++i) {
      int64_t v = ints.data()[i];
      if (v < INT32_MIN || v > INT32_MAX)
        throw Error("element " + std::to_string(i) + " is " + std::to_string(v) +
                    ", outside the int32 that Kiln computes integers in");
      data[size_t(i)] = int32_t(v);
    }
    return on ? Tensor::from(std::move(data), shape, *on) : Tensor::from(std::move(data), shape);
  }
  DType dtype = kind == 'b' ? DType::boolean : dt.itemsize() == 2 ? DType::f16 : DType::f32;
  if (kind != 'b' && kind != 'f')
    throw Error(std::string("a NumPy array of dtype ") + std::string(py::str(dt)) +
                "; Kiln takes float32, float16, float64, integers and bool");
  auto floats = py::array_t<float, py::array::c_style | py::array::forcecast>(array);
  std::vector<float> data(floats.data(), floats.data() + floats.size());
  if (dtype == DType::f32)
    return on ? Tensor::from(std::move(data), shape, *on) : Tensor::from(std::move(data), shape);
  // (An f16 or bool array put on a device is a copy of a host tensor: a
  // value computed from it, not an input a compiled program starts from.)
  Tensor t = Tensor::from(std::move(data), shape, dtype);
  return on ? t.to(*on) : t;
}

/// The tensor's values as a new NumPy array of its dtype (bf16 as float32).
py::array toArray(const Tensor &t) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  switch (t.dtype()) {
  case DType::i32: {
    std::vector<int32_t> v = t.to_vector<int32_t>();
    py::array_t<int32_t> out(shape);
    std::memcpy(out.mutable_data(), v.data(), v.size() * sizeof(int32_t));
    return out;
  }
  case DType::boolean: {
    std::vector<bool> v = t.to_vector<bool>();
    py::array_t<bool> out(shape);
    for (size_t i = 0; i < v.size(); ++i)
      out.mutable_data()[i] = v[i];
    return out;
  }
  case DType::f16: {
    std::vector<float> v = t.to(DType::f32).to_vector<float>();
    py::array_t<float> wide(shape);
    std::memcpy(wide.mutable_data(), v.data(), v.size() * sizeof(float));
    return wide.attr("astype")("float16");
  }
  default: {
    std::vector<float> v = (t.dtype() == DType::f32 ? t : t.to(DType::f32)).to_vector<float>();
    py::array_t<float> out(shape);
    std::memcpy(out.mutable_data(), v.data(), v.size() * sizeof(float));
    return out;
  }
  }
}

/// A tensor from a Tensor, a NumPy array or a Python number (a literal that
/// follows the other operand's device and dtype).
Tensor operand(py::handle value, const Tensor &like) {
  (void)like;
  if (py::isinstance<Tensor>(value))
    return value.cast<Tensor>();
  if (py::isinstance<py::float_>(value) || py::isinstance<py::int_>(value))
    return Tensor::scalar(value.cast<float>()); // a literal: follows `like`
  return fromArray(py::array::ensure(value), std::nullopt);
}

using Binary = Tensor (*)(const Tensor &, const Tensor &, std::source_location);
using Unary = Tensor (*)(const Tensor &, std::source_location);

void bindUnary(py::module_ &m, const char *name, Unary f) {
  m.def(name, [f](const Tensor &x) {
    return recorded([&] { return f(x, std::source_location::current()); });
  });
}

void bindBinary(py::module_ &m, const char *name, Binary f) {
  m.def(name, [f](const Tensor &a, py::handle b) {
    return recorded([&] { return f(a, operand(b, a), std::source_location::current()); });
  });
}

/// Program.run's inputs: a list in order, or a dict by the program's names.
std::vector<Tensor> programInputs(const Program &p, py::object given,
                                  const std::vector<std::string> &names) {
  std::vector<Tensor> inputs;
  auto asTensor = [](py::handle v) {
    return py::isinstance<Tensor>(v) ? v.cast<Tensor>() : fromArray(py::array::ensure(v), {});
  };
  if (py::isinstance<py::dict>(given)) {
    py::dict d = given;
    for (const std::string &name : names) {
      if (!d.contains(name))
        throw Error("no input '" + name + "' given; the program takes " + p.signature());
      inputs.push_back(asTensor(d[py::str(name)]));
    }
    if (d.size() != names.size())
      throw Error(std::to_string(d.size()) + " inputs given; the program takes " +
                  p.signature());
    return inputs;
  }
  for (py::handle v : given)
    inputs.push_back(asTensor(v));
  return inputs;
}

/// The input names of a program, from its signature's "input NAME: ..."
/// lines.
std::vector<std::string> inputNames(const Program &p) {
  std::vector<std::string> names;
  std::string s = p.signature();
  for (size_t at = 0; at < s.size();) {
    size_t end = s.find('\n', at);
    std::string line = s.substr(at, end - at);
    if (line.rfind("input ", 0) == 0)
      names.push_back(line.substr(6, line.find(':') - 6));
    if (end == std::string::npos)
      break;
    at = end + 1;
  }
  return names;
}
} // namespace

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "Kiln: a lazy tensor graph compiler (Tensor API, compile, load, run, ONNX)";
  m.attr("__version__") = KILN_VERSION;

  // Exceptions: kiln.Error, and its kinds, with Kiln's messages.
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<DeviceError> deviceError(m, "DeviceError", error.ptr());
  static py::exception<DeviceMismatchError> mismatch(m, "DeviceMismatchError", error.ptr());
  static py::exception<OutOfMemoryError> oom(m, "OutOfMemoryError", error.ptr());
  static py::exception<CompileError> compileError(m, "CompileError", error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const DeviceMismatchError &e) {
      mismatch(e.what());
    } catch (const DeviceError &e) {
      deviceError(e.what());
    } catch (const OutOfMemoryError &e) {
      oom(e.what());
    } catch (const CompileError &e) {
      compileError(e.what());
    } catch (const Error &e) {
      error(e.what());
    }
  });

  py::class_<Device>(m, "Device")
      .def(py::init([](const std::string &name) { return Device::parse(name); }))
      .def_property_readonly("name", &Device::name)
      .def_property_readonly("api", &Device::api)
      .def_property_readonly("adapter", &Device::adapter_name)
      .def("__eq__", [](const Device &a, const Device &b) { return a == b; })
      .def("__repr__", [](const Device &d) { return "kiln.Device('" + d.name() + "')"; })
      .def("__str__", &Device::name);
  m.def("devices", &devices, "Every device of the machine: cpu:0, then the Vulkan ones");
  m.def("default_device", &Device::default_device);
  m.def("device", [](const std::string &name) { return Device::parse(name); });

  py::class_<Tensor>(m, "Tensor")
      .def_property_readonly("shape",
                             [](const Tensor &t) {
                               return py::tuple(py::cast(std::vector<int64_t>(
                                   t.shape().begin(), t.shape().end())));
                             })
      .def_property_readonly("dtype", [](const Tensor &t) { return dtype_name(t.dtype()); })
      .def_property_readonly("device", &Tensor::device)
      .def_property_readonly("is_realized", &Tensor::is_realized)
      .def("numpy", &toArray, "Realizes the tensor and copies its values into a new array")
      .def("__array__", [](const Tensor &t, py::object) { return toArray(t); },
           py::arg("dtype") = py::none())
      .def("to",
           [](const Tensor &t, const std::string &what) {
             return recorded([&] {
               if (what.find(':') != std::string::npos)
                 return t.to(Device::parse(what));
               return t.to(dtypeOf(what));
             });
           })
      .def("to", [](const Tensor &t, const Device &d) { return recorded([&] { return t.to(d); }); })
      .def("reshape", [](const Tensor &t, std::vector<int64_t> s) {
        return recorded([&] { return t.reshape(Shape(s.begin(), s.end())); });
      })
      .def("permute", [](const Tensor &t, std::vector<int64_t> order) {
        return recorded([&] { return t.permute(order); });
      })
      .def("transpose", [](const Tensor &t, int64_t a, int64_t b) {
        return recorded([&] { return t.transpose(a, b); });
      })
      .def("__add__", [](const Tensor &a, py::handle b) { return recorded([&] { return add(a, operand(b, a)); }); })
      .def("__radd__", [](const Tensor &a, py::handle b) { return recorded([&] { return add(operand(b, a), a); }); })
      .def("__sub__", [](const Tensor &a, py::handle b) { return recorded([&] { return sub(a, operand(b, a)); }); })
      .def("__rsub__", [](const Tensor &a, py::handle b) { return recorded([&] { return sub(operand(b, a), a); }); })
      .def("__mul__", [](const Tensor &a, py::handle b) { return recorded([&] { return mul(a, operand(b, a)); }); })
      .def("__rmul__", [](const Tensor &a, py::handle b) { return recorded([&] { return mul(operand(b, a), a); }); })
      .def("__truediv__", [](const Tensor &a, py::handle b) { return recorded([&] { return div(a, operand(b, a)); }); })
      .def("__rtruediv__", [](const Tensor &a, py::handle b) { return recorded([&] { return div(operand(b, a), a); }); })
      .def("__matmul__", [](const Tensor &a, const Tensor &b) { return recorded([&] { return matmul(a, b); }); })
      .def("__neg__", [](const Tensor &a) { return recorded([&] { return neg(a); }); })
      .def("__repr__", [](const Tensor &t) {
        std::string s = "kiln.Tensor(shape=(";
        for (size_t i = 0; i < t.shape().size(); ++i)
          s += (i ? ", " : "") + std::to_string(t.shape()[i]);
        return s + (t.shape().size() == 1 ? ",)" : ")") + ", dtype=" + dtype_name(t.dtype()) +
               ", device=" + t.device().name() + ")";
      });

  m.def("tensor", &fromArray, py::arg("data"), py::arg("device") = py::none(),
        "A tensor holding a copy of a NumPy array (or anything np.asarray takes)");
  m.def("zeros", [](std::vector<int64_t> s, std::optional<std::string> device) {
    OpLabel label(callerLine());
    Shape shape(s.begin(), s.end());
    return device ? Tensor::zeros(shape, Device::parse(*device)) : Tensor::zeros(shape);
  }, py::arg("shape"), py::arg("device") = py::none());
  m.def("randn", [](std::vector<int64_t> s, std::optional<std::string> device) {
    OpLabel label(callerLine());
    Shape shape(s.begin(), s.end());
    return device ? Tensor::randn(shape, Device::parse(*device)) : Tensor::randn(shape);
  }, py::arg("shape"), py::arg("device") = py::none());
  m.def("manual_seed", &manual_seed);

  bindUnary(m, "neg", neg);
  bindUnary(m, "abs", kiln::abs);
  bindUnary(m, "exp", kiln::exp);
  bindUnary(m, "log", kiln::log);
  bindUnary(m, "sqrt", kiln::sqrt);
  bindUnary(m, "rsqrt", rsqrt);
  bindUnary(m, "tanh", kiln::tanh);
  bindUnary(m, "sin", kiln::sin);
  bindUnary(m, "cos", kiln::cos);
  bindUnary(m, "sigmoid", sigmoid);
  bindUnary(m, "relu", relu);
  bindUnary(m, "gelu", gelu);
  bindUnary(m, "erf", kiln::erf);
  bindBinary(m, "add", add);
  bindBinary(m, "sub", sub);
  bindBinary(m, "mul", mul);
  bindBinary(m, "div", div);
  bindBinary(m, "maximum", maximum);
  bindBinary(m, "minimum", minimum);
  bindBinary(m, "pow", kiln::pow);
  bindBinary(m, "eq", eq);
  bindBinary(m, "lt", lt);
  bindBinary(m, "gt", gt);
  m.def("where", [](const Tensor &c, const Tensor &a, py::handle b) {
    return recorded([&] { return where(c, a, operand(b, a)); });
  });
  m.def("matmul", [](const Tensor &a, const Tensor &b) { return recorded([&] { return matmul(a, b); }); });
  m.def("linear", [](const Tensor &x, const Tensor &w, std::optional<Tensor> b) {
    return recorded([&] { return linear(x, w, b ? *b : Tensor()); });
  }, py::arg("x"), py::arg("weight"), py::arg("bias") = py::none());
  m.def("softmax", [](const Tensor &x, int64_t axis) { return recorded([&] { return softmax(x, axis); }); },
        py::arg("x"), py::arg("axis") = -1);
  m.def("layer_norm", [](const Tensor &x, const Tensor &g, const Tensor &b, float eps) {
    return recorded([&] { return layer_norm(x, g, b, eps); });
  }, py::arg("x"), py::arg("gamma"), py::arg("beta"), py::arg("eps") = 1e-5f);
  m.def("conv2d", [](const Tensor &x, const Tensor &w, std::array<int64_t, 2> stride,
                     std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation,
                     int64_t groups) {
    return recorded([&] { return conv2d(x, w, stride, padding, dilation, groups); });
  }, py::arg("x"), py::arg("weight"), py::arg("stride") = std::array<int64_t, 2>{1, 1},
     py::arg("padding") = std::array<int64_t, 2>{0, 0},
     py::arg("dilation") = std::array<int64_t, 2>{1, 1}, py::arg("groups") = 1);
  auto reduction = [&](const char *name, Tensor (*f)(const Tensor &, std::vector<int64_t>, bool,
                                                     std::source_location)) {
    m.def(name, [f](const Tensor &x, std::vector<int64_t> axes, bool keepdims) {
      return recorded([&] { return f(x, axes, keepdims, std::source_location::current()); });
    }, py::arg("x"), py::arg("axes") = std::vector<int64_t>{}, py::arg("keepdims") = false);
  };
  reduction("sum", kiln::sum);
  reduction("mean", kiln::mean);
  reduction("amax", amax);
  reduction("amin", amin);
  m.def("concat", [](const std::vector<Tensor> &ts, int64_t axis) {
    return recorded([&] { return concat(ts, axis); });
  }, py::arg("tensors"), py::arg("axis") = 0);
  m.def("realize", [](const std::vector<Tensor> &ts) {
    py::gil_scoped_release unlocked;
    realize(ts);
  }, "Computes every tensor of the list in one graph");

  py::class_<Program>(m, "Program")
      .def("save", &Program::save, py::arg("path"))
      .def("run",
           [](const Program &p, py::object inputs) {
             std::vector<Tensor> given = programInputs(p, inputs, inputNames(p));
             std::vector<Tensor> outs;
             {
               py::gil_scoped_release unlocked;
               outs = p.run(given);
             }
             py::list result;
             for (const Tensor &t : outs)
               result.append(toArray(t));
             return result;
           },
           py::arg("inputs"),
           "Runs on a list of inputs in order, or a dict by name; NumPy arrays out")
      .def_property_readonly("device", &Program::device)
      .def_property_readonly("targets", &Program::targets)
      .def_property_readonly("signature", &Program::signature)
      .def("describe", &Program::describe, py::arg("target") = "")
      .def("__repr__", [](const Program &p) { return "kiln.Program(" + p.signature() + ")"; });

  m.def("compile",
        [](const std::vector<Tensor> &outputs, const std::vector<Tensor> &inputs,
           std::vector<std::string> targets, std::vector<std::string> input_names,
           std::vector<std::string> output_names, std::string cpu_isa) {
          CompileOptions options;
          options.targets = std::move(targets);
          options.input_names = std::move(input_names);
          options.output_names = std::move(output_names);
          options.cpu_isa = std::move(cpu_isa);
          py::gil_scoped_release unlocked;
          return compile(outputs, inputs, options);
        },
        py::arg("outputs"), py::arg("inputs"), py::arg("targets") = std::vector<std::string>{},
        py::arg("input_names") = std::vector<std::string>{},
        py::arg("output_names") = std::vector<std::string>{}, py::arg("cpu_isa") = "host",
        "Compiles the graph from `inputs` to `outputs` ahead of time");
  m.def("load",
        [](const std::string &path, std::optional<std::string> device) {
          return load(path, device ? Device::parse(*device) : Device::default_device());
        },
        py::arg("path"), py::arg("device") = py::none(), "Loads a .kiln file for a device");

  py::class_<OnnxModel>(m, "OnnxModel")
      .def_readonly("inputs", &OnnxModel::inputs)
      .def_readonly("outputs", &OnnxModel::outputs)
      .def_readonly("input_names", &OnnxModel::input_names)
      .def_readonly("output_names", &OnnxModel::output_names)
      .def_readonly("opset", &OnnxModel::opset)
      .def("compile",
           [](const OnnxModel &model, std::vector<std::string> targets, std::string cpu_isa) {
             CompileOptions options;
             options.targets = std::move(targets);
             options.input_names = model.input_names;
             options.output_names = model.output_names;
             options.cpu_isa = std::move(cpu_isa);
             py::gil_scoped_release unlocked;
             return compile(model.outputs, model.inputs, options);
           },
           py::arg("targets") = std::vector<std::string>{}, py::arg("cpu_isa") = "host");
  m.def("import_onnx",
        [](const std::string &path, std::map<std::string, std::vector<int64_t>> shapes) {
          std::map<std::string, Shape> given;
          for (auto &[name, s] : shapes)
            given[name] = Shape(s.begin(), s.end());
          return import_onnx(path, given);
        },
        py::arg("path"), py::arg("input_shapes") = std::map<std::string, std::vector<int64_t>>{},
        "Reads an ONNX model; input_shapes gives symbolic dimensions");
  m.def("onnx_operators", &onnx_operators);
}
