//===- Artifact.h - the .kiln file: a compiled model -------------*- C++ -*-===//
//
// A .kiln file (FlatBuffers, runtime/schema/kiln.fbs) holds a model's input
// and output signature, its weights, and one Program per target. Loading
// checks in layers before any device memory is touched: the FlatBuffers
// verifier, then meaning (every index in range, sizes equal shape x dtype
// without overflow, steps that define each value once before its use, a
// buffer plan that fits), then every kernel (SPIR-V framing and entry point,
// bindings against the step that dispatches it). A file that fails any of
// them is an error saying what is wrong, never a crash.
//
// Threading: an Artifact is plain data; a Model may be run from several
// threads at once (its weights are uploaded once, under a lock).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ARTIFACT_H
#define KILN_RUNTIME_ARTIFACT_H

#include "kiln/runtime/Profile.h"
#include "kiln/runtime/Program.h"

#include <mutex>

namespace kiln::rt {

/// The values an integer input must hold: low <= v < high, because the
/// model indexes `use` with them ("the 1000 rows of 'wte' (Gather
/// 'node_embedding')"). Checked on the host before a run.
struct ValueRange {
  int64_t low = 0, high = 0;
  std::string use;
};

struct Signature {
  std::string name;
  TensorType type;
  std::optional<ValueRange> range;
};

/// The first element of `data` (an input of signature `s`, host bytes)
/// outside its range, as an error naming the input, the element, the
/// range and what it indexes; ok without a range.
Status checkValueRange(const Signature &s, const void *data);

/// Where a Program input comes from.
struct InputSource {
  bool weight = false; ///< Artifact::weights[index], else the model input `index`
  uint32_t index = 0;
};

struct TargetProgram {
  std::string target; ///< "vulkan", "cpu": the api of the devices it runs on
  /// The named profile it was compiled for ("generic", "nvidia-hopper",
  /// "x86-64-v3"); empty for the device at hand (a live GPU, the host CPU).
  std::string profile;
  std::shared_ptr<const Program> program;
  std::vector<InputSource> sources; ///< one per program input
  /// "vulkan:nvidia-hopper", or "vulkan" without a profile.
  std::string variant() const { return profile.empty() ? target : target + ":" + profile; }
};

/// Read-only bytes kept alive by `owner`: a weight in a mapped .kiln file,
/// or bytes of its own.
class Bytes {
public:
  Bytes() = default;
  /// Takes the bytes.
  Bytes(std::vector<uint8_t> bytes) {
    auto held = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
    data_ = held->data();
    size_ = held->size();
    owner_ = std::move(held);
  }
  /// Refers to bytes that `owner` keeps alive (a file mapping).
  Bytes(const uint8_t *data, size_t size, std::shared_ptr<const void> owner)
      : data_(data), size_(size), owner_(std::move(owner)) {}
  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

private:
  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<const void> owner_;
};

struct Weight {
  std::string name;
  TensorType type;
  Bytes data;
};

struct Artifact {
  static constexpr uint16_t kVersionMajor = 0;
  static constexpr uint16_t kVersionMinor = 5;
  std::vector<Signature> inputs, outputs;
  std::vector<TargetProgram> programs;
  std::vector<Weight> weights;

