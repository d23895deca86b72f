#include "bmpipe/core/document.h"

#include <gtest/gtest.h>

namespace bmpipe {
namespace {

TEST(Document, YamlScalarsFollowTheCoreSchema) {
  Result<Json> doc = ParseDocument("a: 3\nb: 2.5\nc: 1e9\nd: true\ne: '7'\nf: 1f1b\ng: ~\nh: -4\n", "x.yaml");
  ASSERT_TRUE(doc.ok()) << doc.error().message;
  const Json& j = doc.value();
  EXPECT_TRUE(j["a"].is_number_integer());
  EXPECT_EQ(j["a"], 3);
  EXPECT_EQ(j["b"], 2.5);
  EXPECT_EQ(j["c"], 1e9);
  EXPECT_EQ(j["d"], true);
  EXPECT_EQ(j["e"], "7");  // quoted: a string
  EXPECT_EQ(j["f"], "1f1b");
  EXPECT_TRUE(j["g"].is_null());
  EXPECT_EQ(j["h"], -4);
}

TEST(Document, KeysKeepTheirOrder) {
  Result<Json> doc = ParseDocument("{\"z\": 1, \"a\": 2}", "x.json");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(doc.value().dump(), "{\"z\":1,\"a\":2}");
}

TEST(Document, DuplicateKeysAreErrors) {
  Result<Json> json = ParseDocument("{\"a\": {\"b\": 1, \"b\": 2}}", "x.json");
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.error().message, "x.json: key 'b' appears twice in the same object; keep one");
  Result<Json> yaml = ParseDocument("a: 1\nb: 2\na: 3\n", "x.yaml");
  ASSERT_FALSE(yaml.ok());
  EXPECT_EQ(yaml.error().message, "x.yaml: line 3: key 'a' appears twice in the same mapping; keep one");
  // The same key in sibling objects is fine.
  EXPECT_TRUE(ParseDocument("[{\"a\": 1}, {\"a\": 2}]", "x.json").ok());
}

TEST(Document, SyntaxErrorsSayWhere) {
  Result<Json> json = ParseDocument("{\n  \"a\": 1,\n}", "x.json");
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.error().kind, ErrorKind::kInvalidInput);
  EXPECT_NE(json.error().message.find("x.json: not valid JSON: "), std::string::npos);
  EXPECT_NE(json.error().message.find("line 3"), std::string::npos);
  Result<Json> yaml = ParseDocument("a: [1, 2\nb: 3\n", "x.yaml");
  ASSERT_FALSE(yaml.ok());
  EXPECT_NE(yaml.error().message.find("x.yaml: not valid YAML: line"), std::string::npos);
}

TEST(Document, FormatIsSniffedWithoutAnExtension) {
  EXPECT_EQ(ParseDocument("  {\"a\": 1}", "stdin").value()["a"], 1);
  EXPECT_EQ(ParseDocument("a: 1", "stdin").value()["a"], 1);
}

}  // namespace
}  // namespace bmpipe
