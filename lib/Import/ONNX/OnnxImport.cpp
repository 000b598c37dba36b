//===- OnnxImport.cpp - an ONNX ModelProto recorded as a Kiln graph -------===//
//
// Reads the protobuf, checks the opset, turns initializers into weights and
// graph inputs into example inputs of known shapes, then converts the nodes
// in order (ONNX requires a topological order) through OnnxOps.cpp. Every
// failure names the model, the node and what to do.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"
#include "kiln/Import.h"
#include "lib/Frontend/GraphCache.h"
#include "lib/Frontend/OpRecording.h"

#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
std::string shapeText(const Shape &shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s.empty() ? "a scalar" : s;
}

} // namespace

int64_t onnx_import::checkedElements(const Shape &shape, const std::string &what) {
  const int64_t limit = int64_t(1) << 40;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw Error(what + ": dimension " + std::to_string(d) + " is not a size");
    if (__builtin_mul_overflow(n, d, &n) || n > limit)
      throw Error(what + ": shape " + shapeText(shape) + " has more than 2^40 elements");
  }
  return n;
}

std::optional<Value> onnx_import::foldInts(const std::vector<const Value *> &inputs,
                                           const std::function<int64_t(const int64_t *)> &fn) {
  size_t rank = 0;
  for (const Value *v : inputs) {
    if (!v || !v->ints)
      return std::nullopt;
    rank = std::max(rank, v->shape.size());
  }
  Shape out(rank, 1);
  for (const Value *v : inputs)
    for (size_t i = 0; i < v->shape.size(); ++i) {
      int64_t &o = out[rank - v->shape.size() + i];
      int64_t d = v->shape[i];
      if (d != 1 && o != 1 && d != o)
        return std::nullopt;
      if (d != 1)
        o = d;
    }
  int64_t n = 1;
  for (int64_t d : out)
    n *= d;
  // Each input's stride along each output dimension (0 where broadcast).
  std::vector<std::vector<int64_t>> strides;
  for (const Value *v : inputs) {
    std::vector<int64_t> st(rank, 0);
    int64_t stride = 1;
    for (size_t i = v->shape.size(); i-- > 0;) {
      if (v->shape[i] != 1)
        st[rank - v->shape.size() + i] = stride;
      stride *= v->shape[i];
    }
    strides.push_back(std::move(st));
  }
  std::vector<int64_t> result(static_cast<size_t>(n)), args(inputs.size());
  std::vector<int64_t> coord(rank, 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    for (size_t k = 0; k < inputs.size(); ++k) {
      int64_t at = 0;
      for (size_t d = 0; d < rank; ++d)
        at += coord[d] * strides[k][d];
      args[k] = (*inputs[k]->ints)[size_t(at)];
    }
    result[size_t(flat)] = fn(args.data());
    for (size_t d = rank; d-- > 0;) {
      if (++coord[d] < out[d])
        break;
      coord[d] = 0;
    }
  }
  return Value::ofInts(std::move(result), out);
}

//===----------------------------------------------------------------------===//
// NodeContext
//===----------------------------------------------------------------------===//

const Value &NodeContext::input(size_t i) const {
  if (!has(i))
    fail("input " + std::to_string(i) + " is missing",
         "the operator needs it; check the model's export");
  return *inputs[i];
}

Tensor NodeContext::tensor(size_t i) const {
  const Value &v = input(i);
  // An f32 scalar known at import (Clip's bounds, an Add's constant) is a
  // scalar of the graph, which a CPU program compiles as a literal.
  if (v.constant && v.tensor && v.shape.empty() && v.tensor->dtype() != DType::i32 &&
      v.tensor->dtype() != DType::boolean)
    return detail::scalarLike(v.tensor->to_vector<float>()[0], *v.tensor,
                              std::source_location::current());
  if (v.tensor)
    return *v.tensor;
  std::vector<float> data(v.ints->begin(), v.ints->end());
  return Tensor::from(std::move(data), v.shape);
}

Tensor NodeContext::tensorAs(size_t i, const Tensor &like) const {
  Tensor t = tensor(i);
  auto isFloat = [](DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16; };
  if (input(i).tensor && input(i).constant && t.dtype() != like.dtype() && isFloat(t.dtype()) &&
      isFloat(like.dtype()))
    return t.to(like.dtype());
  return t;
}

