//===- CApi.cpp - the C API of kiln/runtime/kiln.h over the runtime ------===//
//
// Each handle wraps the C++ runtime's objects; each entry point turns a
// Status (or an exception, which must not cross into C) into a KilnStatus
// and the calling thread's last error.
//
//===----------------------------------------------------------------------===//

#include "kiln/runtime/kiln.h"

#include "kiln/runtime/Artifact.h"
#include "kiln/runtime/Registry.h"
#include "kiln/runtime/Version.h"

#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

using namespace kiln::rt;

struct KilnModel {
  std::shared_ptr<const Artifact> artifact;
  std::unique_ptr<Model> model;
};

struct KilnTensor {
  std::shared_ptr<Buffer> buffer;
  TensorType type;
};

namespace {
thread_local std::string lastError;

KilnStatus failed(KilnStatus status, std::string message) {
  lastError = std::move(message);
  return status;
}

KilnStatus failed(const Status &status) {
  KilnStatus code = KILN_INTERNAL;
  switch (status.code()) {
  case Status::Code::Ok: return KILN_OK;
  case Status::Code::InvalidArgument: code = KILN_INVALID_ARGUMENT; break;
  case Status::Code::NotFound: code = KILN_NOT_FOUND; break;
  case Status::Code::Unavailable: code = KILN_UNAVAILABLE; break;
  case Status::Code::OutOfMemory: code = KILN_OUT_OF_MEMORY; break;
  case Status::Code::Internal: code = KILN_INTERNAL; break;
  }
  return failed(code, status.message());
}

/// Runs `body`, turning an exception into KILN_INTERNAL (or out of memory).
template <typename F> KilnStatus guarded(const char *what, F &&body) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return failed(KILN_OUT_OF_MEMORY, std::string(what) + ": out of host memory");
  } catch (const std::exception &e) {
    return failed(KILN_INTERNAL, std::string(what) + ": " + e.what());
  }
}

KilnStatus nullArgument(const char *function, const char *argument) {
  return failed(KILN_INVALID_ARGUMENT,
                std::string(function) + ": '" + argument + "' is NULL");
}

KilnStatus bind(StatusOr<Artifact> loaded, const char *device, KilnModel **out) {
  if (!loaded.isOk())
    return failed(loaded.status());
  StatusOr<Device *> found =
      device && *device ? findDevice(device) : StatusOr<Device *>(&defaultDevice());
  if (!found.isOk())
    return failed(found.status());
  auto artifact = std::make_shared<const Artifact>(std::move(*loaded));
  StatusOr<std::unique_ptr<Model>> model = Model::create(artifact, **found);
  if (!model.isOk())
    return failed(model.status());
  *out = new KilnModel{std::move(artifact), std::move(*model)};
  return KILN_OK;
}

KilnStatus describe(const char *function, const KilnModel *model, bool input, size_t index,
                    const char **name, KilnElementType *type, size_t *rank,
                    const int64_t **shape) {
  if (!model)
    return nullArgument(function, "model");
  const std::vector<Signature> &list = input ? model->artifact->inputs : model->artifact->outputs;
  if (index >= list.size())
    return failed(KILN_INVALID_ARGUMENT, std::string(function) + ": index " +
                                             std::to_string(index) + " of " +
                                             std::to_string(list.size()) +
                                             (input ? " inputs" : " outputs"));
  const Signature &s = list[index];
  if (name)
    *name = s.name.c_str();
  if (type)
    *type = KilnElementType(s.type.element);
  if (rank)
    *rank = s.type.shape.size();
  if (shape)
    *shape = s.type.shape.data();
  return KILN_OK;
}
} // namespace

