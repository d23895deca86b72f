// The TOML subset torchtitan's job configurations use, read into the document tree; what it does
// not read is refused with the line that holds it.
#include "bmpipe/core/toml.h"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

namespace bmpipe {
namespace {

Json Parse(const std::string& text) {
  Result<Json> doc = ParseToml(text, "job.toml");
  EXPECT_TRUE(doc.ok()) << doc.error().message;
  return doc.ok() ? doc.value() : Json();
}

std::string Error(const std::string& text) {
  Result<Json> doc = ParseToml(text, "job.toml");
  EXPECT_FALSE(doc.ok()) << text;
  return doc.ok() ? "" : doc.error().message;
}

TEST(Toml, TablesKeysAndValues) {
  const Json j = Parse(
      "# a comment\n"
      "title = \"t\\u00e9st\\n\"  # trailing comment\n"
      "[parallelism]\n"
      "tensor_parallel_degree = 8\n"
      "data_parallel_shard_degree = -1\n"
      "big = 1_000_000\n"
      "hex = 0xff\n"
      "lr = 1.5e-4\n"
      "ratio = +0.25\n"
      "on = true\n"
      "'quoted key' = 'C:\\path'\n"
      "\"dq\".inner = 2\n"
      "[a.b]\n"
      "list = [\n  \"x\", # first\n  \"y\",\n]\n"
      "nested = [[\"tok_embeddings\", \"layers.0\"], [\"layers.1\", \"norm\"]]\n"
      "inline = { x = 1, y.z = \"w\" }\n"
      "inf = -inf\n");
  EXPECT_EQ(j["title"], "t\xc3\xa9st\n");
  EXPECT_EQ(j["parallelism"]["tensor_parallel_degree"], 8);
  EXPECT_EQ(j["parallelism"]["data_parallel_shard_degree"], -1);
  EXPECT_EQ(j["parallelism"]["big"], 1000000);
  EXPECT_EQ(j["parallelism"]["hex"], 255);
  EXPECT_DOUBLE_EQ(j["parallelism"]["lr"].get<double>(), 1.5e-4);
  EXPECT_DOUBLE_EQ(j["parallelism"]["ratio"].get<double>(), 0.25);
  EXPECT_EQ(j["parallelism"]["on"], true);
  EXPECT_EQ(j["parallelism"]["quoted key"], "C:\\path");
  EXPECT_EQ(j["parallelism"]["dq"]["inner"], 2);
  EXPECT_EQ(j["a"]["b"]["list"], Json({"x", "y"}));
  EXPECT_EQ(j["a"]["b"]["nested"].size(), 2u);
  EXPECT_EQ(j["a"]["b"]["nested"][1][1], "norm");
  EXPECT_EQ(j["a"]["b"]["inline"]["y"]["z"], "w");
  EXPECT_TRUE(std::isinf(j["a"]["b"]["inf"].get<double>()));
}

TEST(Toml, RefusesWhatItDoesNotReadWithTheLine) {
  EXPECT_EQ(Error("[t]\nx = 1\nx = 2\n"), "job.toml: line 3: 'x' is given twice");
  EXPECT_NE(Error("[t]\n[t]\n").find("line 2: table [t] is defined twice"), std::string::npos);
  EXPECT_NE(Error("a = 1\n[a]\n").find("'a' is already a value"), std::string::npos);
  EXPECT_NE(Error("a = {x = 1}\n[a]\n").find("table [a] is defined twice"), std::string::npos);
  EXPECT_NE(Error("a = {x = 1}\na.y = 2\n").find("is already a value"), std::string::npos);
  EXPECT_NE(Error("[[runs]]\n").find("arrays of tables"), std::string::npos);
  EXPECT_NE(Error("s = \"\"\"\nmulti\n\"\"\"\n").find("multi-line strings"), std::string::npos);
  EXPECT_NE(Error("d = 2024-01-01\n").find("dates and times"), std::string::npos);
  EXPECT_NE(Error("n = 012\n").find("is not a TOML value"), std::string::npos);
  EXPECT_NE(Error("n = 1__0\n").find("is not a TOML value"), std::string::npos);
  EXPECT_NE(Error("n = 99999999999999999999\n").find("out of the range"), std::string::npos);
  EXPECT_NE(Error("s = \"open\n").find("line 1: a string must end on its line"), std::string::npos);
  EXPECT_NE(Error("s = \"\\q\"\n").find("unknown escape"), std::string::npos);
  EXPECT_NE(Error("s = \"\\ud800\"\n").find("not a Unicode scalar value"), std::string::npos);
  EXPECT_NE(Error("x = 1 y = 2\n").find("after the value"), std::string::npos);
  EXPECT_NE(Error("x\n").find("needs '= value'"), std::string::npos);
  EXPECT_NE(Error("x = \n").find("a value is missing"), std::string::npos);
  EXPECT_NE(Error("x = [1, 2\n").find("array values are separated by ','"), std::string::npos);
  EXPECT_NE(Error("x = [1,\n").find("closing ']'"), std::string::npos);
  EXPECT_NE(Error("x = {a = 1\n}\n").find("inline table"), std::string::npos);
  // Nesting is bounded: no stack exhaustion on hostile input.
  EXPECT_NE(Error("x = " + std::string(100, '[') + std::string(100, ']') + "\n").find("nest more than"),
            std::string::npos);
  EXPECT_NE(Error(std::string("x = \"a\0b\"\n", 11)).find("NUL"), std::string::npos);
}

// A table of many keys reads in linear time, in order, its duplicates found.
TEST(Toml, ManyKeysKeepTheirOrderAndDuplicatesAreFound) {
  std::string text = "[t]\n";
  for (int i = 0; i < 100000; ++i) text += "k" + std::to_string(i) + " = " + std::to_string(i) + "\n";
  const Json j = Parse(text);
  ASSERT_EQ(j["t"].size(), 100000u);
  EXPECT_EQ(j["t"].begin().key(), "k0");
  EXPECT_EQ(j["t"]["k99999"], 99999);
  EXPECT_NE(Error(text + "k5 = 1\n").find("line 100002: 'k5' is given twice"), std::string::npos);
}

TEST(Toml, HasTomlTableFindsHeadersOnTheirOwnLine) {
  EXPECT_TRUE(HasTomlTable("# c\n[job]\nx = 1\n", "job"));
  EXPECT_TRUE(HasTomlTable("  [job]  # c\n", "job"));
  EXPECT_FALSE(HasTomlTable("x = \"[job]\"\n", "job"));
  EXPECT_FALSE(HasTomlTable("--job [job] x\n", "job"));
}

}  // namespace
}  // namespace bmpipe