  /// "vulkan, cpu".
  std::string targets() const;
};

/// A .kiln file ends in a seal of 48 bytes: the SHA-256 of everything
/// before it, that length (8 bytes, little-endian), and "KILNSEAL". Loading
/// checks it before it reads anything else, so a file damaged anywhere
/// (weights, metadata, kernels, machine code) is refused whole.
constexpr size_t kSealBytes = 48;
constexpr char kSealMagic[8] = {'K', 'I', 'L', 'N', 'S', 'E', 'A', 'L'};
/// Appends the seal to a file's bytes.
void sealArtifact(std::vector<uint8_t> &bytes);
/// The length of the sealed bytes, or an error saying how the file is
/// damaged (no seal, a length that differs, a digest that differs).
StatusOr<size_t> checkSeal(const uint8_t *data, size_t size, const std::string &what);

/// The file's bytes, sealed. Fails for a program that holds code this format cannot
/// store yet (CPU machine code from the JIT).
StatusOr<std::vector<uint8_t>> serializeArtifact(const Artifact &artifact);
/// Every check above; `what` names the file in errors. With `keepAlive`
/// (the owner of `data`, such as a file mapping), weights refer to `data`
/// rather than copy it.
StatusOr<Artifact> parseArtifact(const uint8_t *data, size_t size, const std::string &what,
                                 std::shared_ptr<const void> keepAlive = nullptr);
Status saveArtifact(const Artifact &artifact, const std::string &path);
/// Maps the file read-only (its weights are 32-byte aligned in it) and
/// parses it: weights are read from the mapping when they are uploaded,
/// never copied in memory first.
StatusOr<Artifact> loadArtifact(const std::string &path);

/// An artifact bound to one device: the program for its api, every program
/// device mapped to it, weights uploaded on the first run and kept.
class Model {
public:
  /// Fails, listing the targets present, when the file has no code for
  /// `device`'s api.
  static StatusOr<std::unique_ptr<Model>> create(std::shared_ptr<const Artifact> artifact,
                                                 Device &device);
  /// Binds the program's devices (a model split across devices: its steps
  /// name several) to `devices`, in the order the program lists them; one
  /// device runs every step (its transfers then copy nothing). All of one
  /// api. Fails naming the program's devices when the count is neither one
  /// nor theirs.
  static StatusOr<std::unique_ptr<Model>> create(std::shared_ptr<const Artifact> artifact,
                                                 const std::vector<Device *> &devices);

  const Artifact &artifact() const { return *artifact_; }
  /// The program it runs: of the file's programs for the device's api (its
  /// variants), the most specific whose every assumption the device meets.
  const TargetProgram &program() const { return *program_; }
  Device &device() const { return *devices_[0]; }
  /// Whether its steps run on more than one device.
  bool split() const {
    return std::any_of(devices_.begin(), devices_.end(),
                       [&](Device *d) { return d != devices_[0]; });
  }

  /// `inputs` in signature order (buffers on any device, or host bytes);
  /// checked against the signature, then run. Outputs in signature order.
  /// On a Vulkan device the program is replayed (ProgramReplay: one submit
  /// and one fence per run); with `options.poisonResults` or
  /// `options.constants`, or KILN_REPLAY=0, it is interpreted step by step.
  StatusOr<RunResult> run(const std::vector<ProgramInput> &inputs,
                          const RunOptions &options = {});

  /// Runs `runs` times with every dispatch timed (Profile.h: Vulkan
  /// timestamps, else the host clock one dispatch at a time).
  StatusOr<ProgramProfile> profile(const std::vector<ProgramInput> &inputs, int runs);

  /// Runs once per micro-batch, pipelined across the devices the model is
  /// split over (runPipelined: the first device starts batch b + 1 while
  /// the second works on batch b); on one device, run() batch after batch.
  /// Outputs per batch, in signature order.
  StatusOr<std::vector<RunResult>>
  runPipelined(const std::vector<std::vector<ProgramInput>> &batches,
               const RunOptions &options = {});

private:
  Model(std::shared_ptr<const Artifact> artifact, const TargetProgram &program,
        std::vector<Device *> devices)
      : artifact_(std::move(artifact)), program_(&program), devices_(std::move(devices)) {}

  std::shared_ptr<const Artifact> artifact_;
  const TargetProgram *program_;
  std::vector<Device *> devices_; // one per program device; device() is the first
  Status checkInputs(const std::vector<ProgramInput> &inputs) const;
  /// Weights on the device of the step that reads each, uploaded once: the
  /// replay binds them.
  Status uploadWeights(const RunOptions &options);
  /// The program inputs of one run: the weights kept, else their bytes.
  std::vector<ProgramInput> bind(const std::vector<ProgramInput> &inputs);

  std::mutex mutex_;
  std::vector<std::shared_ptr<Buffer>> weights_; // by weight index
  // Copies on the other devices that read them (a split model).
  std::vector<std::vector<std::shared_ptr<Buffer>>> weightsElsewhere_;
  std::mutex replayMutex_;
  bool replayTried_ = false;
  std::unique_ptr<ProgramReplay> replay_;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_ARTIFACT_H
