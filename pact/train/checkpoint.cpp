#include "pact/train/checkpoint.hpp"

#include <fmt/format.h>

#include "pact/ir/safetensors.hpp"

namespace pact::train {

void save_checkpoint(const std::string& path, const ParameterPack& pack, const Json& metadata,
                     const std::function<void()>& before_rename) {
  std::vector<std::pair<std::string, TensorView>> tensors;
  Json flags = Json::object();
  for (std::size_t i = 0; i < pack.values.size(); ++i) {
    tensors.emplace_back(pack.names[i], pack.values[i].as_view());
    flags[pack.names[i]] = Json{{"differentiable", static_cast<bool>(pack.differentiable[i])},
                                {"buffer", static_cast<bool>(pack.buffer[i])}};
  }
  const Json meta{{"schema", "pact.checkpoint.v1"}, {"parameters", flags}, {"metadata", metadata}};
  ir::write_safetensors(path, tensors, {{"pact.checkpoint", meta.dump()}}, before_rename);
}

Checkpoint load_checkpoint(const std::string& path, const ParameterPack* expected) {
  ir::SafetensorsFile file = ir::read_safetensors(path);
  auto it = file.metadata.find("pact.checkpoint");
  if (it == file.metadata.end())
    throw_error(ErrorCode::parse_error, "checkpoint", fmt::format("'{}' has no pact.checkpoint metadata", path));
  const Json meta = parse_json(it->second, path + " (pact.checkpoint metadata)");
  if (!meta.is_object() || meta.value("schema", "") != "pact.checkpoint.v1" || !meta.contains("parameters") ||
      !meta["parameters"].is_object()) {
    throw_error(ErrorCode::parse_error, "checkpoint", fmt::format("'{}': metadata is not pact.checkpoint.v1", path));
  }
  Checkpoint c;
  c.metadata = meta.value("metadata", Json::object());
  for (auto& [name, tensor] : file.tensors) {
    const Json& flags = meta["parameters"].contains(name) ? meta["parameters"][name] : Json::object();
    c.pack.names.push_back(name);
    c.pack.differentiable.push_back(flags.value("differentiable", false));
    c.pack.buffer.push_back(flags.value("buffer", false));
    c.pack.values.push_back(std::move(tensor));
  }
  if (expected != nullptr) {
    ParameterPack ordered;
    for (std::size_t i = 0; i < expected->names.size(); ++i) {
      const std::string& name = expected->names[i];
      auto at = std::find(c.pack.names.begin(), c.pack.names.end(), name);
      if (at == c.pack.names.end())
        throw_error(ErrorCode::invalid_argument, "checkpoint", fmt::format("'{}' has no tensor '{}'", path, name));
      const auto k = static_cast<std::size_t>(at - c.pack.names.begin());
      const Tensor& got = c.pack.values[k];
      const Tensor& want = expected->values[i];
      if (got.dtype() != want.dtype() || !(got.shape() == want.shape())) {
        throw_error(ErrorCode::invalid_argument, "checkpoint",
                    fmt::format("'{}': tensor '{}' is {}{}; the model needs {}{}", path, name, dtype_name(got.dtype()),
                                got.shape().to_string(), dtype_name(want.dtype()), want.shape().to_string()));
      }
      ordered.names.push_back(name);
      ordered.values.push_back(std::move(c.pack.values[k]));
      ordered.differentiable.push_back(expected->differentiable[i]);
      ordered.buffer.push_back(expected->buffer[i]);
    }
    if (ordered.names.size() != c.pack.names.size()) {
      throw_error(
          ErrorCode::invalid_argument, "checkpoint",
          fmt::format("'{}' holds {} tensors; the model has {}", path, c.pack.names.size(), ordered.names.size()));
    }
    c.pack = std::move(ordered);
  }
  return c;
}

}  // namespace pact::train
