//===- OnnxEinsum.cpp - ONNX Einsum as permutes, sums and one matmul ------===//
//
// An equation of one or two operands ("bij,bjk->bik", "bii->bi"), with
// "..." for leading dimensions and the implicit output (the letters used
// once, sorted). A letter repeated within an operand first takes that
// operand's diagonal. Each operand then sums the letters no one else needs;
// two operands meet in one batched matmul: batch letters (in both and the
// output), the contracted ones (in both, not the output), and each side's
// own.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"
#include "lib/Frontend/Graph.h"

#include <algorithm>
#include <map>

using namespace kiln;
using namespace kiln::onnx_import;

namespace {
using Letters = std::string;

/// `term` with "..." written out as capital letters for the `rank`
/// dimensions it has to cover (the same capitals in every term).
Letters expand(const NodeContext &ctx, std::string term, int64_t rank, int64_t ellipsisRank) {
  size_t at = term.find("...");
  if (at == std::string::npos)
    return term;
  int64_t covered = ellipsisRank >= 0 ? ellipsisRank : rank - int64_t(term.size() - 3);
  if (covered < 0 || covered > 26)
    ctx.fail("'...' in '" + term + "' does not fit an operand of rank " + std::to_string(rank));
  Letters capitals;
  for (int64_t i = 0; i < covered; ++i)
    capitals += char('Z' - covered + 1 + i);
  return term.replace(at, 3, capitals);
}

/// `x` (labelled `have`) with each letter repeated within `have` reduced to
/// its diagonal: the two dimensions side by side, merged, every (n+1)-th
/// element picked.
Tensor diagonals(const NodeContext &ctx, Tensor x, Letters &have) {
  for (size_t b = 1; b < have.size(); ++b) {
    size_t a = have.find(have[b]);
    if (a == b)
      continue;
    int64_t n = x.shape()[a];
    if (x.shape()[b] != n)
      ctx.fail(std::string("letter '") + have[b] + "' has sizes " + std::to_string(n) + " and " +
               std::to_string(x.shape()[b]) + " within one operand");
    std::vector<int64_t> order;
    for (size_t i = 0; i < have.size(); ++i) {
      if (i != b)
        order.push_back(int64_t(i));
      if (i == a)
        order.push_back(int64_t(b));
    }
    Shape merged;
    for (size_t i = 0; i < order.size(); ++i)
      if (i != a + 1)
        merged.push_back(i == a ? n * n : x.shape()[size_t(order[i])]);
    std::vector<int64_t> picks;
    for (int64_t i = 0; i < n; ++i)
      picks.push_back(i * (n + 1));
    x = index_select(x.permute(order).reshape(merged), int64_t(a), picks);
    have.erase(b, 1);
    --b;
  }
  return x;
}

/// `x` (labelled `have`) summed over the letters not in `keep`.
Tensor sumAway(const Tensor &x, Letters &have, const Letters &keep) {
  std::vector<int64_t> axes;
  Letters left;
  for (size_t i = 0; i < have.size(); ++i) {
    if (keep.find(have[i]) == std::string::npos)
      axes.push_back(int64_t(i));
    else
      left += have[i];
  }
  have = left;
  return axes.empty() ? x : sum(x, axes);
}

/// `x` (labelled `have`) with its dimensions in the order `want`.
Tensor arranged(const Tensor &x, const Letters &have, const Letters &want) {
  if (have == want)
    return x;
  std::vector<int64_t> order;
  for (char c : want)
    order.push_back(int64_t(have.find(c)));
  return x.permute(order);
}

std::vector<Value> einsum(const NodeContext &ctx) {
  std::string equation;
  for (char c : ctx.attrString("equation", ""))
    if (c != ' ')
      equation += c;
  size_t arrow = equation.find("->");
  std::string inputs = equation.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = inputs.find(',', start);
    terms.push_back(inputs.substr(start, comma - start));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  if (terms.size() != ctx.numInputs() || terms.size() > 2)
    ctx.fail("equation '" + equation + "' for " + std::to_string(ctx.numInputs()) +
             " operands; Kiln takes one or two");
  std::vector<Tensor> x;
  std::vector<Letters> labels, written; // (written: before taking diagonals)
  int64_t ellipsisRank = -1;
  for (size_t i = 0; i < terms.size(); ++i) {
    x.push_back(ctx.tensor(i));
    int64_t rank = int64_t(x[i].shape().size());
    Letters l = expand(ctx, terms[i], rank, -1);
    if (terms[i].find("...") != std::string::npos)
      ellipsisRank = rank - int64_t(terms[i].size() - 3);
    if (int64_t(l.size()) != rank)
      ctx.fail("'" + terms[i] + "' names " + std::to_string(l.size()) +
               " dimensions of an operand of rank " + std::to_string(rank));
    written.push_back(l);
    x[i] = diagonals(ctx, x[i], l);
    labels.push_back(l);
  }
  Letters out;
  if (arrow != std::string::npos) {
    out = expand(ctx, equation.substr(arrow + 2), 0, std::max<int64_t>(ellipsisRank, 0));
  } else {
    std::map<char, int> uses;
    for (const Letters &l : written) // "ii" is a trace: i is used twice
      for (char c : l)
        ++uses[c];
    for (auto [c, n] : uses) // capitals ("...") sort first, as numpy's do
      if (n == 1)
        out += c;
  }
  std::map<char, int64_t> sizes;
  for (size_t i = 0; i < labels.size(); ++i)
    for (size_t a = 0; a < labels[i].size(); ++a) {
      auto [it, fresh] = sizes.insert({labels[i][a], x[i].shape()[a]});
      if (!fresh && it->second != x[i].shape()[a])
        ctx.fail(std::string("letter '") + labels[i][a] + "' has sizes " +
                 std::to_string(it->second) + " and " + std::to_string(x[i].shape()[a]));
    }
  for (char c : out)
    if (!sizes.count(c))
      ctx.fail(std::string("output letter '") + c + "' names no operand's dimension");
  if (labels.size() == 1) {
    Tensor y = sumAway(x[0], labels[0], out);
    return single(arranged(y, labels[0], out));
  }
  // Each side sums what neither the other side nor the output needs.
  for (int i = 0; i < 2; ++i)
    x[size_t(i)] = sumAway(x[size_t(i)], labels[size_t(i)], labels[size_t(1 - i)] + out);
  Letters batch, contracted, left, right;
  for (char c : labels[0]) {
    bool inRight = labels[1].find(c) != std::string::npos, inOut = out.find(c) != std::string::npos;
    (inRight ? (inOut ? batch : contracted) : left) += c;
  }
  for (char c : labels[1])
    if (labels[0].find(c) == std::string::npos)
      right += c;
  auto dims = [&](const Letters &l) {
    Shape s;
    for (char c : l)
      s.push_back(sizes[c]);
    return s;
  };
  int64_t b = numElements(dims(batch)), m = numElements(dims(left));
  int64_t k = numElements(dims(contracted)), n = numElements(dims(right));
  Tensor a = arranged(x[0], labels[0], batch + left + contracted).reshape({b, m, k});
  Tensor c = arranged(x[1], labels[1], batch + contracted + right).reshape({b, k, n});
  Letters have = batch + left + right;
  Tensor y = matmul(a, c).reshape(dims(have));
  return single(arranged(y, have, out));
}
} // namespace

void onnx_import::addEinsumConverter(ConverterTable &table) { table["Einsum"] = einsum; }
