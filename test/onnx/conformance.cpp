//===- conformance.cpp - ONNX's own node tests through Kiln ---------------===//
//
//   kiln-onnx-conformance DIR [--device D]... [--list-failures]
//                         [--known-failures FILE] [--verbose]
//
// DIR holds ONNX's node test cases, one folder per case with model.onnx
// and test_data_set_0/{input,output}_N.pb (test/onnx/generate.py writes
// ONNX 1.12's). A case whose operators the importer all converts is
// imported, compiled for each device (default: every device of the
// machine), run on its inputs and compared with its outputs (|got - want|
// <= 1e-5 + 1e-3 |want|, ONNX's backend-test tolerance, plus two units in
// the last place of an f16 or bf16 value; booleans and integers exactly).
// Non-float inputs (shapes, axes, indices, conditions), Resize's scales
// and Range's and OneHot's inputs are given to the importer as constants:
// Kiln specializes them at import. The table counts every case, per
// operator for single-operator cases and the function-expanded cases
// (several operators) in a row of their own: passed, failed, skipped with a
// reason, and not converted; the total is over all of them. With
// --known-failures (one case name per line, '#' comments) it exits 1 when
// a case outside the list fails or a listed case passes: CI keeps the
// list, and docs/onnx.md, true.
//
//===----------------------------------------------------------------------===//

#include "kiln/Import.h"
#include "kiln/kiln.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>

namespace fs = std::filesystem;

namespace {
/// ONNX 1.23's float8, float4, 4-bit and 2-bit types (17 to 26).
bool isNarrow(int type) { return type >= 17 && type <= 26; }

struct Row {
  /// Cases, and of them: passed, failed, skipped (outside what the importer
  /// takes, with a reason), and not converted (an operator it lacks).
  int cases = 0, passed = 0, failed = 0, skipped = 0, unconverted = 0;
};

/// Why a case is outside what the importer claims (run nowhere, counted as
/// skipped with this reason), or empty: tensors of f32, f16, bf16
/// (and integers or booleans known at import), inference.
std::string outsideTheClaim(const fs::path &dir, const onnx::ModelProto &model) {
  std::string name = dir.filename().string();
  if (name.find("training") != std::string::npos)
    return "training mode (Kiln imports inference graphs)";
  auto typeProblem = [](const onnx::TypeProto &type) -> std::string {
    if (!type.has_tensor_type())
      return "a sequence or map value";
    if (isNarrow(type.tensor_type().elem_type()))
      return "";
    switch (type.tensor_type().elem_type()) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT64:
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL:
      return "";
    default:
      return "data type " + std::to_string(type.tensor_type().elem_type()) +
             " (Kiln computes f32 (double demoted), f16, bf16, integers as int32, and bool)";
    }
  };
  for (const onnx::ValueInfoProto &info : model.graph().input())
    if (std::string why = typeProblem(info.type()); !why.empty())
      return "input '" + info.name() + "': " + why;
  for (const onnx::ValueInfoProto &info : model.graph().output()) {
    if (std::string why = typeProblem(info.type()); !why.empty())
      return "output '" + info.name() + "': " + why;
    if (info.type().tensor_type().elem_type() == 24)
      return "output '" + info.name() + "': float8e8m0 (Kiln does not round to it)";
  }
  return "";
}

