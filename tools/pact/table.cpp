// `pact predict` and `pact eval`: a model trained by `pact train --data FILE.csv` (its checkpoint holds the
// table schema and the hidden widths) on the rows of another CSV file.

#include "pact/train/table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "pact/core/file.hpp"
#include "pact/core/json.hpp"
#include "pact/train/checkpoint.hpp"
#include "pact/train/fit.hpp"
#include "tools/pact/command.hpp"
#include "tools/pact/commands.hpp"

namespace pact::cli {

namespace {

// A checkpoint of a table model: the schema, the hidden widths, and a session that predicts with it.
struct TableModel {
  train::TableSchema schema;
  std::vector<std::int64_t> hidden;
  std::unique_ptr<train::TrainingSession> session;
};

TableModel load_table_model(const std::string& path, const std::string& profile) {
  train::Checkpoint peek = train::load_checkpoint(path);
  const Json& m = peek.metadata;
  if (!m.is_object() || !m.contains("table") || !m.contains("hidden"))
    throw_error(ErrorCode::invalid_argument, "pact predict",
                fmt::format("'{}' is not a model trained on a table (pact train --data FILE.csv --target COLUMN "
                            "--save {}): its checkpoint has no table schema",
                            path, path));
  TableModel t;
  t.schema = train::TableSchema::from_json(m["table"], path);
  try {
    t.hidden = m["hidden"].get<std::vector<std::int64_t>>();
  } catch (const Json::exception&) {
    throw_error(ErrorCode::parse_error, "pact predict", fmt::format("'{}': metadata 'hidden' is malformed", path));
  }
  for (auto w : t.hidden)
    if (w <= 0) throw_error(ErrorCode::parse_error, "pact predict", fmt::format("'{}': a hidden width {}", path, w));
  train::Objective o;
  o.graph = [features = static_cast<std::int64_t>(t.schema.features.size()), hidden = t.hidden,
             outputs = t.schema.classify ? static_cast<std::int64_t>(t.schema.classes.size()) : std::int64_t{1},
             classify = t.schema.classify](std::int64_t b) {
    return train::table_mlp(b, features, hidden, outputs, classify);
  };
  o.options.profile = profile;
  const train::ParameterPack expected = train::init_parameters(o.graph(1), 0);
  train::Checkpoint c = train::load_checkpoint(path, &expected);  // every tensor the model needs, checked
  t.session = std::make_unique<train::TrainingSession>(o, std::move(c.pack));
  return t;
}

// Per row: the class id and its softmax probability, or the regression value in the target's units.
struct Prediction {
  std::int64_t cls = 0;
  double value = 0;
};

std::vector<Prediction> predict_rows(TableModel& model, const train::Dataset& data) {
  std::vector<Prediction> out;
  train::predict_batches(*model.session, data, 256, false,
                         [&](std::int64_t, std::int64_t rows, std::span<const double> v, std::int64_t width) {
                           for (std::int64_t i = 0; i < rows; ++i) {
                             const auto row =
                                 v.subspan(static_cast<std::size_t>(i * width), static_cast<std::size_t>(width));
                             Prediction r;
                             if (model.schema.classify) {
                               r.cls = std::max_element(row.begin(), row.end()) - row.begin();
                               double z = 0;
                               for (double l : row) z += std::exp(l - row[static_cast<std::size_t>(r.cls)]);
                               r.value = 1.0 / z;
                             } else {
                               r.value = row[0] * model.schema.target_scale + model.schema.target_mean;
                             }
                             out.push_back(r);
                           }
                         });
  return out;
}

// A CSV field, quoted when it must be.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

int run_predict(const std::string& model, const std::string& data, const std::string& out, const std::string& profile,
                bool json) {
  if (!out.empty()) require_writable_destination(out, "pact predict -o");
  TableModel m = load_table_model(model, profile);
  train::Dataset d = train::table_dataset(train::read_csv(data), m.schema, false, data);
  train::standardise(m.schema, d);
  const auto preds = predict_rows(m, d);
  std::string csv = m.schema.classify ? "prediction,probability\n" : "prediction\n";
  Json rows = Json::array();
  for (const auto& p : preds) {
    if (m.schema.classify) {
      const std::string& name = m.schema.classes[static_cast<std::size_t>(p.cls)];
      csv += fmt::format("{},{:.6g}\n", csv_field(name), p.value);
      if (json) rows.push_back(Json{{"prediction", name}, {"probability", p.value}});
    } else {
      csv += fmt::format("{:.9g}\n", p.value);
      if (json) rows.push_back(Json{{"prediction", p.value}});
    }
  }
  if (!out.empty()) write_file_atomic(out, csv, "pact predict");
  if (json) {
    Json doc{{"schema", "pact.predict.v1"},
             {"model", model},
             {"data", data},
             {"rows", preds.size()},
             {"task", m.schema.classify ? "classify" : "regress"},
             {"predictions", rows}};
    if (!out.empty()) doc["written"] = out;
    std::printf("%s\n", doc.dump(2).c_str());
  } else if (out.empty()) {
    std::fputs(csv.c_str(), stdout);
  } else {
    std::printf("pact predict: %zu rows of %s -> %s (%s of '%s')\n", preds.size(), data.c_str(), out.c_str(),
                m.schema.classify ? "class" : "value", m.schema.target.c_str());
  }
  return 0;
}

int run_eval(const std::string& model, const std::string& data, const std::string& profile, bool json) {
  TableModel m = load_table_model(model, profile);
  train::Dataset d = train::table_dataset(train::read_csv(data), m.schema, true, data);
  train::standardise(m.schema, d);
  const auto preds = predict_rows(m, d);
  double metric = 0;
  if (m.schema.classify) {
    std::int64_t correct = 0;
    for (std::size_t i = 0; i < preds.size(); ++i) correct += preds[i].cls == d.y[i] ? 1 : 0;
    metric = static_cast<double>(correct) / static_cast<double>(preds.size());
  } else {
    double sq = 0;
    for (std::size_t i = 0; i < preds.size(); ++i) {
      const double want = d.values[i] * m.schema.target_scale + m.schema.target_mean;
      sq += (preds[i].value - want) * (preds[i].value - want);
    }
    metric = std::sqrt(sq / static_cast<double>(preds.size()));
  }
  const char* name = m.schema.classify ? "accuracy" : "rmse";
  if (json) {
    std::printf("%s\n", Json{{"schema", "pact.eval.v1"},
                             {"model", model},
                             {"data", data},
                             {"rows", preds.size()},
                             {"metric", name},
                             {"value", metric}}
                            .dump(2)
                            .c_str());
  } else if (m.schema.classify) {
    std::printf("accuracy %.2f%% on %zu rows of %s ('%s', %zu classes)\n", 100 * metric, preds.size(), data.c_str(),
                m.schema.target.c_str(), m.schema.classes.size());
  } else {
    std::printf("rmse %.6g on %zu rows of %s ('%s')\n", metric, preds.size(), data.c_str(), m.schema.target.c_str());
  }
  return 0;
}

namespace {

struct TableArgs {
  std::string model, data, out, profile = "cpu-checked";
  bool json = false;
};

const bool predict_registered = register_command("predict", [](CLI::App& app) {
  auto a = std::make_shared<TableArgs>();
  auto* cmd = app.add_subcommand("predict", "predict new rows of a CSV table with a model trained on a table");
  cmd->add_option("--model", a->model, "checkpoint saved by pact train --data FILE.csv --save")->required();
  cmd->add_option("--data", a->data, "CSV file with the model's feature columns (the target column may be absent)")
      ->required();
  cmd->add_option("-o,--out", a->out, "write the predictions here (CSV); default: standard output");
  cmd->add_option("--profile", a->profile, "backend profile");
  cmd->add_flag("--json", a->json, "print a JSON report");
  return std::vector<Runner>{{cmd, [a] { return run_predict(a->model, a->data, a->out, a->profile, a->json); }}};
});

const bool eval_registered = register_command("eval", [](CLI::App& app) {
  auto a = std::make_shared<TableArgs>();
  auto* cmd = app.add_subcommand("eval", "score a model trained on a table on held-out rows (accuracy or RMSE)");
  cmd->add_option("--model", a->model, "checkpoint saved by pact train --data FILE.csv --save")->required();
  cmd->add_option("--data", a->data, "CSV file with the feature columns and the target column")->required();
  cmd->add_option("--profile", a->profile, "backend profile");
  cmd->add_flag("--json", a->json, "print a JSON report");
  return std::vector<Runner>{{cmd, [a] { return run_eval(a->model, a->data, a->profile, a->json); }}};
});

}  // namespace

}  // namespace pact::cli
