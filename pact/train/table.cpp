#include "pact/train/table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "pact/core/file.hpp"
#include "pact/ir/graph.hpp"

namespace pact::train {

namespace {

[[noreturn]] void bad(std::string_view where, const std::string& why, ErrorCode code = ErrorCode::parse_error) {
  throw_error(code, "data.csv", fmt::format("{}: {}", where, why));
}

// A whole field as a finite number, or nothing.
std::optional<double> number(const std::string& field) {
  std::size_t b = 0, e = field.size();
  while (b < e && (field[b] == ' ' || field[b] == '\t')) ++b;
  while (e > b && (field[e - 1] == ' ' || field[e - 1] == '\t')) --e;
  if (b == e) return std::nullopt;
  const std::string text = field.substr(b, e - b);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno != 0 || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::size_t column(const CsvTable& table, const std::string& name) {
  return static_cast<std::size_t>(std::find(table.header.begin(), table.header.end(), name) - table.header.begin());
}

std::string columns_of(const CsvTable& table) {
  std::string s;
  for (const auto& h : table.header) s += (s.empty() ? "" : ", ") + h;
  return s;
}

}  // namespace

CsvTable parse_csv(std::string_view text, std::string_view where) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // the UTF-8 byte order mark spreadsheets write
  CsvTable t;
  std::vector<std::string> row;
  std::string field;
  std::int64_t line = 1, row_line = 1;
  bool quoted = false, after_quote = false, any = false;
  auto end_field = [&] {
    if (row.size() >= kMaxCsvColumns)
      bad(where, fmt::format("line {}: more than {} columns", row_line, kMaxCsvColumns));
    row.push_back(std::move(field));
    field.clear();
    after_quote = false;
  };
  auto end_row = [&] {
    end_field();
    const bool blank = row.size() == 1 && row[0].empty() && !any;
    if (!blank) {
      if (t.header.empty()) {
        std::set<std::string> seen;
        for (std::size_t c = 0; c < row.size(); ++c) {
          if (row[c].empty()) bad(where, fmt::format("line {}: column {} of the header has no name", row_line, c + 1));
          if (has_control_characters(row[c]))
            bad(where, fmt::format("line {}: column {} of the header holds a control character", row_line, c + 1));
          if (!seen.insert(row[c]).second) bad(where, fmt::format("line {}: column '{}' repeats", row_line, row[c]));
        }
        t.header = std::move(row);
      } else {
        if (row.size() != t.header.size())
          bad(where,
              fmt::format("line {}: {} fields; the header has {} columns", row_line, row.size(), t.header.size()));
        t.rows.push_back(std::move(row));
        t.lines.push_back(row_line);
      }
    }
    row.clear();
    any = false;
    row_line = line;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field.push_back('"');
          ++i;
        } else {
          quoted = false;
          after_quote = true;
        }
      } else {
        if (c == '\n') ++line;
        field.push_back(c);
      }
      continue;
    }
    if (c == ',') {
      end_field();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      ++line;
      end_row();
    } else if (c == '"' && field.empty() && !after_quote) {
      quoted = true;
      any = true;
    } else if (after_quote) {
      bad(where, fmt::format("line {}: text after a closing quote in field {}", line, row.size() + 1));
    } else {
      field.push_back(c);
      any = true;
    }
  }
  if (quoted) bad(where, fmt::format("line {}: a quoted field is never closed", row_line));
  if (!field.empty() || !row.empty() || any) end_row();
  if (t.header.empty()) bad(where, "no header row");
  return t;
}

CsvTable read_csv(const std::string& path) { return parse_csv(read_file(path, "data.csv", kMaxCsvBytes), path); }

Json TableSchema::to_json() const {
  return Json{{"features", features},
              {"target", target},
              {"task", classify ? "classify" : "regress"},
              {"classes", classes},
              {"mean", mean},
              {"scale", scale},
              {"target_mean", target_mean},
              {"target_scale", target_scale}};
}