bool readProto(const fs::path &path, google::protobuf::MessageLite &message) {
  std::ifstream file(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return file.good() || file.eof() ? message.ParseFromString(bytes) : false;
}

/// The value of IEEE half (`f16`) or bfloat16 bits.
double halfValue(uint16_t bits, bool f16) {
  if (!f16) {
    uint32_t wide = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &wide, 4);
    return f;
  }
  int exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  double sign = bits & 0x8000 ? -1.0 : 1.0;
  if (exponent == 0x1f)
    return mantissa ? NAN : sign * INFINITY;
  if (exponent == 0)
    return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

/// The value of one element of ONNX 1.23's packed and 8-bit types (17 to
/// 26), written from the formats' definitions: sign, exponent and
/// mantissa fields with a bias, and which codes are NaN and inf.
double narrowValue(uint32_t code, int type) {
  struct Layout {
    int exponentBits, mantissaBits, bias;
  };
  switch (type) {
  case 21: // uint4
  case 25: // uint2
    return code;
  case 22: // int4
    return code >= 8 ? double(code) - 16 : code;
  case 26: // int2
    return code >= 2 ? double(code) - 4 : code;
  case 24: // float8e8m0: 2^(code - 127)
    return code == 255 ? NAN : std::pow(2.0, double(code) - 127);
  default:
    break;
  }
  Layout l = type == 17 ? Layout{4, 3, 7} : type == 18 ? Layout{4, 3, 8}
           : type == 19 ? Layout{5, 2, 15} : type == 20 ? Layout{5, 2, 16}
                        : Layout{2, 1, 1}; // 23: float4e2m1
  uint32_t signMask = 1u << (l.exponentBits + l.mantissaBits);
  uint32_t field = (code & (signMask - 1)) >> l.mantissaBits;
  uint32_t fraction = code & ((1u << l.mantissaBits) - 1);
  uint32_t top = (1u << l.exponentBits) - 1;
  if ((type == 18 || type == 20) && code == 0x80)
    return NAN;
  if (type == 17 && field == top && fraction == 7)
    return NAN;
  if (type == 19 && field == top)
    return fraction ? NAN : (code & signMask ? -INFINITY : INFINITY);
  double magnitude = field == 0
                         ? fraction * std::pow(2.0, 1 - l.bias - l.mantissaBits)
                         : (1.0 + fraction / double(1u << l.mantissaBits)) *
                               std::pow(2.0, double(field) - l.bias);
  return code & signMask ? -magnitude : magnitude;
}

/// A test tensor's values as doubles (floats, integers, booleans).
std::vector<double> valuesOf(const onnx::TensorProto &t) {
  size_t n = 1;
  for (int64_t d : t.dims())
    n *= size_t(d);
  std::vector<double> out(n);
  const std::string &raw = t.raw_data();
  auto fromRaw = [&](auto sample) {
    using T = decltype(sample);
    for (size_t i = 0; i < n && (i + 1) * sizeof(T) <= raw.size(); ++i) {
      T v;
      std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
      out[i] = double(v);
    }
  };
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    if (raw.empty())
      std::copy(t.float_data().begin(), t.float_data().end(), out.begin());
    else
      fromRaw(float());
    break;
  case onnx::TensorProto::DOUBLE:
    raw.empty() ? (void)std::copy(t.double_data().begin(), t.double_data().end(), out.begin())
                : fromRaw(double());
    break;
  case onnx::TensorProto::INT64:
    raw.empty() ? (void)std::copy(t.int64_data().begin(), t.int64_data().end(), out.begin())
                : fromRaw(int64_t());
    break;
  case onnx::TensorProto::INT32:
    raw.empty() ? (void)std::copy(t.int32_data().begin(), t.int32_data().end(), out.begin())
                : fromRaw(int32_t());
    break;
  case onnx::TensorProto::BOOL:
  case onnx::TensorProto::UINT8:
    raw.empty() ? (void)std::copy(t.int32_data().begin(), t.int32_data().end(), out.begin())
                : fromRaw(uint8_t());
    break;
  case onnx::TensorProto::INT8:
    raw.empty() ? (void)std::copy(t.int32_data().begin(), t.int32_data().end(), out.begin())
                : fromRaw(int8_t());
    break;
  case onnx::TensorProto::INT16:
    raw.empty() ? (void)std::copy(t.int32_data().begin(), t.int32_data().end(), out.begin())
                : fromRaw(int16_t());
    break;
  case onnx::TensorProto::UINT16:
    raw.empty() ? (void)std::copy(t.int32_data().begin(), t.int32_data().end(), out.begin())
                : fromRaw(uint16_t());
    break;
  case onnx::TensorProto::UINT32:
    raw.empty() ? (void)std::copy(t.uint64_data().begin(), t.uint64_data().end(), out.begin())
                : fromRaw(uint32_t());
    break;
  case onnx::TensorProto::UINT64:
    raw.empty() ? (void)std::copy(t.uint64_data().begin(), t.uint64_data().end(), out.begin())
                : fromRaw(uint64_t());
    break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16: {
    bool f16 = t.data_type() == onnx::TensorProto::FLOAT16;
    for (size_t i = 0; i < n; ++i) {
      uint16_t bits = 0;
      if (raw.empty())
        bits = uint16_t(t.int32_data(int(i)));
      else if ((i + 1) * 2 <= raw.size())
        std::memcpy(&bits, raw.data() + i * 2, 2);
      out[i] = halfValue(bits, f16);
    }
    break;
  }
  default: {
    if (!isNarrow(t.data_type()))
      throw kiln::Error("output data type " + std::to_string(t.data_type()) + " is not compared");
    // Bytes in raw_data or one per int32_data entry, 1, 2 (4-bit types) or
    // 4 (2-bit) elements to a byte, the first in the low bits.
    int per = t.data_type() == 25 || t.data_type() == 26                          ? 4
              : t.data_type() == 21 || t.data_type() == 22 || t.data_type() == 23 ? 2
                                                                                  : 1;
    int bits = 8 / per;
    for (size_t i = 0; i < n; ++i) {
      size_t at = i / size_t(per);
      uint32_t byte = raw.empty() ? (at < size_t(t.int32_data_size()) ? uint32_t(t.int32_data(int(at))) : 0)
                                  : (at < raw.size() ? uint8_t(raw[at]) : 0);
      out[i] = narrowValue((byte >> (bits * int(i % size_t(per)))) & ((1u << bits) - 1),
                           t.data_type());
    }
    break;
  }
  }
  return out;
}

