#include "pact/train/checkpoint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <type_traits>

#include "pact/ir/safetensors.hpp"

namespace pact::train {

namespace {

constexpr std::string_view kOptimizerPrefix = "__optimizer__/";

// The optimizer's per-parameter state vectors, by their checkpoint slot name (const or not as `s`).
template <class State>
auto optimizer_slots(State& s) {
  using Slot = std::conditional_t<std::is_const_v<State>, const std::vector<std::optional<Tensor>>,
                                  std::vector<std::optional<Tensor>>>;
  return std::array<std::pair<std::string_view, Slot*>, 3>{
      {{"m", &s.adam.m}, {"v", &s.adam.v}, {"velocity", &s.sgd.velocity}}};
}

}  // namespace

void save_checkpoint(const std::string& path, const ParameterPack& pack, const Json& metadata,
                     const OptimizerState* optimizer, const TrainingPosition& position,
                     const std::function<void()>& before_rename) {
  std::vector<std::pair<std::string, TensorView>> tensors;
  Json flags = Json::object();
  for (std::size_t i = 0; i < pack.values.size(); ++i) {
    if (pack.names[i].rfind(kOptimizerPrefix, 0) == 0)
      throw_error(ErrorCode::invalid_argument, "checkpoint",
                  fmt::format("parameter name '{}' uses the optimizer state's prefix", pack.names[i]));
    tensors.emplace_back(pack.names[i], pack.values[i].as_view());
    flags[pack.names[i]] = Json{{"differentiable", static_cast<bool>(pack.differentiable[i])},
                                {"buffer", static_cast<bool>(pack.buffer[i])}};
  }
  Json meta{{"schema", "pact.checkpoint.v1"}, {"parameters", flags}, {"metadata", metadata}};
  if (optimizer != nullptr) {
    for (const auto& [slot, values] : optimizer_slots(*optimizer)) {
      if (values->size() > pack.values.size())
        throw_error(ErrorCode::invalid_argument, "checkpoint",
                    fmt::format("optimizer state '{}' has {} entries for {} parameters", slot, values->size(),
                                pack.values.size()));
      for (std::size_t i = 0; i < values->size(); ++i) {
        if ((*values)[i])
          tensors.emplace_back(fmt::format("{}{}/{}", kOptimizerPrefix, slot, pack.names[i]), (*values)[i]->as_view());
      }
    }
    meta["progress"] = Json{{"steps", position.steps},
                            {"kernel_calls", position.kernel_calls},
                            {"epochs", position.epochs},
                            {"adam_step", optimizer->adam.step}};
  }
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
  std::vector<std::pair<std::string, Tensor>> state_tensors;  // __optimizer__/SLOT/NAME
  for (auto& [name, tensor] : file.tensors) {
    if (name.rfind(kOptimizerPrefix, 0) == 0) {
      state_tensors.emplace_back(name, std::move(tensor));
      continue;
    }
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
  if (meta.contains("progress")) {
    const Json& p = meta["progress"];
    auto count = [&](const char* key) -> std::int64_t {
      const auto v = p.is_object() && p.contains(key) ? json_int64(p[key]) : std::nullopt;
      if (!v || *v < 0)
        throw_error(ErrorCode::parse_error, "checkpoint",
                    fmt::format("'{}': progress.{} is not a non-negative integer", path, key));
      return *v;
    };
    TrainingProgress progress;
    progress.position.steps = count("steps");
    progress.position.kernel_calls = static_cast<std::uint64_t>(count("kernel_calls"));
    const std::int64_t epochs = count("epochs");
    if (epochs > std::numeric_limits<int>::max())
      throw_error(ErrorCode::parse_error, "checkpoint", fmt::format("'{}': progress.epochs {}", path, epochs));
    progress.position.epochs = static_cast<int>(epochs);
    progress.optimizer.adam.step = count("adam_step");
    for (const auto& [slot, values] : optimizer_slots(progress.optimizer)) values->resize(c.pack.names.size());
    for (auto& [name, tensor] : state_tensors) {
      const std::string rest = name.substr(kOptimizerPrefix.size());
      const auto slash = rest.find('/');
      const std::string slot = rest.substr(0, slash), param = slash == std::string::npos ? "" : rest.substr(slash + 1);
      std::vector<std::optional<Tensor>>* values = nullptr;
      for (const auto& [s, v] : optimizer_slots(progress.optimizer))
        if (s == slot) values = v;
      const auto at = std::find(c.pack.names.begin(), c.pack.names.end(), param);
      if (values == nullptr || at == c.pack.names.end())
        throw_error(ErrorCode::invalid_argument, "checkpoint",
                    fmt::format("'{}': optimizer state '{}' names no slot or parameter of the model", path, name));
      const Tensor& owner = c.pack.values[static_cast<std::size_t>(at - c.pack.names.begin())];
      if (tensor.dtype() != owner.dtype() || !(tensor.shape() == owner.shape()))
        throw_error(ErrorCode::invalid_argument, "checkpoint",
                    fmt::format("'{}': optimizer state '{}' is {}{}; its parameter is {}{}", path, name,
                                dtype_name(tensor.dtype()), tensor.shape().to_string(), dtype_name(owner.dtype()),
                                owner.shape().to_string()));
      (*values)[static_cast<std::size_t>(at - c.pack.names.begin())] = std::move(tensor);
    }
    c.progress = std::move(progress);
  } else if (!state_tensors.empty()) {
    throw_error(ErrorCode::parse_error, "checkpoint",
                fmt::format("'{}' holds optimizer state '{}' but no progress", path, state_tensors.front().first));
  }
  return c;
}

}  // namespace pact::train
