//===- OnnxIndexing.cpp - ONNX gathers and scatters by known indices ------===//
//
// GatherElements, GatherND, ScatterElements, ScatterND, Compress and OneHot
// whose indices (or condition) are known at import, as exporters write
// them for fixed shapes: each becomes an index_select of the flattened
// data by positions computed here (and, for a scatter, a select between the
// data and the gathered updates). Indices the model computes at run time
// are an error naming the input.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"
#include "lib/Frontend/Graph.h"

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
/// Row-major strides of `shape`.
std::vector<int64_t> stridesOf(const Shape &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// `index` along an axis of `size`, negative counting from the end; an
/// error outside it (as ONNX and PyTorch refuse).
int64_t checkedIndex(const NodeContext &ctx, int64_t index, int64_t size) {
  int64_t at = index < 0 ? index + size : index;
  if (at < 0 || at >= size)
    ctx.fail("index " + std::to_string(index) + " is outside an axis of " + std::to_string(size));
  return at;
}

/// The elements of `x` at flat positions `at`, in `shape`. Booleans and
/// integers move as f32 (index_select moves floats), which holds every
/// boolean and every integer Kiln's i32 holds below 2^24: masks and ids.
Tensor pick(const Tensor &x, const std::vector<int64_t> &at, const Shape &shape) {
  DType dtype = x.dtype();
  bool moved = dtype == DType::boolean || dtype == DType::i32;
  Tensor flat = (moved ? x.to(DType::f32) : x).reshape({x.numel()});
  Tensor y = index_select(flat, 0, at).reshape(shape);
  if (dtype == DType::boolean)
    return ne(y, Tensor::scalar(0.0f));
  return dtype == DType::i32 ? y.to(DType::i32) : y;
}

/// Input `i`'s elements at flat positions `at`, in `shape`: integers known
/// at import stay known (a position table gathered by constant indices).
std::vector<Value> pickInput(const NodeContext &ctx, size_t i, const std::vector<int64_t> &at,
                             const Shape &shape) {
  if (const auto &ints = ctx.input(i).ints) {
    std::vector<int64_t> out;
    out.reserve(at.size());
    for (int64_t p : at)
      out.push_back((*ints)[size_t(p)]);
    return {Value::ofInts(std::move(out), shape)};
  }
  return single(pick(ctx.tensor(i), at, shape));
}

/// GatherElements' and ScatterElements' positions: for each element of
/// indices (of `shape`, the data's rank), the flat position in the data
/// (`in`) its coordinates name, the index replacing the one along `axis`.
std::vector<int64_t> elementPositions(const NodeContext &ctx, const std::vector<int64_t> &indices,
                                      const Shape &shape, const Shape &in, int64_t axis) {
  std::vector<int64_t> inStrides = stridesOf(in), strides = stridesOf(shape), at;
  for (int64_t i = 0; i < int64_t(indices.size()); ++i) {
    int64_t flat = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t coordinate = (i / strides[d]) % shape[d];
      if (int64_t(d) == axis)
        coordinate = checkedIndex(ctx, indices[size_t(i)], in[d]);
      else if (coordinate >= in[d])
        ctx.fail("indices reach past the data on axis " + std::to_string(d));
      flat += coordinate * inStrides[d];
    }
    at.push_back(flat);
  }
  return at;
}

std::vector<Value> gatherElements(const NodeContext &ctx) {
  const std::vector<int64_t> &indices = ctx.ints(1);
  const Shape &shape = ctx.input(1).shape, &in = ctx.input(0).shape;
  if (shape.size() != in.size())
    ctx.fail("indices of rank " + std::to_string(shape.size()) + " for data of rank " +
             std::to_string(in.size()));
  int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", 0), int64_t(in.size()));
  return pickInput(ctx, 0, elementPositions(ctx, indices, shape, in, axis), shape);
}