std::vector<double> resultOf(const kiln::Tensor &t) {
  switch (t.dtype()) {
  case kiln::DType::f32: {
    std::vector<float> v = t.to_vector<float>();
    return {v.begin(), v.end()};
  }
  case kiln::DType::i32: {
    std::vector<int32_t> v = t.to_vector<int32_t>();
    return {v.begin(), v.end()};
  }
  case kiln::DType::boolean: {
    std::vector<bool> v = t.to_vector<bool>();
    return {v.begin(), v.end()};
  }
  default: {
    std::vector<float> v = t.to(kiln::DType::f32).to_vector<float>();
    return {v.begin(), v.end()};
  }
  }
}

/// Older test data stores a bfloat16 value's bits as uint16: read it as
/// the bfloat16 the model declares.
void asDeclared(onnx::TensorProto &t, const onnx::ValueInfoProto &info) {
  if (t.data_type() == onnx::TensorProto::UINT16 && info.type().has_tensor_type() &&
      info.type().tensor_type().elem_type() == onnx::TensorProto::BFLOAT16)
    t.set_data_type(onnx::TensorProto::BFLOAT16);
}

/// Runs one case on every device; empty when it passed, else why not.
/// Throws kiln::Error for a case that cannot be imported or compiled.
std::string runCase(const fs::path &dir, onnx::ModelProto model,
                    const std::vector<kiln::Device> &devices) {
  fs::path data = dir / "test_data_set_0";
  std::set<std::string> initialized;
  for (const onnx::TensorProto &init : model.graph().initializer())
    initialized.insert(init.name());
  // Inputs in order; non-float ones become constants of the model, and so
  // do Resize's roi and scales (they decide shapes, which Kiln specializes).
  std::set<std::string> shapeInputs;
  for (const onnx::NodeProto &node : model.graph().node()) {
    if (node.op_type() == "Resize")
      for (int i = 1; i < std::min(node.input_size(), 3); ++i)
        shapeInputs.insert(node.input(i));
    if (node.op_type() == "Range" || node.op_type() == "OneHot") // values decide shapes
      for (const std::string &input : node.input())
        shapeInputs.insert(input);
    if (node.op_type() == "Loop" && node.input_size() > 0) // the trip count
      shapeInputs.insert(node.input(0));
  }
  // What those values are computed from decides shapes too (Range's function
  // body computes its Loop's trip count from the graph's inputs).
  for (int n = model.graph().node_size() - 1; n >= 0; --n) {
    const onnx::NodeProto &node = model.graph().node(n);
    bool decides = false;
    for (const std::string &output : node.output())
      decides |= shapeInputs.count(output) > 0;
    if (decides)
      for (const std::string &input : node.input())
        shapeInputs.insert(input);
  }
  std::map<std::string, kiln::Shape> shapes;
  std::vector<std::pair<std::string, onnx::TensorProto>> floats;
  int index = 0;
  for (const onnx::ValueInfoProto &info : model.graph().input()) {
    if (initialized.count(info.name()))
      continue;
    onnx::TensorProto t;
    if (!readProto(data / ("input_" + std::to_string(index++) + ".pb"), t))
      throw kiln::Error("cannot read input " + std::to_string(index - 1));
    asDeclared(t, info);
    bool floating = t.data_type() == onnx::TensorProto::FLOAT ||
                    t.data_type() == onnx::TensorProto::DOUBLE ||
                    t.data_type() == onnx::TensorProto::FLOAT16 ||
                    t.data_type() == onnx::TensorProto::BFLOAT16 ||
                    (t.data_type() >= 17 && t.data_type() <= 20) || t.data_type() == 23 ||
                    t.data_type() == 24; // float8 and float4: f32 inputs of their values
    if (floating && !shapeInputs.count(info.name())) {
      shapes[info.name()] = kiln::Shape(t.dims().begin(), t.dims().end());
      floats.push_back({info.name(), t});
    } else {
      t.set_name(info.name());
      *model.mutable_graph()->add_initializer() = t;
    }
  }
  kiln::OnnxModel m = kiln::import_onnx_bytes(model.SerializeAsString(), dir.filename().string(), shapes);
  std::vector<onnx::TensorProto> expected;
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    onnx::TensorProto t;
    if (!readProto(data / ("output_" + std::to_string(i) + ".pb"), t))
      throw kiln::Error("cannot read output " + std::to_string(i));
    if (int(i) < model.graph().output_size())
      asDeclared(t, model.graph().output(int(i)));
    expected.push_back(t);
  }
  for (const kiln::Device &device : devices) {
    kiln::CompileOptions options;
    options.targets = {device.api() == "cpu" ? "cpu" : "vulkan"};
    kiln::Program program = kiln::compile(m.outputs, m.inputs, options);
    std::vector<kiln::Tensor> inputs;
    for (size_t i = 0; i < m.input_names.size(); ++i) {
      const onnx::TensorProto &t = floats.at(i).second;
      std::vector<double> v = valuesOf(t);
      inputs.push_back(kiln::Tensor::from(std::vector<float>(v.begin(), v.end()),
                                          shapes.at(m.input_names[i]), m.inputs[i].dtype())
                           .to(device));
    }
    std::vector<kiln::Tensor> outputs = program.run(inputs);
    for (size_t o = 0; o < outputs.size(); ++o) {
      std::vector<double> got = resultOf(outputs[o]), want = valuesOf(expected[o]);
      kiln::Shape wantShape(expected[o].dims().begin(), expected[o].dims().end());
      if (outputs[o].shape() != wantShape)
        return device.name() + ": output " + std::to_string(o) + " has another shape";
      int type = expected[o].data_type();
      bool exact = type != onnx::TensorProto::FLOAT && type != onnx::TensorProto::DOUBLE &&
                   type != onnx::TensorProto::FLOAT16 && type != onnx::TensorProto::BFLOAT16;
      // A 16-bit result is rounded at other points than the reference's
      // (which rounds after every numpy step, Kiln where its kernels end):
      // two units in the last place of the value (2^-10 of f16, 2^-7 of
      // bf16, scaled to its binade) on top.
      int bits = type == onnx::TensorProto::FLOAT16 ? 10 : type == onnx::TensorProto::BFLOAT16 ? 7 : 0;
      for (size_t i = 0; i < got.size(); ++i) {
        bool same = (std::isnan(got[i]) && std::isnan(want[i])) || got[i] == want[i];
        double units = bits && want[i] != 0 && std::isfinite(want[i])
                           ? 2 * std::ldexp(1.0, std::ilogb(want[i]) - bits)
                           : 0.0;
        double tolerance = exact ? 0 : 1e-5 + 1e-3 * std::abs(want[i]) + units;
        if (!same && !(std::abs(got[i] - want[i]) <= tolerance)) {
          char line[200];
          std::snprintf(line, sizeof line, "%s: output %zu element %zu is %.7g, want %.7g",
                        device.name().c_str(), o, i, got[i], want[i]);
          return line;
        }
      }
    }
  }
  return "";
}
} // namespace

