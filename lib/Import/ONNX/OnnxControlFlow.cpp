//===- OnnxControlFlow.cpp - ONNX If, Loop and Scan, unrolled at import ---===//
//
// Kiln compiles one static graph, so control flow is resolved when the model
// is imported:
//
// - If with a condition known at import converts the branch it takes; with
//   a condition computed at run time it converts both branches and selects
//   each output elementwise (both must give the same shapes).
// - Loop runs its body once per iteration, each time a fresh copy of the
//   body's nodes: the trip count and the condition must be known at import
//   (a computed condition would make the scan outputs' lengths depend on
//   the data), at most kMaxIterations times.
// - Scan runs its body once per slice of its scan inputs, forwards or
//   backwards, stacking the scan outputs along their axes.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"

#include <algorithm>
#include <cmath>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
using Values = std::vector<Value>;

/// Unrolling copies the body per iteration: past this a model's loop is
/// better served by a run-time loop Kiln does not have.
constexpr int64_t kMaxIterations = 4096;

/// `v` as a tensor: integers known at import as f32, as NodeContext::tensor
/// gives them.
Tensor asTensor(const Value &v) {
  if (v.tensor)
    return *v.tensor;
  return Tensor::from(std::vector<float>(v.ints->begin(), v.ints->end()), v.shape);
}

const onnx::GraphProto &graphAttribute(const NodeContext &ctx, const std::string &name) {
  const onnx::AttributeProto *a = ctx.attribute(name);
  if (!a || !a->has_g())
    ctx.fail("its '" + name + "' graph attribute is missing");
  return a->g();
}

/// The value known at import of a boolean or integer scalar input, or
/// nullopt when the model computes it.
std::optional<int64_t> knownScalar(const Value &v) {
  if (v.ints && v.ints->size() == 1)
    return v.ints->front();
  return std::nullopt;
}

/// A trip count known at import: folded integers, or a scalar computed from
/// constants (in float, as Range's function body does), realized here.
std::optional<int64_t> knownCount(const Value &v) {
  if (std::optional<int64_t> n = knownScalar(v))
    return n;
  if ((v.fromConstants || v.constant) && v.tensor &&
      std::all_of(v.shape.begin(), v.shape.end(), [](int64_t d) { return d == 1; }))
    return v.tensor->dtype() == DType::i32 || v.tensor->dtype() == DType::boolean
               ? int64_t(v.tensor->to(DType::i32).to_vector<int32_t>()[0])
               : int64_t(std::llround(v.tensor->to_vector<float>()[0]));
  return std::nullopt;
}

Values ifOp(const NodeContext &ctx) {
  const Value &cond = ctx.input(0);
  if (std::optional<int64_t> c = knownScalar(cond))
    return ctx.runSubgraph(graphAttribute(ctx, *c ? "then_branch" : "else_branch"), {});
  Values a = ctx.runSubgraph(graphAttribute(ctx, "then_branch"), {});
  Values b = ctx.runSubgraph(graphAttribute(ctx, "else_branch"), {});
  if (a.size() != b.size())
    ctx.fail("its branches give " + std::to_string(a.size()) + " and " +
             std::to_string(b.size()) + " outputs");
  Tensor c = asTensor(cond);
  if (c.dtype() != DType::boolean)
    c = ne(c, Tensor::scalar(0.0f));
  c = c.reshape({});
  Values out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].shape != b[i].shape)
      ctx.fail("its condition is computed at run time and its branches give output " +
                   std::to_string(i) + " different shapes",
               "Kiln selects between both branches elementwise; make the condition known at "
               "import or the shapes equal");
    if (a[i].ints && b[i].ints && *a[i].ints == *b[i].ints) {
      out.push_back(a[i]);
      continue;
    }
    Tensor x = asTensor(a[i]), y = asTensor(b[i]);
    if (x.dtype() != y.dtype())
      y = y.to(x.dtype());
    out.push_back(Value::of(where(c, x, y)));
  }
  return out;
}