extern "C" {

const char *kiln_version(void) { return KILN_VERSION; }

const char *kiln_last_error(void) { return lastError.c_str(); }

KilnStatus kiln_model_load(const char *path, const char *device, KilnModel **model) {
  if (!path)
    return nullArgument("kiln_model_load", "path");
  if (!model)
    return nullArgument("kiln_model_load", "model");
  return guarded("kiln_model_load", [&] { return bind(loadArtifact(path), device, model); });
}

KilnStatus kiln_model_load_from_memory(const void *data, size_t size, const char *device,
                                       KilnModel **model) {
  if (!data)
    return nullArgument("kiln_model_load_from_memory", "data");
  if (!model)
    return nullArgument("kiln_model_load_from_memory", "model");
  return guarded("kiln_model_load_from_memory", [&] {
    // Copied: parseArtifact copies the weights it reads when nothing keeps
    // `data` alive, so the caller may free it at once.
    return bind(parseArtifact(static_cast<const uint8_t *>(data), size, "a .kiln in memory"),
                device, model);
  });
}

void kiln_model_free(KilnModel *model) { delete model; }

const char *kiln_model_device(const KilnModel *model) {
  return model ? model->model->device().name().c_str() : "";
}

size_t kiln_model_input_count(const KilnModel *model) {
  return model ? model->artifact->inputs.size() : 0;
}

size_t kiln_model_output_count(const KilnModel *model) {
  return model ? model->artifact->outputs.size() : 0;
}

KilnStatus kiln_model_input(const KilnModel *model, size_t index, const char **name,
                            KilnElementType *type, size_t *rank, const int64_t **shape) {
  return describe("kiln_model_input", model, true, index, name, type, rank, shape);
}

KilnStatus kiln_model_output(const KilnModel *model, size_t index, const char **name,
                             KilnElementType *type, size_t *rank, const int64_t **shape) {
  return describe("kiln_model_output", model, false, index, name, type, rank, shape);
}

KilnStatus kiln_tensor_create(const KilnModel *model, KilnElementType type, const int64_t *shape,
                              size_t rank, const void *data, size_t bytes, KilnTensor **tensor) {
  const char *fn = "kiln_tensor_create";
  if (!model)
    return nullArgument(fn, "model");
  if (!tensor)
    return nullArgument(fn, "tensor");
  if (!data && bytes)
    return nullArgument(fn, "data");
  if (rank && !shape)
    return nullArgument(fn, "shape");
  if (int(type) < KILN_F32 || int(type) > KILN_BF16)
    return failed(KILN_INVALID_ARGUMENT, std::string(fn) + ": element type " +
                                             std::to_string(int(type)) + " is not a KilnElementType");
  return guarded(fn, [&] {
    TensorType t{std::vector<int64_t>(shape, shape + rank), ElementType(type)};
    for (int64_t d : t.shape)
      if (d < 0)
        return failed(KILN_INVALID_ARGUMENT, std::string(fn) + ": a negative dimension in " +
                                                 t.str());
    if (t.bytes() != bytes)
      return failed(KILN_INVALID_ARGUMENT, std::string(fn) + ": " + std::to_string(bytes) +
                                               " bytes for " + t.str() + ", which takes " +
                                               std::to_string(t.bytes()));
    Device &device = model->model->device();
    StatusOr<std::shared_ptr<Buffer>> buffer = device.allocate(bytes);
    if (!buffer.isOk())
      return failed(buffer.status());
    if (bytes)
      if (Status s = device.upload(**buffer, data, bytes); !s.isOk())
        return failed(s);
    *tensor = new KilnTensor{std::move(*buffer), std::move(t)};
    return KILN_OK;
  });
}

void kiln_tensor_free(KilnTensor *tensor) { delete tensor; }

KilnStatus kiln_tensor_info(const KilnTensor *tensor, KilnElementType *type, size_t *rank,
                            const int64_t **shape) {
  if (!tensor)
    return nullArgument("kiln_tensor_info", "tensor");
  if (type)
    *type = KilnElementType(tensor->type.element);
  if (rank)
    *rank = tensor->type.shape.size();
  if (shape)
    *shape = tensor->type.shape.data();
  return KILN_OK;
}

size_t kiln_tensor_bytes(const KilnTensor *tensor) { return tensor ? tensor->type.bytes() : 0; }

KilnStatus kiln_tensor_read(const KilnTensor *tensor, void *data, size_t bytes) {
  const char *fn = "kiln_tensor_read";
  if (!tensor)
    return nullArgument(fn, "tensor");
  if (!data && bytes)
    return nullArgument(fn, "data");
  if (bytes != tensor->type.bytes())
    return failed(KILN_INVALID_ARGUMENT, std::string(fn) + ": " + std::to_string(bytes) +
                                             " bytes for " + tensor->type.str() +
                                             ", which takes " +
                                             std::to_string(tensor->type.bytes()));
  return guarded(fn, [&] {
    if (bytes == 0)
      return KILN_OK;
    Status s = tensor->buffer->device().download(*tensor->buffer, data, bytes);
    return s.isOk() ? KILN_OK : failed(s);
  });
}

KilnStatus kiln_model_run(KilnModel *model, const KilnTensor *const *inputs, size_t input_count,
                          KilnTensor **outputs, size_t output_count) {
  const char *fn = "kiln_model_run";
  if (!model)
    return nullArgument(fn, "model");
  const Artifact &a = *model->artifact;
  if (input_count != a.inputs.size() || output_count != a.outputs.size())
    return failed(KILN_INVALID_ARGUMENT,
                  std::string(fn) + ": " + std::to_string(input_count) + " inputs and " +
                      std::to_string(output_count) + " outputs given; the model takes " +
                      std::to_string(a.inputs.size()) + " and gives " +
                      std::to_string(a.outputs.size()));
  if ((input_count && !inputs) || (output_count && !outputs))
    return nullArgument(fn, input_count && !inputs ? "inputs" : "outputs");
  return guarded(fn, [&] {
    std::vector<ProgramInput> given(input_count);
    for (size_t i = 0; i < input_count; ++i) {
      const KilnTensor *t = inputs[i];
      const Signature &s = a.inputs[i];
      if (!t)
        return failed(KILN_INVALID_ARGUMENT,
                      std::string(fn) + ": input " + std::to_string(i) + " is NULL");
      if (t->type.shape != s.type.shape || t->type.element != s.type.element)
        return failed(KILN_INVALID_ARGUMENT, std::string(fn) + ": input '" + s.name + "' is " +
                                                 t->type.str() + "; the model takes " +
                                                 s.type.str());
      given[i].buffer = t->buffer;
    }
    StatusOr<RunResult> result = model->model->run(given);
    if (!result.isOk())
      return failed(result.status());
    for (size_t o = 0; o < output_count; ++o)
      outputs[o] = new KilnTensor{result->outputs[o], a.outputs[o].type};
    return KILN_OK;
  });
}

} // extern "C"
