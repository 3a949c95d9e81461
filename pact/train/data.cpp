#include "pact/train/data.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <sstream>

namespace pact::train {

Dataset load_digits(const std::string& path, std::size_t max_inflated_bytes) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw_error(ErrorCode::io_error, "data.digits", fmt::format("cannot open '{}'", path));
  std::string text;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) {
    if (text.size() + static_cast<std::size_t>(n) > max_inflated_bytes) {
      gzclose(f);
      throw_error(ErrorCode::invalid_argument, "data.digits",
                  fmt::format("'{}' inflates past {} bytes, the limit for a data set (docs/limits.md)", path,
                              max_inflated_bytes));
    }
    text.append(buf, static_cast<std::size_t>(n));
  }
  int err = 0;
  const char* msg = gzerror(f, &err);
  const std::string message = msg ? msg : "";
  gzclose(f);
  if (n < 0 || (err != Z_OK && err != Z_STREAM_END)) {
    throw_error(ErrorCode::parse_error, "data.digits", fmt::format("'{}': corrupt gzip stream: {}", path, message));
  }
  Dataset d;
  d.features = 64;
  d.classes = 10;
  std::istringstream lines(text);
  std::string line;
  std::int64_t lineno = 0;
  while (std::getline(lines, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    std::vector<double> fields;
    const char* p = line.c_str();
    while (*p) {
      char* end = nullptr;
      errno = 0;
      const double v = std::strtod(p, &end);
      if (end == p || errno != 0) {
        throw_error(ErrorCode::parse_error, "data.digits",
                    fmt::format("{}:{}: field {} is not a number", path, lineno, fields.size() + 1));
      }
      fields.push_back(v);
      p = end;
      while (*p == ' ' || *p == '\r') ++p;
      if (*p == ',') ++p;
    }
    if (fields.size() != 65) {
      throw_error(ErrorCode::parse_error, "data.digits",
                  fmt::format("{}:{}: {} fields; expected 65 (64 pixels, label)", path, lineno, fields.size()));
    }
    for (int k = 0; k < 64; ++k) {
      if (!(fields[static_cast<std::size_t>(k)] >= 0 && fields[static_cast<std::size_t>(k)] <= 16)) {
        throw_error(
            ErrorCode::parse_error, "data.digits",
            fmt::format("{}:{}: pixel {} = {} outside [0, 16]", path, lineno, k, fields[static_cast<std::size_t>(k)]));
      }
      d.x.push_back(static_cast<float>(fields[static_cast<std::size_t>(k)] / 16.0));
    }
    const double label = fields[64];
    if (!(label >= 0 && label <= 9) || label != static_cast<double>(static_cast<std::int64_t>(label))) {
      throw_error(ErrorCode::parse_error, "data.digits",
                  fmt::format("{}:{}: label {} is not a class 0..9", path, lineno, label));
    }
    d.y.push_back(static_cast<std::int64_t>(label));
  }
  if (d.y.empty()) throw_error(ErrorCode::parse_error, "data.digits", fmt::format("'{}' holds no samples", path));
  return d;
}

Split stratified_split(const Dataset& data, double train_fraction, std::uint64_t seed) {
  if (!(train_fraction > 0 && train_fraction < 1)) {
    throw_error(ErrorCode::invalid_argument, "data.split",
                fmt::format("train fraction {} is not in (0, 1)", train_fraction));
  }
  std::mt19937_64 rng(seed);
  Split s;
  s.train.features = s.test.features = data.features;
  s.train.classes = s.test.classes = data.classes;
  s.train.regression = s.test.regression = data.regression;
  const auto f = static_cast<std::size_t>(data.features);
  for (std::int64_t c = 0; c < data.classes; ++c) {
    std::vector<std::int64_t> rows;
    for (std::int64_t i = 0; i < data.rows(); ++i) {
      if (data.y[static_cast<std::size_t>(i)] == c) rows.push_back(i);
    }
    std::shuffle(rows.begin(), rows.end(), rng);
    const auto cut = static_cast<std::size_t>(std::llround(static_cast<double>(rows.size()) * train_fraction));
    for (std::size_t k = 0; k < rows.size(); ++k) {
      Dataset& dst = k < cut ? s.train : s.test;
      const auto r = static_cast<std::size_t>(rows[k]);
      dst.x.insert(dst.x.end(), data.x.begin() + static_cast<long>(r * f),
                   data.x.begin() + static_cast<long>((r + 1) * f));
      dst.y.push_back(c);
      if (data.regression) dst.values.push_back(data.values[r]);
    }
  }
  return s;
}

std::pair<Tensor, Tensor> gather(const Dataset& data, std::span<const std::int64_t> rows) {
  const auto f = static_cast<std::size_t>(data.features);
  std::vector<float> x;
  std::vector<std::int64_t> y;
  x.reserve(rows.size() * f);
  for (std::int64_t r : rows) {
    const auto k = static_cast<std::size_t>(r);
    x.insert(x.end(), data.x.begin() + static_cast<long>(k * f), data.x.begin() + static_cast<long>((k + 1) * f));
    y.push_back(data.y[k]);
  }
  const auto n = static_cast<std::int64_t>(rows.size());
  if (data.regression) {
    std::vector<float> v;
    v.reserve(rows.size());
    for (std::int64_t r : rows) v.push_back(data.values[static_cast<std::size_t>(r)]);
    return {Tensor::from_values<float>(Dims{n, data.features}, x), Tensor::from_values<float>(Dims{n, 1}, v)};
  }
  return {Tensor::from_values<float>(Dims{n, data.features}, x), Tensor::from_values<std::int64_t>(Dims{n}, y)};
}

std::vector<std::int64_t> shuffled(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

}  // namespace pact::train
