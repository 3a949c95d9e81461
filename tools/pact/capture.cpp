// `pact capture` and `pact discharge`: structure-only capture of a model and discharge of its hypotheses.

#include "pact/capture/capture.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "pact/capture/llama.hpp"
#include "pact/core/cpu.hpp"
#include "pact/core/file.hpp"
#include "pact/ir/torch_import.hpp"
#include "pact/llm/config.hpp"
#include "pact/spec/spec.hpp"
#include "pact/train/trainer.hpp"
#include "tools/pact/command.hpp"
#include "tools/pact/commands.hpp"

namespace pact::cli {

namespace {

// A model the CLI can capture: its code, and whatever the code reads (graph, weights) kept alive.
struct Resolved {
  std::unique_ptr<ir::Graph> graph;
  std::unique_ptr<ir::TorchBundle> bundle;
  std::map<std::string, TensorView> weights;
  capture::ModelFn fn;
  std::string description;
};

// A Hugging Face Llama config.json (read by pact/llm: every field honoured, ignored or refused) as the
// capture's Llama: the checkpoint's tensors, so the capture counts its exact parameters.
capture::LlamaConfig llama_from_hugging_face(const std::string& path) {
  const llm::DecoderConfig h = llm::parse_config(read_file(path, "pact capture", llm::kMaxConfigBytes), path);
  if (h.family != llm::Family::llama) {
    throw_error(
        ErrorCode::invalid_argument, "pact capture",
        fmt::format("{} is a {} config; pact capture llama reads Llama configs", path, llm::family_name(h.family)));
  }
  capture::LlamaConfig c;
  c.name = path;
  c.layers = h.layers;
  c.d_model = h.hidden;
  c.heads = h.heads;
  c.kv_heads = h.kv_heads;
  c.head_dim = h.head_dim;
  c.ffn = h.intermediate;
  c.vocab = h.vocab;
  c.seq = std::min<std::int64_t>(h.context, 2048);
  c.norm_eps = h.norm_eps;
  c.tied = h.tied;
  c.attention_bias = h.attention_bias;
  c.mlp_bias = h.mlp_bias;
  return c;
}

std::unique_ptr<Resolved> resolve(const CaptureArgs& a) {
  auto r = std::make_unique<Resolved>();
  if (a.model == "llama") {
    capture::LlamaConfig c = std::filesystem::is_regular_file(a.config) ? llama_from_hugging_face(a.config)
                                                                        : capture::llama_config(a.config);
    if (a.batch > 0) c.batch = a.batch;
    if (a.seq > 0) c.seq = a.seq;
    r->fn = capture::llama_model(c);
    r->description =
        fmt::format("llama {} ({} layers, d_model {}, {} heads, {} kv heads, ffn {}, vocab {}; batch {}, seq {})",
                    c.name, c.layers, c.d_model, c.heads, c.kv_heads, c.ffn, c.vocab, c.batch, c.seq);
    return r;
  }
  if (a.seq > 0) throw_error(ErrorCode::invalid_argument, "pact capture", "--seq applies to the llama model only");
  const std::int64_t batch = a.batch > 0 ? a.batch : 32;
  if (a.model == "mlp" || a.model == "cnn") {
    r->graph = std::make_unique<ir::Graph>(a.model == "mlp" ? train::digits_mlp(batch) : train::digits_cnn(batch));
    r->description = fmt::format("digits {} (batch {})", a.model, batch);
  } else if (std::filesystem::is_directory(a.model)) {
    if (a.batch > 0)
      throw_error(ErrorCode::invalid_argument, "pact capture", "--batch does not apply to a captured PyTorch model");
    r->bundle = std::make_unique<ir::TorchBundle>(ir::load_torch_export(a.model));
    if (!a.structure_only) ir::require_weights(r->bundle->model, a.model, "pact capture");
    r->weights = r->bundle->state();
    r->graph = std::make_unique<ir::Graph>(r->bundle->model.graph);
    r->description = r->bundle->model.structure_only
                         ? fmt::format("PyTorch structure-only capture {} (no weights)", a.model)
                         : fmt::format("PyTorch capture {} ({} weights)", a.model, r->weights.size());
  } else {
    if (a.batch > 0) throw_error(ErrorCode::invalid_argument, "pact capture", "--batch does not apply to an IR model");
    r->graph = std::make_unique<ir::Graph>(ir::load_graph(a.model));
    r->description = a.model;
  }
  r->fn = capture::graph_model(*r->graph, r->bundle ? &r->weights : nullptr);
  return r;
}

capture::CaptureOptions options_of(const CaptureArgs& a, bool structure_only) {
  capture::CaptureOptions o;
  o.structure_only = structure_only;
  o.optimizer = a.optimizer;
  o.seed = a.seed;
  o.values = a.values;
  o.previews = a.previews;
  o.nonfinite_halt = a.halt_on_nonfinite;
  o.runnable_save = a.save_runnable;
  o.replay = a.replay;
  o.validate = a.validate;
  o.backward = a.backward;
  o.symbolic_shapes = a.symbolic;
  return o;
}

void write_file(const std::string& path, const std::string& text) { write_file_atomic(path, text, "pact capture"); }

// A real capture keeps every source and every op output alive (its records name each value): what it will
// hold, from a structure-only capture's geometry. Refused above what this process can allocate, before
// any weight is materialised, unless --force.
void require_memory_for_real_capture(const capture::StructureCapture& meta, bool force, std::string_view what) {
  std::uint64_t bytes = 0;
  for (const auto& s : meta.sources) bytes = saturating_add(bytes, tensor_bytes(s.type));
  for (const auto& o : meta.ops) {
    if (ops::op_info(o.op).role != ops::OpRole::view) bytes = saturating_add(bytes, tensor_bytes(o.type));
  }
  const std::uint64_t budget = host_memory_budget();
  if (bytes > budget && !force) {
    throw_error(ErrorCode::out_of_memory, std::string(what),
                fmt::format("a real capture of this model holds about {:.2f} GiB of weights and activations; this "
                            "process can allocate {:.2f} GiB. Capture it with --structure-only (no values), or "
                            "pass --force to try anyway",
                            static_cast<double>(bytes) / (1 << 30), static_cast<double>(budget) / (1 << 30)));
  }
}

}  // namespace

int run_capabilities() {
  std::fputs(capture::render_capabilities_markdown().c_str(), stdout);
  return 0;
}

int run_capture(const CaptureArgs& a) {
  if (!a.out.empty()) require_writable_destination(a.out, "pact capture -o");
  if (!a.chrome_trace.empty()) require_writable_destination(a.chrome_trace, "pact capture --chrome-trace");
  require_picture_destination(a.picture, "pact capture");
  auto model = resolve(a);
  if (!a.structure_only) require_memory_for_real_capture(capture::capture(model->fn, {}), a.force, "pact capture");
  const auto c = capture::capture(model->fn, options_of(a, a.structure_only));
  if (!a.chrome_trace.empty()) write_file(a.chrome_trace, capture::chrome_trace(c).dump(1) + "\n");
  write_picture(a.picture, capture_picture(c, model->description, model->bundle ? &model->bundle->model : nullptr),
                a.json);
  Json doc = capture::to_json(c);
  // What the CLI captured, so that `pact discharge FILE --against MODEL` rebuilds the same configuration
  // (outside the digests: it names the model code, not the graph).
  doc["captured_with"] = Json{{"model", a.model}, {"config", a.config}, {"batch", a.batch}, {"seq", a.seq}};
  if (!a.out.empty()) write_file(a.out, doc.dump(1) + "\n");
  if (a.json) {
    Json out = doc;
    const auto m = c.memory(a.optimizer);
    out["estimates"]["memory"] = Json{{"label", "estimated"},
                                      {"optimizer", a.optimizer},
                                      {"parameters_bytes", m.parameters},
                                      {"buffers_bytes", m.buffers},
                                      {"activations_peak_bytes", m.activations_peak},
                                      {"activations_saved_bytes", m.activations_saved},
                                      {"gradients_bytes", m.gradients},
                                      {"optimizer_state_bytes", m.optimizer_state},
                                      {"training_total_bytes", m.training_total()}};
    std::printf("%s\n", out.dump(1).c_str());
  } else {
    std::printf("%s\n%s", model->description.c_str(), capture::render(c, a.optimizer).c_str());
    if (!a.out.empty()) std::printf("wrote %s\n", a.out.c_str());
  }
  return 0;
}

int run_discharge(const CaptureArgs& a) {
  if (!a.out.empty()) require_writable_destination(a.out, "pact discharge -o");
  const Json doc = parse_json(spec::read_text_file(a.capture_file), a.capture_file);
  auto hyp = capture::load_capture_document(doc, a.capture_file);
  CaptureArgs against = a;
  against.model = a.against;
  // The configuration comes from the capture when it was made of the same model and none is given here
  // (the README's `pact discharge cap.json --against llama` after a --config 7b capture).
  if (doc.contains("captured_with") && doc["captured_with"].is_object()) {
    const Json& w = doc["captured_with"];
    if (w.value("model", std::string()) == a.against) {
      if (!a.given.count("--config") && w.contains("config") && w["config"].is_string())
        against.config = w["config"].get<std::string>();
      if (!a.given.count("--batch") && w.contains("batch")) against.batch = json_int64(w["batch"]).value_or(0);
      if (!a.given.count("--seq") && w.contains("seq")) against.seq = json_int64(w["seq"]).value_or(0);
    }
  }
  auto model = resolve(against);
  require_memory_for_real_capture(hyp, a.force, "pact discharge");
  const auto real = capture::capture(model->fn, options_of(a, false));
  const auto report = capture::discharge(hyp, real);
  if (a.json) {
    Json rows = Json::array();
    for (const auto& o : hyp.ops) {
      rows.push_back(Json{{"op", o.id}, {"verdict", std::string(capture::row_state_name(o.state()))}});
    }
    Json checks = Json::array();
    for (const auto& c : report.checks) {
      checks.push_back(Json{{"row", c.row},
                            {"estimate", c.estimate},
                            {"measured", c.measured},
                            {"margin", c.margin},
                            {"verdict", c.ok ? "corroborated" : "refuted"}});
    }
    std::printf("%s\n", Json{{"schema", "pact.discharge.v1"},
                             {"graph_shape", hyp.graph_shape_digest},
                             {"against", report.against},
                             {"corroborated", report.corroborated},
                             {"refuted", report.refuted},
                             {"rows", rows},
                             {"checks", checks},
                             {"refuted_rows", report.refuted_rows}}
                            .dump(1)
                            .c_str());
  } else {
    std::printf("discharge of %s against a real capture of %s\n", a.capture_file.c_str(), model->description.c_str());
    for (const auto& o : hyp.ops) {
      std::printf("  %-44s %-12s %s%s\n", o.id.c_str(), std::string(capture::row_state_name(o.state())).c_str(),
                  std::string(dtype_name(o.type.dtype)).c_str(), o.type.shape.to_string().c_str());
    }
    std::printf(
        "checked against the real run: %zu source types, parameter bytes, bytes saved for backward, %zu ops' "
        "multiply-accumulates\n",
        hyp.sources.size(), hyp.ops.size());
    for (const auto& row : report.refuted_rows) std::printf("  refuted: %s\n", row.c_str());
    std::printf("%zu corroborated, %zu refuted (against %s)\n", report.corroborated, report.refuted,
                report.against.c_str());
  }
  if (!a.out.empty()) write_file(a.out, capture::to_json(hyp).dump(1) + "\n");
  return report.refuted == 0 ? 0 : 4;
}

namespace {

const bool capture_registered = register_command("capture", [](CLI::App& app) {
  auto a = std::make_shared<CaptureArgs>();
  auto capabilities = std::make_shared<bool>(false);
  auto* capture_cmd =
      app.add_subcommand("capture", "capture a model's structure: graph, modules, parameters, shapes, FLOPs, memory");
  capture_cmd->add_option("model", a->model, "llama | mlp | cnn | pact.ir.v1 JSON | torch_export.py directory");
  capture_cmd->add_flag("--structure-only", a->structure_only,
                        "meta storage: no values, no weights, shapes as hypotheses");
  capture_cmd->add_flag("--capabilities", *capabilities, "print the structure-only capability table and exit");
  capture_cmd->add_option("--config", a->config,
                          "llama configuration: 7b | 13b | 70b | tiny, or a Hugging Face config.json");
  capture_cmd->add_option("--batch", a->batch, "batch size (llama, mlp, cnn)");
  capture_cmd->add_option("--seq", a->seq, "sequence length (llama)");
  capture_cmd->add_option("--optimizer", a->optimizer, "memory estimate for sgd | sgd-momentum | adam | adamw");
  capture_cmd->add_option("--seed", a->seed, "values of a real capture");
  capture_cmd->add_flag("--json", a->json, "print the capture as JSON");
  capture_cmd->add_option("-o,--out", a->out, "save the capture (pact.capture.v1) here");
  capture_cmd->add_option("--chrome-trace", a->chrome_trace, "write measured per-op times (real captures only)");
  add_picture_options(capture_cmd, a->picture);
  capture_cmd->add_flag("--force", a->force,
                        "a real capture even when its weights and activations exceed what this process can allocate");
  // Requests the capability table refuses (docs/structure-only-capabilities.md): accepted so that each is
  // refused with its code, and left out of --help, which lists only options that do something.
  for (auto* o :
       {capture_cmd->add_flag("--values", a->values, "record activation values"),
        capture_cmd->add_flag("--previews", a->previews, "record value previews"),
        capture_cmd->add_flag("--halt-on-nonfinite", a->halt_on_nonfinite, "stop at the first NaN or infinity"),
        capture_cmd->add_flag("--save-runnable", a->save_runnable, "save a runnable artifact"),
        capture_cmd->add_flag("--replay", a->replay, "replay the capture"),
        capture_cmd->add_flag("--validate", a->validate, "validate recorded values"),
        capture_cmd->add_flag("--backward", a->backward, "capture the backward pass"),
        capture_cmd->add_flag("--symbolic", a->symbolic, "symbolic (dynamic) shapes")})
    o->group("");

  return std::vector<Runner>{{capture_cmd, [a, capabilities] {
                                if (*capabilities) return run_capabilities();
                                if (a->model.empty())
                                  throw Error(ErrorCode::invalid_argument, "pact capture", "MODEL is required");
                                return run_capture(*a);
                              }}};
});

const bool discharge_registered = register_command("discharge", [](CLI::App& app) {
  auto d = std::make_shared<CaptureArgs>();
  auto* discharge_cmd =
      app.add_subcommand("discharge", "discharge a structure-only capture's hypotheses with a real capture");
  discharge_cmd->add_option("capture", d->capture_file, "capture saved by pact capture --structure-only -o")
      ->required();
  discharge_cmd->add_option("--against", d->against, "the model, with weights or seeded random values")->required();
  discharge_cmd->add_option("--config", d->config, "llama configuration");
  discharge_cmd->add_option("--batch", d->batch, "batch size");
  discharge_cmd->add_option("--seq", d->seq, "sequence length (llama)");
  discharge_cmd->add_option("--seed", d->seed, "values of the real capture");
  discharge_cmd->add_flag("--json", d->json, "print the verdicts as JSON");
  discharge_cmd->add_option("-o,--out", d->out, "save the discharged capture here");
  discharge_cmd->add_flag("--force", d->force,
                          "run the real capture even when it exceeds what this process can allocate");

  return std::vector<Runner>{{discharge_cmd, [d, discharge_cmd] {
                                d->given = given_options(*discharge_cmd);
                                return run_discharge(*d);
                              }}};
});

}  // namespace

}  // namespace pact::cli