TableSchema TableSchema::from_json(const Json& j, std::string_view where) {
  auto fail = [&](const char* field) { bad(where, fmt::format("the model's table schema: '{}' is malformed", field)); };
  TableSchema s;
  try {
    s.features = j.at("features").get<std::vector<std::string>>();
    s.target = j.at("target").get<std::string>();
    const std::string task = j.at("task").get<std::string>();
    if (task != "classify" && task != "regress") fail("task");
    s.classify = task == "classify";
    s.classes = j.at("classes").get<std::vector<std::string>>();
    s.mean = j.at("mean").get<std::vector<double>>();
    s.scale = j.at("scale").get<std::vector<double>>();
    s.target_mean = j.at("target_mean").get<double>();
    s.target_scale = j.at("target_scale").get<double>();
  } catch (const Json::exception&) {
    fail("a field");
  }
  if (s.mean.size() != s.features.size() || s.scale.size() != s.features.size()) fail("mean/scale");
  if (s.classify && s.classes.size() < 2) fail("classes");
  for (double v : s.scale)
    if (!(v > 0) || !std::isfinite(v)) fail("scale");
  if (!(s.target_scale > 0)) fail("target_scale");
  return s;
}

TableSchema infer_schema(const CsvTable& table, const std::string& target, const std::string& task,
                         std::string_view where) {
  if (task != "auto" && task != "classify" && task != "regress")
    throw_error(ErrorCode::invalid_argument, "data.csv", fmt::format("--task '{}' is not auto|classify|regress", task));
  const std::size_t t = column(table, target);
  if (t == table.header.size())
    bad(where, fmt::format("no target column '{}' (the columns: {})", target, columns_of(table)),
        ErrorCode::invalid_argument);
  if (table.header.size() < 2) bad(where, "a table needs a feature column besides the target");
  TableSchema s;
  s.target = target;
  for (std::size_t c = 0; c < table.header.size(); ++c)
    if (c != t) s.features.push_back(table.header[c]);
  std::set<std::string> values;
  bool numeric = true, integral = true;
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    const std::string& v = table.rows[r][t];
    values.insert(v);
    const auto x = number(v);
    numeric = numeric && x.has_value();
    integral = integral && x && *x == std::floor(*x);
    if (task == "regress" && !x)
      bad(where, fmt::format("line {}: target '{}' = '{}' is not a number (--task regress)", table.lines[r], target,
                             printable(v)));
  }
  s.classify = task == "classify" || (task == "auto" && (!numeric || (integral && values.size() <= 32)));
  if (s.classify) {
    s.classes.assign(values.begin(), values.end());
    if (numeric)  // numbers in numeric order: class "10" after "9"
      std::sort(s.classes.begin(), s.classes.end(),
                [](const std::string& a, const std::string& b) { return *number(a) < *number(b); });
    if (s.classes.size() < 2)
      bad(where,
          fmt::format("target '{}' has {} distinct value(s); classification needs 2 or more", target, s.classes.size()),
          ErrorCode::invalid_argument);
  }
  s.mean.assign(s.features.size(), 0.0);
  s.scale.assign(s.features.size(), 1.0);
  return s;
}

Dataset table_dataset(const CsvTable& table, const TableSchema& schema, bool with_target, std::string_view where) {
  std::vector<std::size_t> cols;
  for (const auto& f : schema.features) {
    const std::size_t c = column(table, f);
    if (c == table.header.size())
      bad(where, fmt::format("no column '{}', which the model reads (the columns: {})", f, columns_of(table)),
          ErrorCode::invalid_argument);
    cols.push_back(c);
  }
  const std::size_t t = column(table, schema.target);
  if (with_target && t == table.header.size())
    bad(where, fmt::format("no target column '{}' (the columns: {})", schema.target, columns_of(table)),
        ErrorCode::invalid_argument);
  std::map<std::string, std::int64_t> class_of;
  for (std::size_t k = 0; k < schema.classes.size(); ++k) class_of.emplace(schema.classes[k], k);
  Dataset d;
  d.features = static_cast<std::int64_t>(cols.size());
  d.classes = schema.classify ? static_cast<std::int64_t>(schema.classes.size()) : 1;
  d.regression = !schema.classify;
  d.x.reserve(table.rows.size() * cols.size());
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    const auto& row = table.rows[r];
    for (std::size_t k = 0; k < cols.size(); ++k) {
      const auto v = number(row[cols[k]]);
      if (!v)
        bad(where, fmt::format("line {}: column '{}' = '{}' is not a finite number", table.lines[r], schema.features[k],
                               printable(row[cols[k]])));
      d.x.push_back(static_cast<float>(*v));
    }
    if (!with_target) {
      d.y.push_back(0);
      if (d.regression) d.values.push_back(0.0F);
      continue;
    }
    const std::string& target = row[t];
    if (schema.classify) {
      auto it = class_of.find(target);
      if (it == class_of.end())
        bad(where,
            fmt::format("line {}: target '{}' = '{}' is not one of the model's classes", table.lines[r], schema.target,
                        printable(target)),
            ErrorCode::invalid_argument);
      d.y.push_back(it->second);
    } else {
      const auto v = number(target);
      if (!v)
        bad(where, fmt::format("line {}: target '{}' = '{}' is not a finite number", table.lines[r], schema.target,
                               printable(target)));
      d.y.push_back(0);
      d.values.push_back(static_cast<float>(*v));
    }
  }
  if (d.rows() == 0) bad(where, "no data rows after the header");
  return d;
}