const std::vector<int64_t> &NodeContext::ints(size_t i) const {
  const Value &v = input(i);
  if (!v.ints)
    fail("input " + std::to_string(i) + " ('" + node.input(int(i)) +
             "') must be known when the model is imported (a shape, axes or pads), but the "
             "model computes it from its inputs",
         "export the model with constant shapes (e.g. torch.onnx.export with fixed input "
         "sizes and do_constant_folding=True)");
  return *v.ints;
}

std::vector<float> NodeContext::constantFloats(size_t i) const {
  const Value &v = input(i);
  if (v.ints)
    return std::vector<float>(v.ints->begin(), v.ints->end());
  if (!v.constant)
    fail("input " + std::to_string(i) + " ('" + node.input(int(i)) +
             "') must be known when the model is imported, but the model computes it or takes "
             "it as an input",
         "make it an initializer or a Constant");
  return v.tensor->to_vector<float>();
}

const onnx::AttributeProto *NodeContext::attribute(const std::string &name) const {
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeContext::attrInt(const std::string &name, int64_t otherwise) const {
  const onnx::AttributeProto *a = attribute(name);
  if (!a)
    return otherwise;
  if (a->type() != onnx::AttributeProto::INT)
    fail("attribute '" + name + "' must be an integer");
  return a->i();
}

float NodeContext::attrFloat(const std::string &name, float otherwise) const {
  const onnx::AttributeProto *a = attribute(name);
  if (!a)
    return otherwise;
  if (a->type() != onnx::AttributeProto::FLOAT)
    fail("attribute '" + name + "' must be a float");
  return a->f();
}

std::string NodeContext::attrString(const std::string &name, const std::string &otherwise) const {
  const onnx::AttributeProto *a = attribute(name);
  if (!a)
    return otherwise;
  if (a->type() != onnx::AttributeProto::STRING)
    fail("attribute '" + name + "' must be a string");
  return a->s();
}

std::optional<std::vector<int64_t>> NodeContext::attrInts(const std::string &name) const {
  const onnx::AttributeProto *a = attribute(name);
  if (!a)
    return std::nullopt;
  if (a->type() != onnx::AttributeProto::INTS)
    fail("attribute '" + name + "' must be a list of integers");
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::string NodeContext::where() const {
  std::string name = node.name().empty() ? "(unnamed)" : "'" + node.name() + "'";
  return "node " + name + " (" + node.op_type() + ", node " + std::to_string(index) + ")";
}

void NodeContext::fail(const std::string &what, const std::string &advice) const {
  throw Error(where() + ": " + what + (advice.empty() ? "" : "; " + advice));
}

int64_t onnx_import::normalizeAxis(const NodeContext &ctx, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1))
    ctx.fail("axis " + std::to_string(axis) + " is outside a rank-" + std::to_string(rank) +
             " value");
  return a;
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

namespace {
/// The bytes of an external-data tensor: `location` relative to the model's
/// folder, never outside it (no absolute path, no `..` escape, no symlink
/// leading out), `offset` and `length` within the file.
std::string readExternalData(const onnx::TensorProto &proto, const std::string &what,
                             const std::string &modelDir) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const onnx::StringStringEntryProto &entry : proto.external_data()) {
    auto number = [&](const std::string &text) {
      char *end = nullptr;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end || v < 0)
        throw Error(what + ": external data " + entry.key() + " '" + text + "' is not a size");
      return int64_t(v);
    };
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset")
      offset = number(entry.value());
    else if (entry.key() == "length")
      length = number(entry.value());
  }
  if (location.empty())
    throw Error(what + ": external data without a location");
  if (modelDir.empty())
    throw Error(what + ": its data is in the file '" + location +
                "' next to the model; import the model from its path (import_onnx, "
                "kiln-compile model.onnx), not from bytes");
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path base = fs::weakly_canonical(fs::path(modelDir).empty() ? "." : fs::path(modelDir), error);
  fs::path target = fs::weakly_canonical(base / location, error);
  auto [endOfBase, rest] = std::mismatch(base.begin(), base.end(), target.begin(), target.end());
  if (fs::path(location).is_absolute() || error || endOfBase != base.end())
    throw Error(what + ": its external data location '" + location +
                "' is outside the model's folder, which Kiln refuses (a model must not read "
                "other files); move the data next to the model");
  std::ifstream file(target, std::ios::binary);
  if (!file)
    throw Error(what + ": cannot open its external data file " + target.string());
  file.seekg(0, std::ios::end);
  int64_t size = int64_t(file.tellg());
  if (length < 0)
    length = size - offset;
  if (offset > size || length > size - offset)
    throw Error(what + ": external data at offset " + std::to_string(offset) + ", " +
                std::to_string(length) + " bytes, lies past the end of " + target.string() +
                " (" + std::to_string(size) + " bytes)");
  std::string bytes(static_cast<size_t>(length), '\0');
  file.seekg(offset);
  file.read(bytes.data(), length);
  if (!file)
    throw Error(what + ": cannot read its external data from " + target.string());
  return bytes;
}
} // namespace