int main(int argc, char **argv) {
  const char *usage = "usage: kiln-onnx-conformance DIR [--device D]... [--list-failures] "
                      "[--known-failures FILE] [--verbose]\n";
  if (argc >= 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
    std::printf("%s", usage);
    return 0;
  }
  if (argc < 2) {
    std::fprintf(stderr, "%s", usage);
    return 2;
  }
  fs::path root = argv[1];
  std::error_code error;
  if (!fs::is_directory(root, error)) {
    std::fprintf(stderr, "kiln-onnx-conformance: %s is not a folder of ONNX node test cases\n%s",
                 argv[1], usage);
    return 2;
  }
  std::vector<kiln::Device> devices;
  bool listFailures = false, verbose = false;
  std::optional<std::set<std::string>> known;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--device") && i + 1 < argc) {
      devices.push_back(kiln::Device::parse(argv[++i]));
    } else if (!std::strcmp(argv[i], "--list-failures")) {
      listFailures = true;
    } else if (!std::strcmp(argv[i], "--verbose")) {
      verbose = true;
    } else if (!std::strcmp(argv[i], "--known-failures") && i + 1 < argc) {
      std::ifstream list(argv[++i]);
      if (!list) {
        std::fprintf(stderr, "kiln-onnx-conformance: cannot read %s\n", argv[i]);
        return 2;
      }
      known.emplace();
      for (std::string line; std::getline(list, line);)
        if (!line.empty() && line[0] != '#')
          known->insert(line.substr(0, line.find(' ')));
    } else {
      std::fprintf(stderr, "kiln-onnx-conformance: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (devices.empty())
    devices = kiln::devices();
  std::set<std::string> claimed;
  for (const std::string &op : kiln::onnx_operators())
    claimed.insert(op);

  std::vector<fs::path> cases;
  for (const fs::directory_entry &entry : fs::directory_iterator(root))
    if (fs::exists(entry.path() / "model.onnx"))
      cases.push_back(entry.path());
  std::sort(cases.begin(), cases.end());
  std::map<std::string, Row> rows;
  std::vector<std::string> failures, unexpected, skips;
  int unclaimed = 0;
  for (const fs::path &dir : cases) {
    onnx::ModelProto model;
    if (!readProto(dir / "model.onnx", model)) {
      failures.push_back(dir.filename().string() + ": model.onnx does not parse");
      continue;
    }
    std::set<std::string> ops;
    for (const onnx::NodeProto &node : model.graph().node())
      ops.insert(node.op_type());
    std::string missing;
    for (const std::string &op : ops)
      if (!claimed.count(op))
        missing += (missing.empty() ? "" : ", ") + op;
    std::string key = ops.size() == 1 ? *ops.begin() : "(several operators, expanded)";
    Row &row = rows[key];
    ++row.cases;
    if (!missing.empty()) {
      ++row.unconverted;
      ++unclaimed;
      continue;
    }
    if (std::string outside = outsideTheClaim(dir, model); !outside.empty()) {
      ++row.skipped;
      skips.push_back(dir.filename().string() + ": " + outside);
      continue;
    }
    std::string why;
    if (verbose)
      std::fprintf(stderr, "%s\n", dir.filename().c_str());
    try {
      why = runCase(dir, model, devices);
    } catch (const kiln::Error &e) {
      why = e.what();
    }
    std::string name = dir.filename().string();
    // A node of an operator version older than any the importer reads
    // (Slice-1 in an opset-9 model) is refused by design, with the fix.
    if (size_t at = why.find("predates the"); at != std::string::npos) {
      ++row.skipped;
      size_t start = why.rfind(": ", at);
      skips.push_back(name + ": " + why.substr(start + 2, why.find('\n', at) - start - 2));
      continue;
    }
    bool listed = known && known->count(name);
    if (why.empty()) {
      ++row.passed;
      if (listed)
        unexpected.push_back(name + ": passes now; take it off the known failures");
    } else {
      ++row.failed;
      size_t eol = why.find('\n');
      failures.push_back(name + ": " + why.substr(0, eol));
      if (known && !listed)
        unexpected.push_back(failures.back());
    }
  }
  int all = 0, passed = 0, failed = 0, skipped = 0;
  std::printf("| operator | cases | passed | failed | skipped | not converted |\n"
              "|---|---|---|---|---|---|\n");
  for (const auto &[op, row] : rows) {
    std::printf("| %s | %d | %d | %d | %d | %d |\n", op.c_str(), row.cases, row.passed,
                row.failed, row.skipped, row.unconverted);
    all += row.cases;
    passed += row.passed;
    failed += row.failed;
    skipped += row.skipped;
  }
  // The figure that counts is over every case, converted or not.
  std::printf("\n%d of all %d cases passed (%.1f%%) on %zu device(s): %d failed, %d skipped "
              "(outside what the importer takes), %d use an operator it does not convert\n",
              passed, all, all ? 100.0 * passed / all : 0.0, devices.size(), failed, skipped,
              unclaimed);
  if (listFailures) {
    for (const std::string &f : failures)
      std::printf("FAILED %s\n", f.c_str());
    for (const std::string &f : skips)
      std::printf("SKIPPED %s\n", f.c_str());
  }
  for (const std::string &u : unexpected)
    std::printf("UNEXPECTED %s\n", u.c_str());
  if (known)
    std::printf("%zu unexpected results against the known failures\n", unexpected.size());
  return unexpected.empty() ? 0 : 1;
}