/// `parts` stacked along a new axis `axis` (in order).
Value stacked(const NodeContext &ctx, const Values &parts, int64_t axis) {
  if (parts.empty())
    ctx.fail("a scan output of no iterations, whose shape ONNX leaves unknown");
  Shape one = parts.front().shape;
  for (const Value &p : parts)
    if (p.shape != one)
      ctx.fail("its iterations give a scan output of different shapes");
  int64_t rank = int64_t(one.size()) + 1;
  if (axis < -rank || axis >= rank)
    ctx.fail("scan output axis " + std::to_string(axis) + " is outside rank " +
             std::to_string(rank));
  axis = axis < 0 ? axis + rank : axis;
  Shape withAxis = one;
  withAxis.insert(withAxis.begin() + axis, 1);
  bool allInts = std::all_of(parts.begin(), parts.end(), [](const Value &p) { return p.ints; });
  if (allInts && axis == 0) {
    std::vector<int64_t> all;
    for (const Value &p : parts)
      all.insert(all.end(), p.ints->begin(), p.ints->end());
    Shape s = one;
    s.insert(s.begin(), int64_t(parts.size()));
    return Value::ofInts(std::move(all), s);
  }
  std::vector<Tensor> pieces;
  for (const Value &p : parts)
    pieces.push_back(asTensor(p).reshape(withAxis));
  return Value::of(pieces.size() == 1 ? pieces.front() : concat(pieces, axis));
}

Values loop(const NodeContext &ctx) {
  const onnx::GraphProto &body = graphAttribute(ctx, "body");
  std::optional<int64_t> trips;
  if (ctx.has(0)) {
    trips = knownCount(ctx.input(0));
    if (!trips)
      ctx.fail("its trip count is computed at run time",
               "Kiln unrolls loops at import; export with the count known");
  }
  std::optional<int64_t> cond = int64_t(1);
  if (ctx.has(1))
    cond = knownCount(ctx.input(1));
  if (!cond)
    ctx.fail("its condition is computed at run time",
             "Kiln unrolls loops at import, so the number of iterations must be known");
  if (!trips && !ctx.has(1))
    ctx.fail("it has neither a trip count nor a condition (it would never end)");
  size_t carriedCount = ctx.numInputs() - 2;
  if (int64_t(body.output_size()) < int64_t(carriedCount) + 1)
    ctx.fail("its body gives fewer outputs than the condition and the loop-carried values");
  size_t scanCount = size_t(body.output_size()) - 1 - carriedCount;
  Values carried;
  for (size_t i = 0; i < carriedCount; ++i)
    carried.push_back(ctx.input(2 + i));
  std::vector<Values> scans(scanCount);
  for (int64_t i = 0; (!trips || i < *trips) && *cond; ++i) {
    if (i >= kMaxIterations)
      ctx.fail("it runs more than " + std::to_string(kMaxIterations) +
               " iterations, past what Kiln unrolls at import");
    Values in = {Value::ofInts({i}, {}), Value::ofInts({1}, {})};
    in.insert(in.end(), carried.begin(), carried.end());
    Values out = ctx.runSubgraph(body, in);
    cond = knownScalar(out[0]);
    if (!cond)
      ctx.fail("its body computes the condition at run time",
               "Kiln unrolls loops at import, so the number of iterations must be known");
    std::copy(out.begin() + 1, out.begin() + 1 + long(carriedCount), carried.begin());
    for (size_t k = 0; k < scanCount; ++k)
      scans[k].push_back(out[1 + carriedCount + k]);
  }
  Values results = carried;
  for (const Values &scan : scans)
    results.push_back(stacked(ctx, scan, 0));
  return results;
}