namespace {
/// Bytes per element of ONNX data type `type` as stored (0: not one Kiln
/// reads).
int64_t elementBytesOf(int type) {
  switch (type) {
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::UINT64:
    return 8;
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::UINT32:
    return 4;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
    return 2;
  case onnx::TensorProto::BOOL:
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
    return 1;
  default:
    return 0;
  }
}

/// Bytes that `n` elements of `type` take as stored: int4, uint4 and
/// float4 pack two to a byte, int2 and uint2 four.
int64_t storedBytes(int type, int64_t n) {
  if (isNarrowFloat(type) && type != onnx_type::kFloat4E2M1)
    return n;
  if (type == onnx_type::kFloat8E8M0)
    return n;
  if (type == onnx_type::kFloat4E2M1 || integerBits(type) == 4)
    return (n + 1) / 2;
  if (integerBits(type) == 2)
    return (n + 3) / 4;
  return n * elementBytesOf(type);
}

/// The elements of a float8/float4 or int4/int2 tensor (`n` of them) from
/// its bytes: raw data, or int32_data with one stored byte per entry.
Value narrowValue(const onnx::TensorProto &proto, const Shape &shape, int64_t n,
                  const std::string &what) {
  int type = proto.data_type();
  int64_t bytes = storedBytes(type, n);
  bool raw = proto.has_raw_data();
  size_t have = raw ? proto.raw_data().size() : size_t(proto.int32_data_size());
  if (have != size_t(bytes))
    throw Error(what + ": " + std::to_string(have) + " bytes of data for shape " +
                shapeText(shape) + " of " + dataTypeName(type) + " (" + std::to_string(bytes) +
                " bytes); the file is damaged or was written by a broken exporter");
  auto byteAt = [&](int64_t i) -> uint32_t {
    return raw ? uint8_t(proto.raw_data()[size_t(i)]) : uint32_t(proto.int32_data(int(i))) & 0xff;
  };
  int perByte = integerBits(type) == 2                                      ? 4
                : integerBits(type) == 4 || type == onnx_type::kFloat4E2M1 ? 2
                                                                           : 1;
  int width = 8 / perByte;
  std::vector<uint32_t> elements(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    elements[size_t(i)] = (byteAt(i / perByte) >> (width * int(i % perByte))) & ((1u << width) - 1);
  Value v;
  if (integerBits(type)) {
    std::vector<int64_t> ints(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      ints[size_t(i)] = wrapInteger(elements[size_t(i)], type); // sign-extended
    v = Value::ofInts(std::move(ints), shape);
  } else {
    std::vector<float> floats(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      floats[size_t(i)] = float(narrowFloatValue(elements[size_t(i)], type));
    v = Value::ofConstant(Tensor::from(std::move(floats), shape));
  }
  v.elemType = type;
  return v;
}
} // namespace

std::optional<DType> onnx_import::computedDType(int64_t type) {
  switch (type) {
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::DOUBLE: // demoted, as IREE does by default
  case onnx_type::kFloat8E4M3FN:  // the narrow floats' values, in f32
  case onnx_type::kFloat8E4M3FNUZ:
  case onnx_type::kFloat8E5M2:
  case onnx_type::kFloat8E5M2FNUZ:
  case onnx_type::kFloat4E2M1:
  case onnx_type::kFloat8E8M0:
    return DType::f32;
  case onnx::TensorProto::FLOAT16:
    return DType::f16;
  case onnx::TensorProto::BFLOAT16:
    return DType::bf16;
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT16:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::UINT64:
  case onnx_type::kInt4:
  case onnx_type::kUint4:
  case onnx_type::kInt2:
  case onnx_type::kUint2:
    return DType::i32;
  case onnx::TensorProto::BOOL:
    return DType::boolean;
  default:
    return std::nullopt;
  }
}

Value onnx_import::valueOfTensorProto(const onnx::TensorProto &proto, const std::string &what,
                                      const std::string &modelDir) {
  Shape shape(proto.dims().begin(), proto.dims().end());
  int64_t n = checkedElements(shape, what);
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    // Checked against the shape before reading: no huge read for a bad size.
    int64_t bytes = storedBytes(proto.data_type(), n);
    for (const onnx::StringStringEntryProto &entry : proto.external_data())
      if (entry.key() == "length" && entry.value() != std::to_string(bytes))
        throw Error(what + ": external data of length " + entry.value() + " for shape " +
                    shapeText(shape) + " (" + std::to_string(bytes) + " bytes)");
    onnx::TensorProto inside = proto;
    inside.clear_external_data();
    inside.set_data_location(onnx::TensorProto::DEFAULT);
    inside.set_raw_data(readExternalData(proto, what, modelDir));
    return valueOfTensorProto(inside, what);
  }
  bool raw = proto.has_raw_data();
  auto sizeCheck = [&](size_t have, size_t elementBytes) {
    if (have != size_t(n) * elementBytes)
      throw Error(what + ": " + std::to_string(have) + " bytes of data for shape " +
                  shapeText(shape) + " (" + std::to_string(n) + " elements of " +
                  std::to_string(elementBytes) + " bytes); the file is damaged or was written "
                  "by a broken exporter");
  };
  switch (proto.data_type()) {
  case onnx::TensorProto::FLOAT: {
    sizeCheck(raw ? proto.raw_data().size() : size_t(proto.float_data_size()) * 4, 4);
    std::vector<float> data(static_cast<size_t>(n));
    if (raw) {
      std::memcpy(data.data(), proto.raw_data().data(), data.size() * 4);
    } else {
      std::copy(proto.float_data().begin(), proto.float_data().end(), data.begin());
    }
    return Value::ofConstant(Tensor::from(std::move(data), shape));
  }
  case onnx::TensorProto::DOUBLE: {
    sizeCheck(raw ? proto.raw_data().size() : size_t(proto.double_data_size()) * 8, 8);
    std::vector<double> data(static_cast<size_t>(n));
    if (raw) {
      std::memcpy(data.data(), proto.raw_data().data(), data.size() * 8);
    } else {
      std::copy(proto.double_data().begin(), proto.double_data().end(), data.begin());
    }
    return Value::ofConstant(Tensor::from(std::vector<float>(data.begin(), data.end()), shape));
  }
  case onnx::TensorProto::INT64: {
    sizeCheck(raw ? proto.raw_data().size() : size_t(proto.int64_data_size()) * 8, 8);
    std::vector<int64_t> data(static_cast<size_t>(n));
    if (raw) {
      std::memcpy(data.data(), proto.raw_data().data(), data.size() * 8);
    } else {
      std::copy(proto.int64_data().begin(), proto.int64_data().end(), data.begin());
    }
    Value v = Value::ofInts(std::move(data), shape);
    v.elemType = proto.data_type();
    return v;
  }
  case onnx::TensorProto::UINT32:
  case onnx::TensorProto::UINT64: {
    // (uint64_data holds one element per entry for both.)
    size_t bytes = size_t(elementBytesOf(proto.data_type()));
    sizeCheck(raw ? proto.raw_data().size() : size_t(proto.uint64_data_size()) * bytes, bytes);
    std::vector<int64_t> data(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      uint64_t v = 0;
      if (!raw)
        v = proto.uint64_data(int(i));
      else if (bytes == 4)
        v = [&] { uint32_t w; std::memcpy(&w, proto.raw_data().data() + i * 4, 4); return w; }();
      else
        std::memcpy(&v, proto.raw_data().data() + i * 8, 8);
      if (v > uint64_t(INT64_MAX))
        throw Error(what + ": the uint64 value " + std::to_string(v) +
                    " is larger than Kiln's integers hold (it computes integers as int32, "
                    "int64 at import)");
      data[size_t(i)] = int64_t(v);
    }
    Value v = Value::ofInts(std::move(data), shape);
    v.elemType = proto.data_type();
    return v;
  }
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16: {
    // (int32_data holds one element's bits per entry.)
    sizeCheck(raw ? proto.raw_data().size() : size_t(proto.int32_data_size()) * 2, 2);
    DType dtype = proto.data_type() == onnx::TensorProto::FLOAT16 ? DType::f16 : DType::bf16;
    std::vector<float> data(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      uint16_t bits = 0;
      if (raw)
        std::memcpy(&bits, proto.raw_data().data() + i * 2, 2);
      else
        bits = uint16_t(proto.int32_data(int(i)));
      data[size_t(i)] = halfBitsToFloat(bits, dtype);
    }
    return Value::ofConstant(Tensor::from(std::move(data), shape, dtype));
  }
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT16:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::BOOL: {
    int type = proto.data_type();
    size_t bytes = size_t(elementBytesOf(type));
    // (int32_data holds one element per entry whatever the type's width.)
    sizeCheck(raw ? proto.raw_data().size() : size_t(proto.int32_data_size()) * bytes, bytes);
    std::vector<int64_t> data(static_cast<size_t>(n));
    if (raw) {
      for (int64_t i = 0; i < n; ++i) {
        const char *at = proto.raw_data().data() + i * int64_t(bytes);
        auto read = [at](auto sample) {
          std::memcpy(&sample, at, sizeof sample);
          return int64_t(sample);
        };
        int64_t v = type == onnx::TensorProto::INT32    ? read(int32_t())
                    : type == onnx::TensorProto::INT16  ? read(int16_t())
                    : type == onnx::TensorProto::UINT16 ? read(uint16_t())
                    : type == onnx::TensorProto::INT8   ? read(int8_t())
                                                        : read(uint8_t());
        data[size_t(i)] = type == onnx::TensorProto::BOOL ? v != 0 : v;
      }
    } else {
      std::copy(proto.int32_data().begin(), proto.int32_data().end(), data.begin());
    }
    Value v = Value::ofInts(std::move(data), shape);
    v.elemType = proto.data_type();
    return v;
  }
  case onnx_type::kFloat8E4M3FN:
  case onnx_type::kFloat8E4M3FNUZ:
  case onnx_type::kFloat8E5M2:
  case onnx_type::kFloat8E5M2FNUZ:
  case onnx_type::kFloat4E2M1:
  case onnx_type::kFloat8E8M0:
  case onnx_type::kInt4:
  case onnx_type::kUint4:
  case onnx_type::kInt2:
  case onnx_type::kUint2:
    return narrowValue(proto, shape, n, what);
  default:
    throw Error(what + ": data type " + dataTypeName(proto.data_type()) +
                " is not supported (float, float16, bfloat16, double, the float8 types, "
                "float4e2m1, integers of 2 to 64 bits and bool are)");
  }
}

//===----------------------------------------------------------------------===//
// The model
//===----------------------------------------------------------------------===//

namespace {
/// The shape of graph input `info`, completed from `given`.
Shape inputShape(const onnx::ValueInfoProto &info, const std::map<std::string, Shape> &given,
                 const std::string &model) {
  const std::string &name = info.name();
  auto it = given.find(name);
  if (!info.type().has_tensor_type())
    throw Error(model + ": input '" + name + "' is not a tensor (sequences and maps are not "
                                               "supported)");
  const onnx::TypeProto::Tensor &type = info.type().tensor_type();
  if (!type.has_shape()) {
    if (it == given.end())
      throw Error(model + ": input '" + name + "' has no shape in the model; give it with "
                                                 "--input-shape " + name + "=1x3x224x224");
    return it->second;
  }
  Shape shape;
  std::vector<std::string> symbolic;
  for (const onnx::TensorShapeProto::Dimension &d : type.shape().dim()) {
    if (d.has_dim_value() && d.dim_value() > 0) {
      shape.push_back(d.dim_value());
    } else {
      shape.push_back(-1);
      symbolic.push_back(d.has_dim_param() ? "'" + d.dim_param() + "'" : "?");
    }
  }
  if (it == given.end()) {
    if (symbolic.empty())
      return shape;
    std::string dims;
    for (const std::string &s : symbolic)
      dims += (dims.empty() ? "" : ", ") + s;
    std::string example;
    for (size_t i = 0; i < shape.size(); ++i)
      example += (i ? "x" : "") + std::to_string(shape[i] < 0 ? 1 : shape[i]);
    throw Error(model + ": input '" + name + "' has dimensions left unknown (" + dims +
                "); give its shape with --input-shape " + name + "=" + example +
                " (import_onnx's input_shapes)");
  }
  const Shape &want = it->second;
  if (want.size() != shape.size())
    throw Error(model + ": input '" + name + "' has rank " + std::to_string(shape.size()) +
                " in the model, but the shape given is " + shapeText(want));
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] >= 0 && shape[i] != want[i])
      throw Error(model + ": input '" + name + "' has dimension " + std::to_string(i) + " = " +
                  std::to_string(shape[i]) + " in the model, but the shape given is " +
                  shapeText(want));
  return want;
}

/// Adds the nodes of `graph` and of its subgraphs (If branches, Loop and
/// Scan bodies) that the importer does not convert to `list`.
void collectUnconvertible(const onnx::GraphProto &graph, int64_t opset, std::string &list,
                          int &count, bool &outdated) {
  const std::map<std::string, Converter> &table = converters();
  for (int index = 0; index < graph.node_size(); ++index) {
    const onnx::NodeProto &node = graph.node(index);
    for (const onnx::AttributeProto &a : node.attribute()) {
      if (a.has_g())
        collectUnconvertible(a.g(), opset, list, count, outdated);
      for (const onnx::GraphProto &g : a.graphs())
        collectUnconvertible(g, opset, list, count, outdated);
    }
    std::string why;
    int64_t version = nodeVersion(node, opset);
    bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
    if (!defaultDomain && !version)
      why = "domain '" + node.domain() + "', of which Kiln does not import " + node.op_type();
    else if (!version)
      why = "not an operator of opset " + std::to_string(opset);
    else if (!table.count(node.op_type()))
      why = node.op_type() + "-" + std::to_string(version) + " is not converted";
    else if (int64_t oldest = defaultDomain ? operatorVersion(node.op_type(), kOldestOpset) : 1;
             version < oldest) {
      why = node.op_type() + "-" + std::to_string(version) + " predates the " +
            node.op_type() + "-" + std::to_string(oldest) + " that Kiln reads";
      outdated = true;
    } else
      continue;
    ++count;
    if (count <= 50)
      list += "\n  " + NodeContext(node, index, opset, {}).where() + ": " + why;
  }
}

/// Every node whose operator the importer does not convert, in one error:
/// a user sees all that the model needs at once, not one per attempt.
void requireConvertible(const onnx::GraphProto &graph, int64_t opset, const std::string &name) {
  std::string list;
  int count = 0;
  bool outdated = false;
  collectUnconvertible(graph, opset, list, count, outdated);
  if (count > 50)
    list += "\n  and " + std::to_string(count - 50) + " more";
  if (count)
    throw Error(name + ": " + std::to_string(count) + (count == 1 ? " node uses" : " nodes use") +
                " an operator that Kiln's importer does not convert (opset " +
                std::to_string(opset) + "):" + list +
                (outdated ? "\nconvert the model to a newer opset with "
                            "onnx.version_converter.convert_version(model, " +
                                std::to_string(kOldestOpset) + ")"
                          : "") +
                "\nsee docs/onnx.md for the operators it takes");
}

/// The dtype graph input `info` is computed in (computedDType); an integer
/// input's values outside i32 are refused where the input is given.
DType inputDType(const onnx::ValueInfoProto &info, const std::string &model) {
  int type = info.type().tensor_type().elem_type();
  if (std::optional<DType> dtype = computedDType(type))
    return *dtype;
  throw Error(model + ": input '" + info.name() + "' has ONNX data type " + std::to_string(type) +
              "; Kiln takes float, float16, bfloat16, integer and bool inputs");
}

/// Marks a node's tensor results as computed from constants when every
/// input is known at import and the operator is deterministic.
void markFromConstants(const onnx::NodeProto &node, const NodeContext &ctx,
                       std::vector<Value> &results) {
  const std::string &op = node.op_type();
  if (node.input_size() == 0 || op.rfind("Random", 0) == 0 || op == "Bernoulli" ||
      op == "Multinomial" || op == "Dropout")
    return;
  for (size_t i = 0; i < ctx.numInputs(); ++i)
    if (ctx.has(i) && !ctx.input(i).constant && !ctx.input(i).ints &&
        !ctx.input(i).fromConstants)
      return;
  for (Value &v : results)
    v.fromConstants = v.tensor.has_value();
}

/// Converts the nodes of `graph` in order into `values` (which `place`'s
/// scope reads), counting them and those folded at import.
void convertNodes(const onnx::GraphProto &graph, Scope &values, const GraphPlace &place,
                  int64_t &nodes, int64_t &folded) {
  const std::map<std::string, Converter> &table = converters();
  for (int index = 0; index < graph.node_size(); ++index) {
    const onnx::NodeProto &node = graph.node(index);
    std::vector<const Value *> inputs;
    for (const std::string &input : node.input()) {
      if (input.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      const Value *found = values.find(input);
      if (!found)
        throw Error(NodeContext(node, index, place.opset, {}).where() + ": input '" + input +
                    "' is produced by no earlier node, initializer or graph input; the graph "
                    "is malformed or not in topological order");
      inputs.push_back(found);
    }
    NodeContext ctx(node, index, place.opset, std::move(inputs), place);
    auto converter = table.find(node.op_type()); // (requireConvertible checked it)
    std::vector<Value> results;
    // Profiles and listings name the node's ops by the node.
    OpLabel label(node.name().empty() ? node.op_type() + " " + std::to_string(index)
                                      : node.name());
    try {
      results = converter->second(ctx);
    } catch (const Error &e) {
      std::string what = e.what();
      if (what.rfind("node ", 0) == 0)
        throw;
      ctx.fail(what); // a Tensor API error (shapes), with the node named
    } catch (const std::exception &e) {
      // A case a converter did not check (an empty attribute tensor): still
      // an error naming the node, never a crash.
      ctx.fail(std::string("malformed node (") + e.what() + ")");
    }
    ++nodes;
    markFromConstants(node, ctx, results);
    bool allFolded = true;
    for (int i = 0; i < node.output_size() && i < int(results.size()); ++i) {
      allFolded = allFolded && !results[size_t(i)].tensor;
      if (!node.output(i).empty())
        values[node.output(i)] = std::move(results[size_t(i)]);
    }
    if (allFolded)
      ++folded;
  }
}

} // namespace

std::vector<Value> NodeContext::runSubgraph(const onnx::GraphProto &graph,
                                            const std::vector<Value> &values) const {
  if (int64_t(values.size()) != graph.input_size())
    fail("its subgraph '" + graph.name() + "' takes " + std::to_string(graph.input_size()) +
         " inputs, but it is given " + std::to_string(values.size()));
  Scope scope(place.scope);
  for (const onnx::TensorProto &init : graph.initializer())
    scope[init.name()] = valueOfTensorProto(init, where() + ": initializer '" + init.name() + "'",
                                            place.modelDir);
  for (int i = 0; i < graph.input_size(); ++i)
    scope[graph.input(i).name()] = values[size_t(i)];
  GraphPlace inner{place.opset, place.modelDir, &scope};
  int64_t nodes = 0, folded = 0;
  convertNodes(graph, scope, inner, nodes, folded);
  std::vector<Value> out;
  for (const onnx::ValueInfoProto &info : graph.output()) {
    const Value *v = scope.find(info.name());
    if (!v)
      fail("its subgraph's output '" + info.name() + "' is computed by no node");
    out.push_back(*v);
  }
  return out;
}

namespace {
OnnxModel importModel(const onnx::ModelProto &model, const std::string &name,
                      const std::map<std::string, Shape> &givenShapes, const std::string &dir) {
  OnnxModel out;
  for (const onnx::OperatorSetIdProto &set : model.opset_import())
    if (set.domain().empty() || set.domain() == "ai.onnx")
      out.opset = set.version();
  // A model of the preview domains' operators alone (an optimizer step)
  // imports no default opset; its nodes are read at their version 1.
  for (const onnx::OperatorSetIdProto &set : model.opset_import())
    if (out.opset == 0 &&
        (set.domain() == "ai.onnx.preview.training" || set.domain() == "ai.onnx.preview"))
      out.opset = kNewestOpset;
  if (out.opset == 0)
    throw Error(name + ": the model imports no opset of the default ONNX domain; is it an ONNX "
                       "model?");
  if (out.opset > kNewestOpset)
    throw Error(name + ": opset " + std::to_string(out.opset) + " is newer than " +
                std::to_string(kNewestOpset) +
                " (ONNX 1.23's newest), the newest that Kiln imports; convert it with "
                "onnx.version_converter.convert_version(model, " +
                std::to_string(kNewestOpset) + ")");
  const onnx::GraphProto &graph = model.graph();
  requireConvertible(graph, out.opset, name);
  Scope values;
  for (const onnx::TensorProto &init : graph.initializer()) {
    // Labelled by its name: a compiled program lists the weight by it.
    OpLabel label(init.name());
    values[init.name()] =
        valueOfTensorProto(init, name + ": initializer '" + init.name() + "'", dir);
  }
  // Each input becomes a leaf holding zeros (compile's example inputs must
  // not be computed), so their sizes are capped together: a corrupt or
  // mistyped dimension must give this error, not exhaust the host.
  constexpr int64_t kMaxExampleElements = int64_t(1) << 28; // 1 GiB of f32
  int64_t exampleElements = 0;
  for (const onnx::ValueInfoProto &info : graph.input()) {
    if (values.holds(info.name()))
      continue; // an initializer listed as an input (older exporters)
    Shape shape = inputShape(info, givenShapes, name);
    DType dtype = inputDType(info, name);
    int64_t elements = checkedElements(shape, name + ": input '" + info.name() + "'");
    exampleElements += elements;
    if (exampleElements > kMaxExampleElements)
      throw Error(name + ": input '" + info.name() + "' of shape " + shapeText(shape) +
                  " takes the model's inputs past 2^28 elements (1 GiB), more than Kiln "
                  "compiles for; check its dimensions or give smaller ones with --input-shape");
    Tensor x = Tensor::from(std::vector<float>(static_cast<size_t>(elements), 0.0f), shape, dtype);
    values[info.name()] = Value::of(x);
    // A float8 or int4 input: f32 or i32 holding the type's values.
    int type = info.type().tensor_type().elem_type();
    if (isNarrowFloat(type) || type == onnx_type::kFloat8E8M0 ||
        (integerBits(type) > 0 && integerBits(type) < 8))
      values[info.name()].elemType = type;
    out.inputs.push_back(x);
    out.input_names.push_back(info.name());
  }
  for (const auto &[given, shape] : givenShapes) {
    (void)shape;
    if (!std::count(out.input_names.begin(), out.input_names.end(), given))
      throw Error(name + ": --input-shape names '" + given + "', which is not an input of the "
                                                             "model");
  }

  GraphPlace place{out.opset, dir, &values};
  try {
    convertNodes(graph, values, place, out.nodes, out.folded);
  } catch (const Error &e) {
    throw Error(name + ": " + e.what()); // the node's errors, with the model named
  }
  for (const onnx::ValueInfoProto &info : graph.output()) {
    const Value *found = values.find(info.name());
    if (!found)
      throw Error(name + ": output '" + info.name() + "' is computed by no node");
    const Value &v = *found;
    if (v.tensor) {
      out.outputs.push_back(*v.tensor);
    } else {
      // Integers known at import (a Shape output): an integer output is
      // stored as int32, anything else as f32 (exact up to 2^24).
      std::optional<DType> declared = info.type().has_tensor_type()
                                          ? computedDType(info.type().tensor_type().elem_type())
                                          : std::nullopt;
      bool asInt = declared == DType::i32;
      int64_t limit = asInt ? int64_t(INT32_MAX) : int64_t(1) << 24;
      for (int64_t i : *v.ints)
        if (i > limit || i < -limit - (asInt ? 1 : 0))
          throw Error(name + ": output '" + info.name() + "' holds " + std::to_string(i) +
                      (asInt ? ", outside the int32 that Kiln computes integers in"
                             : ", which f32 does not hold exactly"));
      if (asInt)
        out.outputs.push_back(
            Tensor::from(std::vector<int32_t>(v.ints->begin(), v.ints->end()), v.shape));
      else
        out.outputs.push_back(
            Tensor::from(std::vector<float>(v.ints->begin(), v.ints->end()), v.shape));
    }
    out.output_names.push_back(info.name());
  }
  if (out.outputs.empty())
    throw Error(name + ": the graph has no outputs");
  return out;
}
} // namespace

namespace {
onnx::ModelProto parseModel(const std::string &bytes, const std::string &name) {
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream stream(
      reinterpret_cast<const uint8_t *>(bytes.data()), int(std::min<size_t>(bytes.size(), INT32_MAX)));
  stream.SetRecursionLimit(64);
  if (bytes.size() > size_t(INT32_MAX) || !model.ParseFromCodedStream(&stream) ||
      !stream.ConsumedEntireMessage())
    throw Error(name + ": not a valid ONNX model (the protobuf does not parse: truncated, "
                       "damaged, or not an .onnx file)");
  if (!model.has_graph())
    throw Error(name + ": the model has no graph");
  return model;
}
} // namespace

OnnxModel kiln::import_onnx_bytes(const std::string &bytes, const std::string &name,
                                  const std::map<std::string, Shape> &input_shapes) {
  return importModel(parseModel(bytes, name), name, input_shapes, "");
}

OnnxModel kiln::import_onnx(const std::string &path,
                            const std::map<std::string, Shape> &input_shapes) {
  std::error_code folderCheck;
  if (std::filesystem::is_directory(path, folderCheck))
    throw Error(path + ": is a folder; give the .onnx file");
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw Error(path + ": cannot open it for reading");
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (bytes.empty())
    throw Error(path + ": the file is empty");
  std::string dir = std::filesystem::path(path).parent_path().string();
  return importModel(parseModel(bytes, path), path, input_shapes, dir.empty() ? "." : dir);
}
