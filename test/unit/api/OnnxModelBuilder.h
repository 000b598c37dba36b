//===- OnnxModelBuilder.h - ONNX models built in a test ---------*- C++ -*-===//
//
// The ONNX import tests build their models node by node with this.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_API_ONNXMODELBUILDER_H
#define KILN_TEST_UNIT_API_ONNXMODELBUILDER_H

#include "kiln/Import.h"
#include "kiln/Program.h"
#include "kiln/Tensor.h"

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace kiln::test {

/// A model under construction: one graph, the default domain at `opset`.
class ModelBuilder {
public:
  explicit ModelBuilder(int opset = 13) {
    model_.set_ir_version(8);
    onnx::OperatorSetIdProto *set = model_.add_opset_import();
    set->set_domain("");
    set->set_version(opset);
    graph_ = model_.mutable_graph();
    graph_->set_name("test");
  }
  /// An input (float unless `elemType` says otherwise); a negative
  /// dimension is symbolic ("batch").
  void input(const std::string &name, const Shape &dims,
             int elemType = onnx::TensorProto::FLOAT) {
    onnx::ValueInfoProto *info = graph_->add_input();
    info->set_name(name);
    onnx::TypeProto::Tensor *type = info->mutable_type()->mutable_tensor_type();
    type->set_elem_type(elemType);
    for (int64_t d : dims) {
      onnx::TensorShapeProto::Dimension *dim = type->mutable_shape()->add_dim();
      if (d < 0)
        dim->set_dim_param("batch");
      else
        dim->set_dim_value(d);
    }
  }
  void output(const std::string &name) { graph_->add_output()->set_name(name); }
  onnx::TensorProto *weights(const std::string &name, const Shape &dims,
                             const std::vector<float> &data) {
    onnx::TensorProto *t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims)
      t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char *>(data.data()), data.size() * 4));
    return t;
  }
  void ints(const std::string &name, const Shape &dims, const std::vector<int64_t> &data) {
    onnx::TensorProto *t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims)
      t->add_dims(d);
    for (int64_t v : data)
      t->add_int64_data(v);
  }
  onnx::NodeProto *node(const std::string &op, const std::vector<std::string> &inputs,
                        const std::vector<std::string> &outputs, const std::string &name = "") {
    onnx::NodeProto *n = graph_->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string &i : inputs)
      n->add_input(i);
    for (const std::string &o : outputs)
      n->add_output(o);
    return n;
  }
  static void attr(onnx::NodeProto *n, const std::string &name, int64_t v) {
    onnx::AttributeProto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(onnx::NodeProto *n, const std::string &name, float v) {
    onnx::AttributeProto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr(onnx::NodeProto *n, const std::string &name, const std::string &v) {
    onnx::AttributeProto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attr(onnx::NodeProto *n, const std::string &name, const std::vector<int64_t> &v) {
    onnx::AttributeProto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }
  std::string bytes() const { return model_.SerializeAsString(); }
  onnx::ModelProto &model() { return model_; }

private:
  onnx::ModelProto model_;
  onnx::GraphProto *graph_;
};

/// Imports `bytes`, compiles it for `device`'s api and runs it on `inputs`.
inline std::vector<Tensor> importAndRun(const std::string &bytes,
                                        const std::vector<Tensor> &inputs, const Device &device) {
  OnnxModel m = import_onnx_bytes(bytes, "model.onnx");
  CompileOptions options;
  options.targets = {device.api() == "cpu" ? "cpu" : "vulkan"};
  return compile(m.outputs, m.inputs, options).run(inputs);
}

} // namespace kiln::test

#endif // KILN_TEST_UNIT_API_ONNXMODELBUILDER_H