/// Slice `index` of `v` along `axis`, without that axis.
Value sliceAlong(const Value &v, int64_t axis, int64_t index) {
  Shape rest = v.shape;
  rest.erase(rest.begin() + axis);
  if (v.ints) {
    int64_t inner = 1;
    for (size_t d = size_t(axis) + 1; d < v.shape.size(); ++d)
      inner *= v.shape[d];
    int64_t n = v.shape[size_t(axis)], outer = int64_t(v.ints->size()) / (n * inner);
    std::vector<int64_t> out;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < inner; ++k)
        out.push_back((*v.ints)[size_t((o * n + index) * inner + k)]);
    return Value::ofInts(std::move(out), rest);
  }
  return Value::of(v.tensor->slice(axis, index, index + 1).reshape(rest));
}

Values scan(const NodeContext &ctx) {
  const onnx::GraphProto &body = graphAttribute(ctx, "body");
  int64_t scanInputs = ctx.attrInt("num_scan_inputs", 0);
  if (scanInputs < 1 || scanInputs > int64_t(ctx.numInputs()))
    ctx.fail("num_scan_inputs " + std::to_string(scanInputs) + " for " +
             std::to_string(ctx.numInputs()) + " inputs");
  size_t states = ctx.numInputs() - size_t(scanInputs);
  if (body.output_size() < int(states))
    ctx.fail("its body gives fewer outputs than the states");
  size_t scanOutputs = size_t(body.output_size()) - states;
  auto listAttr = [&](const char *name, size_t n) {
    std::vector<int64_t> v = ctx.attrInts(name).value_or(std::vector<int64_t>(n, 0));
    if (v.size() != n)
      ctx.fail(std::string("'") + name + "' gives " + std::to_string(v.size()) +
               " entries for " + std::to_string(n));
    return v;
  };
  std::vector<int64_t> inAxes = listAttr("scan_input_axes", size_t(scanInputs));
  std::vector<int64_t> inDirs = listAttr("scan_input_directions", size_t(scanInputs));
  std::vector<int64_t> outAxes = listAttr("scan_output_axes", scanOutputs);
  std::vector<int64_t> outDirs = listAttr("scan_output_directions", scanOutputs);
  int64_t length = -1;
  for (size_t j = 0; j < size_t(scanInputs); ++j) {
    const Value &v = ctx.input(states + j);
    int64_t rank = int64_t(v.shape.size());
    if (inAxes[j] < -rank || inAxes[j] >= rank)
      ctx.fail("scan input axis " + std::to_string(inAxes[j]) + " is outside rank " +
               std::to_string(rank));
    inAxes[j] = inAxes[j] < 0 ? inAxes[j] + rank : inAxes[j];
    int64_t n = v.shape[size_t(inAxes[j])];
    if (length >= 0 && n != length)
      ctx.fail("its scan inputs have different lengths");
    length = n;
  }
  if (length > kMaxIterations)
    ctx.fail("it scans " + std::to_string(length) + " steps, past the " +
             std::to_string(kMaxIterations) + " that Kiln unrolls at import");
  Values carried;
  for (size_t i = 0; i < states; ++i)
    carried.push_back(ctx.input(i));
  std::vector<Values> outs(scanOutputs);
  for (int64_t t = 0; t < length; ++t) {
    Values in = carried;
    for (size_t j = 0; j < size_t(scanInputs); ++j)
      in.push_back(sliceAlong(ctx.input(states + j), inAxes[j], inDirs[j] ? length - 1 - t : t));
    Values out = ctx.runSubgraph(body, in);
    std::copy(out.begin(), out.begin() + long(states), carried.begin());
    for (size_t k = 0; k < scanOutputs; ++k)
      outs[k].push_back(out[states + k]);
  }
  Values results = carried;
  for (size_t k = 0; k < scanOutputs; ++k) {
    if (outDirs[k])
      std::reverse(outs[k].begin(), outs[k].end());
    results.push_back(stacked(ctx, outs[k], outAxes[k]));
  }
  return results;
}
} // namespace

void onnx_import::addControlFlowConverters(ConverterTable &table) {
  table["If"] = ifOp;
  table["Loop"] = loop;
  table["Scan"] = scan;
}
