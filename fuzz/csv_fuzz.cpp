// Fuzzes the CSV table reader: malformed text is a typed pact::Error; a table that parses yields a schema
// (first column the target) and a data set, or a typed refusal, never a crash.

#include <cstdint>
#include <string_view>

#include "pact/train/table.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto table = pact::train::parse_csv(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    if (table.header.empty()) __builtin_trap();
    for (const auto& row : table.rows)
      if (row.size() != table.header.size()) __builtin_trap();
    auto schema = pact::train::infer_schema(table, table.header.front(), "auto", "fuzz");
    auto d = pact::train::table_dataset(table, schema, true, "fuzz");
    if (d.rows() != static_cast<std::int64_t>(table.rows.size())) __builtin_trap();
    pact::train::fit_standardisation(schema, d);
    pact::train::standardise(schema, d);
    const auto again = pact::train::TableSchema::from_json(schema.to_json(), "fuzz-roundtrip");
    if (again.features != schema.features || again.classes != schema.classes) __builtin_trap();
  } catch (const pact::Error&) {
    return 0;
  }
  return 0;
}