/// GatherND's (and ScatterND's) index tuples: for each of `tuples` rows of
/// `depth` indices, the flat position of the slice it names in `in` after
/// `batch` leading dimensions shared by data and indices.
std::vector<int64_t> sliceStarts(const NodeContext &ctx, const std::vector<int64_t> &indices,
                                 int64_t depth, const Shape &in, int64_t batch,
                                 int64_t tuplesPerBatch) {
  std::vector<int64_t> strides = stridesOf(in), starts;
  int64_t batchStride = batch ? strides[size_t(batch - 1)] : numElements(in);
  for (int64_t t = 0; t < int64_t(indices.size()) / depth; ++t) {
    int64_t flat = (t / tuplesPerBatch) * batchStride;
    for (int64_t k = 0; k < depth; ++k) {
      size_t d = size_t(batch + k);
      flat += checkedIndex(ctx, indices[size_t(t * depth + k)], in[d]) * strides[d];
    }
    starts.push_back(flat);
  }
  return starts;
}

std::vector<Value> gatherND(const NodeContext &ctx) {
  const std::vector<int64_t> &indices = ctx.ints(1);
  const Shape &shape = ctx.input(1).shape, &in = ctx.input(0).shape;
  int64_t batch = ctx.attrInt("batch_dims", 0);
  if (shape.empty() || batch < 0 || batch >= int64_t(shape.size()))
    ctx.fail("indices of rank " + std::to_string(shape.size()) + " with batch_dims " +
             std::to_string(batch));
  int64_t depth = shape.back();
  if (batch + depth > int64_t(in.size()))
    ctx.fail("index tuples of " + std::to_string(depth) + " into data of rank " +
             std::to_string(in.size()));
  Shape out(shape.begin(), shape.end() - 1);
  Shape slice(in.begin() + batch + depth, in.end());
  out.insert(out.end(), slice.begin(), slice.end());
  int64_t sliceSize = numElements(slice);
  int64_t tuplesPerBatch = numElements(Shape(shape.begin() + batch, shape.end() - 1));
  std::vector<int64_t> at;
  for (int64_t start : sliceStarts(ctx, indices, depth, in, batch, tuplesPerBatch))
    for (int64_t k = 0; k < sliceSize; ++k)
      at.push_back(start + k);
  return pickInput(ctx, 0, at, out);
}

/// A scatter of `updates` into `data`: `writes` holds (data position,
/// update element) pairs in order. Each round takes at most one write per
/// position (a position named twice gets its second write in the next
/// round), so every reduction (none, add, mul, max, min) applies in order.
Tensor scatter(const NodeContext &ctx, const Tensor &data, const Tensor &updates,
               const std::vector<std::pair<int64_t, int64_t>> &writes) {
  std::string reduction = ctx.attrString("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
      reduction != "min")
    ctx.fail("reduction '" + reduction + "' is not one of none, add, mul, max, min");
  size_t positions = size_t(data.numel());
  std::vector<std::vector<int64_t>> rounds; // per round: update element per position, or -1
  std::vector<size_t> seen(positions, 0);
  for (auto [position, element] : writes) {
    size_t round = seen[size_t(position)]++;
    if (round == rounds.size())
      rounds.emplace_back(positions, -1);
    rounds[round][size_t(position)] = element;
  }
  Tensor y = data;
  for (const std::vector<int64_t> &into : rounds) {
    std::vector<int64_t> source(positions);
    std::vector<float> written(positions);
    for (size_t i = 0; i < positions; ++i) {
      source[i] = into[i] < 0 ? 0 : into[i];
      written[i] = into[i] < 0 ? 0.0f : 1.0f;
    }
    Tensor moved = pick(updates, source, data.shape());
    Tensor mask = ne(Tensor::from(std::move(written), data.shape()), Tensor::scalar(0.0f));
    Tensor combined = reduction == "add"   ? y + moved
                      : reduction == "mul" ? y * moved
                      : reduction == "max" ? maximum(y, moved)
                      : reduction == "min" ? minimum(y, moved)
                                           : moved;
    y = where(mask, combined, y);
  }
  return y;
}

