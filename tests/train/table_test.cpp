// Tables of your own (issue 22 item 4): the CSV reader (quotes, line ends, typed refusals naming the line and
// column), schema inference (task, classes, standardisation), and a classifier and a regression trained on
// the committed tables through the library, as `pact train --data FILE.csv` does.

#include "pact/train/table.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "../support/expect_error.hpp"
#include "pact/train/fit.hpp"

namespace pact::train {
namespace {

using ::pact::test::code_of;
using ::pact::test::mentions;
using ::pact::test::message_of;

TEST(Table, ParsesQuotesLineEndsAndBlankLines) {
  const CsvTable t = parse_csv("y,\"a, b\",c\r\n1,\"2.5\",\"say \"\"hi\"\"\"\r\n\n0,3,\"multi\nline\"\n", "memory");
  ASSERT_EQ(t.header.size(), 3U);
  EXPECT_EQ(t.header[1], "a, b");
  ASSERT_EQ(t.rows.size(), 2U);
  EXPECT_EQ(t.rows[0][1], "2.5");
  EXPECT_EQ(t.rows[0][2], "say \"hi\"");
  EXPECT_EQ(t.rows[1][2], "multi\nline");
  EXPECT_EQ(t.lines[0], 2);
  EXPECT_EQ(t.lines[1], 4);
  // A spreadsheet's UTF-8 byte order mark is not part of the first column's name.
  EXPECT_EQ(parse_csv("\xEF\xBB\xBFx,y\n1,2\n", "memory").header[0], "x");
}

TEST(Table, MalformedTextIsRefusedNamingTheLineAndColumn) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {"a,b\n1,2\n3\n", "line 3: 1 fields; the header has 2 columns"},
           {"a,b\n1,\"2\n", "never closed"},
           {"a,a\n1,2\n", "column 'a' repeats"},
           {"a,,b\n1,2,3\n", "column 2 of the header has no name"},
           {"a,b\n1,\"2\"x\n", "text after a closing quote"},
           {"", "no header row"},
       }) {
    const std::string msg = message_of([&] { parse_csv(c.text, "t.csv"); });
    EXPECT_EQ(code_of([&] { parse_csv(c.text, "t.csv"); }), ErrorCode::parse_error) << c.text;
    EXPECT_TRUE(mentions(msg, c.says) && mentions(msg, "t.csv")) << msg;
  }
  const CsvTable t = parse_csv("x,y,label\n1,2,cat\n3,oops,dog\n", "t.csv");
  const TableSchema s = infer_schema(t, "label", "auto", "t.csv");
  const std::string msg = message_of([&] { table_dataset(t, s, true, "t.csv"); });
  EXPECT_TRUE(mentions(msg, "line 3: column 'y' = 'oops' is not a finite number")) << msg;
  EXPECT_TRUE(mentions(message_of([&] { infer_schema(t, "species", "auto", "t.csv"); }),
                       "no target column 'species' (the columns: x, y, label)"));
  EXPECT_EQ(code_of([&] { infer_schema(t, "label", "sometimes", "t.csv"); }), ErrorCode::invalid_argument);
}

TEST(Table, TheTaskFollowsTheTargetColumn) {
  const CsvTable text = parse_csv("x,label\n1,b\n2,a\n3,b\n", "t");
  const TableSchema s = infer_schema(text, "label", "auto", "t");
  EXPECT_TRUE(s.classify);
  EXPECT_EQ(s.classes, (std::vector<std::string>{"a", "b"}));
  const CsvTable ints = parse_csv("x,n\n1,10\n2,9\n3,10\n", "t");
  const TableSchema k = infer_schema(ints, "n", "auto", "t");
  EXPECT_TRUE(k.classify);
  EXPECT_EQ(k.classes, (std::vector<std::string>{"9", "10"}));  // numeric order
  const CsvTable reals = parse_csv("x,v\n1,0.5\n2,1.25\n3,2\n", "t");
  EXPECT_FALSE(infer_schema(reals, "v", "auto", "t").classify);
  EXPECT_TRUE(infer_schema(reals, "v", "classify", "t").classify);
  EXPECT_TRUE(mentions(message_of([&] { infer_schema(text, "label", "regress", "t"); }), "'label' = 'b' is not"));
  // A schema survives its JSON (the checkpoint metadata), and a malformed one is refused.
  const TableSchema back = TableSchema::from_json(s.to_json(), "t");
  EXPECT_EQ(back.classes, s.classes);
  EXPECT_EQ(back.features, s.features);
  Json broken = s.to_json();
  broken["scale"] = Json::array();
  EXPECT_EQ(code_of([&] { TableSchema::from_json(broken, "t"); }), ErrorCode::parse_error);
}

TEST(Table, StandardisationUsesTheTrainingRowsOnly) {
  const CsvTable t = parse_csv("x,c,y\n1,5,0.5\n3,5,1.5\n", "t");
  TableSchema s = infer_schema(t, "y", "regress", "t");
  Dataset d = table_dataset(t, s, true, "t");
  fit_standardisation(s, d);
  EXPECT_DOUBLE_EQ(s.mean[0], 2.0);
  EXPECT_DOUBLE_EQ(s.scale[0], 1.0);
  EXPECT_DOUBLE_EQ(s.scale[1], 1.0);  // a constant column keeps scale 1
  EXPECT_DOUBLE_EQ(s.target_mean, 1.0);
  standardise(s, d);
  EXPECT_FLOAT_EQ(d.x[0], -1.0F);
  EXPECT_FLOAT_EQ(d.x[1], 0.0F);
  EXPECT_FLOAT_EQ(d.values[1], 1.0F);
}

// The committed tables trained through the library: the classifier separates the three named classes, the
// regression fits its target (its standard deviation is about 4.5) to well under one unit.
TEST(Table, AClassifierAndARegressionLearnTheCommittedTables) {
  for (const char* file : {"blobs", "line"}) {
    SCOPED_TRACE(file);
    const bool classify = std::string(file) == "blobs";
    const CsvTable csv = read_csv(std::string("tests/fixtures/table/") + file + ".csv");
    TableSchema schema = infer_schema(csv, classify ? "species" : "price", "auto", file);
    EXPECT_EQ(schema.classify, classify);
    Split split = stratified_split(table_dataset(csv, schema, true, file), 0.8, 1);
    fit_standardisation(schema, split.train);
    standardise(schema, split.train);
    standardise(schema, split.test);
    Objective o;
    const std::int64_t features = split.train.features, outputs = classify ? 3 : 1;
    o.graph = [=](std::int64_t b) { return table_mlp(b, features, {32}, outputs, classify); };
    o.options.lr = 0.01;
    TrainingSession session(o, init_parameters(o.graph(32), 1));
    const FitReport r = fit(session, split.train, split.test, FitOptions{20, 32, 1, false, 0});
    if (classify) {
      EXPECT_GE(r.epochs.back().accuracy, 0.9);
    } else {
      EXPECT_LT(r.epochs.back().rmse * schema.target_scale, 1.0);
      EXPECT_LT(r.epochs.back().rmse, r.epochs.front().rmse);
    }
  }
}

}  // namespace
}  // namespace pact::train