void fit_standardisation(TableSchema& schema, const Dataset& train) {
  const auto f = static_cast<std::size_t>(train.features);
  const auto n = static_cast<double>(train.rows());
  schema.mean.assign(f, 0.0);
  schema.scale.assign(f, 1.0);
  for (std::size_t k = 0; k < f; ++k) {
    double sum = 0, sq = 0;
    for (std::int64_t r = 0; r < train.rows(); ++r) sum += train.x[static_cast<std::size_t>(r) * f + k];
    const double mean = sum / n;
    for (std::int64_t r = 0; r < train.rows(); ++r) {
      const double d = train.x[static_cast<std::size_t>(r) * f + k] - mean;
      sq += d * d;
    }
    const double sd = std::sqrt(sq / n);
    schema.mean[k] = mean;
    schema.scale[k] = sd > 1e-12 ? sd : 1.0;  // a constant feature stays as it is, centred
  }
  if (train.regression) {
    double sum = 0, sq = 0;
    for (float v : train.values) sum += v;
    schema.target_mean = sum / n;
    for (float v : train.values) sq += (v - schema.target_mean) * (v - schema.target_mean);
    const double sd = std::sqrt(sq / n);
    schema.target_scale = sd > 1e-12 ? sd : 1.0;
  }
}

void standardise(const TableSchema& schema, Dataset& data) {
  const auto f = static_cast<std::size_t>(data.features);
  for (std::size_t i = 0; i < data.x.size(); ++i)
    data.x[i] = static_cast<float>((data.x[i] - schema.mean[i % f]) / schema.scale[i % f]);
  for (float& v : data.values) v = static_cast<float>((v - schema.target_mean) / schema.target_scale);
}

ir::Graph table_mlp(std::int64_t batch, std::int64_t features, const std::vector<std::int64_t>& hidden,
                    std::int64_t outputs, bool classify) {
  ir::GraphBuilder b;
  b.input("x", Dims{batch, features});
  if (classify)
    b.input("target", Dims{batch}, DType::i64);
  else
    b.input("target", Dims{batch, 1});
  std::string h = "x";
  std::int64_t width = features;
  for (std::size_t i = 0; i <= hidden.size(); ++i) {
    const std::int64_t next = i < hidden.size() ? hidden[i] : outputs;
    const std::string w = fmt::format("w{}", i + 1), bias = fmt::format("b{}", i + 1);
    b.parameter(w, Dims{next, width});
    b.parameter(bias, Dims{next});
    const std::string fc = i < hidden.size() ? fmt::format("fc{}", i + 1) : std::string("logits");
    b.op(fc, ops::OpTag::linear, {h, w, bias});
    h = fc;
    if (i < hidden.size()) {
      h = fmt::format("act{}", i + 1);
      b.op(h, ops::OpTag::relu, {fc});
    }
    width = next;
  }
  b.op("loss", classify ? ops::OpTag::cross_entropy : ops::OpTag::mse_loss, {"logits", "target"});
  b.output("logits");
  b.output("loss");
  return b.build();
}

}  // namespace pact::train