std::vector<Value> scatterElements(const NodeContext &ctx) {
  Tensor data = ctx.tensor(0), updates = ctx.tensor(2);
  const std::vector<int64_t> &indices = ctx.ints(1);
  const Shape &shape = ctx.input(1).shape, &in = data.shape();
  if (shape.size() != in.size() || updates.shape() != shape)
    ctx.fail("indices and updates must have one shape, of the data's rank");
  int64_t axis = normalizeAxis(ctx, ctx.attrInt("axis", 0), int64_t(in.size()));
  std::vector<int64_t> at = elementPositions(ctx, indices, shape, in, axis);
  std::vector<std::pair<int64_t, int64_t>> writes;
  for (int64_t i = 0; i < int64_t(at.size()); ++i)
    writes.push_back({at[size_t(i)], i});
  return single(scatter(ctx, data, updates, writes));
}

std::vector<Value> scatterND(const NodeContext &ctx) {
  Tensor data = ctx.tensor(0), updates = ctx.tensor(2);
  const std::vector<int64_t> &indices = ctx.ints(1);
  const Shape &shape = ctx.input(1).shape, &in = data.shape();
  if (shape.empty() || shape.back() > int64_t(in.size()))
    ctx.fail("index tuples longer than the data's rank");
  int64_t depth = shape.back();
  int64_t sliceSize = numElements(Shape(in.begin() + depth, in.end()));
  std::vector<std::pair<int64_t, int64_t>> writes;
  int64_t u = 0;
  for (int64_t start : sliceStarts(ctx, indices, depth, in, 0, numElements(shape) / depth))
    for (int64_t k = 0; k < sliceSize; ++k)
      writes.push_back({start + k, u++});
  if (u != updates.numel())
    ctx.fail("updates hold " + std::to_string(updates.numel()) + " elements for " +
             std::to_string(u) + " positions");
  return single(scatter(ctx, data, updates, writes));
}

std::vector<Value> compress(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  const std::vector<int64_t> &condition = ctx.ints(1);
  std::optional<int64_t> axis;
  if (ctx.attribute("axis"))
    axis = normalizeAxis(ctx, ctx.attrInt("axis", 0), int64_t(x.shape().size()));
  Tensor source = axis ? x : x.reshape({x.numel()});
  int64_t along = axis.value_or(0), size = source.shape()[size_t(along)];
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < int64_t(condition.size()) && i < size; ++i)
    if (condition[size_t(i)])
      kept.push_back(i);
  if (kept.empty())
    ctx.fail("the condition keeps nothing (Kiln makes no empty tensors)");
  return single(index_select(source, along, kept));
}

