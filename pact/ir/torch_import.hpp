#pragma once
/// PyTorch import (SPEC §7): the adapter from the captured-graph schema that tools/torch_export.py writes
/// ("pact.torch-export.v1", modelled on torch.export's serialized program) to Pact's IR. Every captured
/// node is an ATen operator overload with schema-named arguments; the adapter lowers the supported targets
/// to op-table ops (Note [ATen lowering] in torch_import.cpp), rejects any other target with a typed error
/// naming the node and the target, validates shapes through the op table, checks every lowered value
/// against the captured tensor metadata, and checks that the named inputs, outputs and weights exist.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "pact/ir/graph.hpp"
#include "pact/ir/safetensors.hpp"

namespace pact::ir {

/// The captured-graph schema this adapter reads.
inline constexpr std::string_view kTorchExportSchema = "pact.torch-export.v1";

/// One graph input of the captured signature.
struct TorchSource {
  enum class Kind { user_input, parameter, buffer, constant };
  std::string name;  ///< the IR node id as well
  Kind kind = Kind::user_input;
  bool persistent = true;  ///< buffers: part of the state dict
  ops::TensorType type;
};

/// One user output: the output spec's name and the IR node that produces it.
struct TorchOutput {
  std::string name;
  std::string node;
};

/// An imported model: the validated IR graph plus what ties it back to the capture.
struct TorchImport {
  Graph graph;
  std::string capture_method;        ///< "torch.export", "fx.symbolic_trace" or "make_fx"
  std::vector<TorchSource> sources;  ///< signature order; unused parameters are dropped from the graph
  std::vector<TorchOutput> outputs;
  std::map<std::string, Tensor> synthesized;     ///< constants the lowering created (scalars, ones), by node id
  std::map<std::string, std::string> module_of;  ///< IR node id -> innermost nn.Module path of its ATen node
  std::map<std::string, std::string>
      module_type;  ///< nn.Module path -> its class ("torchvision.models.resnet.BasicBlock")
  std::size_t aten_nodes = 0;
  /// tools/torch_export.py --structure-only: a module built on the meta device, so the capture holds shapes
  /// and parameter geometry and no values (no weights, example input or expected output).
  bool structure_only = false;

  /// The source named `name`, or nullptr.
  const TorchSource* find_source(std::string_view name) const noexcept;
};

/// Parses a captured-graph document and lowers it. Malformed documents are parse_error, unsupported targets
/// or argument values unsupported, inconsistent metadata invalid_argument; every message names the node
/// (and target or tensor) and `where`.
TorchImport import_torch_graph(std::string_view json_text, std::string_view where = "graph.json");

/// Checks that `weights` holds every parameter, buffer and constant of `model` with its declared dtype and
/// shape (invalid_argument naming the tensor otherwise). Extra tensors are allowed (tied or unused weights).
void check_torch_weights(const TorchImport& model, const SafetensorsFile& weights, std::string_view where);

/// A captured directory: DIR/graph.json imported, DIR/weights.safetensors read and checked.
struct TorchBundle {
  TorchImport model;
  SafetensorsFile weights;

  /// The value of every source node the graph keeps except user inputs: weights by name and synthesized
  /// constants.
  std::map<std::string, TensorView> state() const;
};

/// The ATen operator packets the adapter lowers ("convolution", "addmm", ...), sorted. docs/guides/pytorch-import.md
/// lists them (a lockstep test keeps the two equal).
std::vector<std::string> supported_aten_targets();

/// Loads a directory written by tools/torch_export.py (io_error when a file is missing). A structure-only
/// capture loads its graph alone (the bundle's weights stay empty).
TorchBundle load_torch_export(const std::string& dir);
/// Refuses (unsupported: structure_only_values_unsupported, naming `what` and the directory) to compute with a
/// structure-only capture: running, importing its weights or a real capture need values it does not have.
void require_weights(const TorchImport& model, std::string_view dir, std::string_view what);

}  // namespace pact::ir