std::vector<Value> oneHot(const NodeContext &ctx) {
  std::vector<float> given = ctx.constantFloats(0); // (ONNX allows float indices)
  std::vector<int64_t> indices(given.begin(), given.end());
  std::vector<float> depthValue = ctx.constantFloats(1), values = ctx.constantFloats(2);
  if (depthValue.size() != 1 || values.size() != 2)
    ctx.fail("depth must be one value and values two");
  int64_t depth = int64_t(depthValue[0]);
  if (depth < 1)
    ctx.fail("a depth of " + std::to_string(depth));
  Shape shape = ctx.input(0).shape;
  int64_t axis = ctx.attrInt("axis", -1);
  int64_t rank = int64_t(shape.size()) + 1;
  axis = axis < 0 ? axis + rank : axis;
  if (axis < 0 || axis >= rank)
    ctx.fail("axis outside the result's rank " + std::to_string(rank));
  Shape out = shape;
  out.insert(out.begin() + axis, depth);
  checkedElements(out, ctx.where()); // (depth comes from the file)
  int64_t inner = numElements(Shape(shape.begin() + axis, shape.end()));
  std::vector<float> result(static_cast<size_t>(numElements(out)), values[0]);
  for (int64_t i = 0; i < int64_t(indices.size()); ++i) {
    int64_t at = indices[size_t(i)] < 0 ? indices[size_t(i)] + depth : indices[size_t(i)];
    if (at < 0 || at >= depth)
      continue; // outside the depth: all off, as ONNX says
    int64_t outer = i / inner, rest = i % inner;
    result[size_t((outer * depth + at) * inner + rest)] = values[1];
  }
  const Value &v = ctx.input(2);
  if (v.ints) // integer values: the result is integers known at import
    return {Value::ofInts(std::vector<int64_t>(result.begin(), result.end()), out)};
  return {Value::ofConstant(Tensor::from(std::move(result), out, v.tensor->dtype()))};
}
/// MaxUnpool: the values written at MaxPool's flat indices (known at
/// import) into zeros of the output shape (given, or what the pooling
/// came from: (in - 1) * stride + kernel - pads).
std::vector<Value> maxUnpool(const NodeContext &ctx) {
  Tensor x = ctx.tensor(0);
  const std::vector<int64_t> &indices = ctx.ints(1);
  const Shape &in = x.shape();
  size_t k = in.size() - 2;
  std::vector<int64_t> kernel = ctx.attrInts("kernel_shape").value_or(std::vector<int64_t>{});
  std::vector<int64_t> strides = ctx.attrInts("strides").value_or(std::vector<int64_t>(k, 1));
  std::vector<int64_t> pads = ctx.attrInts("pads").value_or(std::vector<int64_t>(2 * k, 0));
  if (in.size() < 3 || kernel.size() != k || strides.size() != k || pads.size() != 2 * k)
    ctx.fail("kernel_shape, strides and pads for an input of shape " + detail::shapeText(in));
  if (ctx.input(1).shape != in)
    ctx.fail("the indices' shape " + detail::shapeText(ctx.input(1).shape) + " is not the input's " +
             detail::shapeText(in));
  Shape out{in[0], in[1]};
  for (size_t i = 0; i < k; ++i)
    out.push_back((in[i + 2] - 1) * strides[i] + kernel[i] - pads[i] - pads[i + k]);
  int64_t elements = checkedElements(out, ctx.where());
  std::vector<std::pair<int64_t, int64_t>> writes;
  for (int64_t i = 0; i < int64_t(indices.size()); ++i)
    writes.push_back({checkedIndex(ctx, indices[size_t(i)], elements), i});
  Tensor zeros = Tensor::full(out, 0.0f);
  Tensor y = scatter(ctx, x.dtype() == DType::f32 ? zeros : zeros.to(x.dtype()), x, writes);
  // A larger output_shape holds that image at its start (indices are
  // positions in the pooled input's shape), zeros after.
  if (ctx.has(2)) {
    std::vector<int64_t> given = ctx.ints(2), low(out.size(), 0), high(out.size(), 0);
    for (size_t i = 0; i < out.size() && given.size() == out.size(); ++i)
      high[i] = given[i] - out[i];
    if (given.size() != out.size() || std::any_of(high.begin(), high.end(), [](int64_t h) { return h < 0; }))
      ctx.fail("output_shape " + detail::shapeText(given) + " is smaller than the unpooled " +
               detail::shapeText(out) + " or of another rank");
    y = kiln::pad(y, low, high);
  }
  return single(y);
}
} // namespace

void onnx_import::addIndexingConverters(ConverterTable &table) {
  table["MaxUnpool"] = maxUnpool;
  table["GatherElements"] = gatherElements;
  table["GatherND"] = gatherND;
  table["ScatterElements"] = scatterElements;
  table["Scatter"] = scatterElements; // Scatter-11: ScatterElements-11, deprecated
  table["ScatterND"] = scatterND;
  table["Compress"] = compress;
  table["OneHot"] = oneHot;
}
