#include "bmpipe/core/document.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "test_support.h"

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

std::string ErrorOf(const std::string& text, const std::string& path) {
  Result<Json> doc = ParseDocument(text, path);
  EXPECT_FALSE(doc.ok()) << text.substr(0, 80);
  return doc.ok() ? "" : doc.error().message;
}

TEST(Document, NumbersBeyondADoubleAreErrorsNotCrashes) {
  EXPECT_NE(ErrorOf("{\"a\": 1e400}", "x.json").find("number overflow parsing '1e400'"), std::string::npos);
  EXPECT_EQ(ErrorOf("a: 1\nb: -1e400\n", "x.yaml"), "x.yaml: line 2: the number -1e400 lies beyond +-1.7e308");
  // Underflow is harmless: it reads as zero.
  EXPECT_EQ(ParseDocument("a: 1e-400", "x.yaml").value()["a"], 0.0);
}

TEST(Document, TextMustBeUtf8) {
  EXPECT_EQ(ErrorOf("name: ok\nlabel: caf\xe9\n", "x.yaml"),
            "x.yaml: line 2, column 11: byte 0xE9 is not valid UTF-8; save the file as UTF-8");
  EXPECT_NE(ErrorOf("{\"a\": \"\xed\xa0\x80\"}", "x.json").find("byte 0xED is not valid UTF-8"), std::string::npos);  // a surrogate
  EXPECT_NE(ErrorOf("a: \xc0\xaf", "x.yaml").find("byte 0xC0"), std::string::npos);  // overlong
  EXPECT_NE(ErrorOf("a: \xf4\x90\x80\x80", "x.yaml").find("byte 0xF4"), std::string::npos);  // past U+10FFFF
  EXPECT_NE(ErrorOf("a: \xe2\x82", "x.yaml").find("byte 0xE2"), std::string::npos);  // cut short
  EXPECT_TRUE(ParseDocument("a: \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", "x.yaml").ok());
  EXPECT_EQ(FirstInvalidUtf8("ok \xc3\xa9 \xff"), 6u);
  // YAML escapes give valid UTF-8, \_ and \N too (U+00A0 and U+0085; yaml-cpp, the parser before
  // libyaml, turned those two into single bytes, which were refused).
  EXPECT_EQ(ParseDocument("a: \"\\xA0\"", "x.yaml").value()["a"], "\xc2\xa0");
  EXPECT_EQ(ParseDocument("a: 1\nb: \"x\\_y\"\n", "x.yaml").value()["b"], "x\xc2\xa0y");
  EXPECT_EQ(ParseDocument("b: \"x\\Ny\"\n", "x.yaml").value()["b"], "x\xc2\x85y");
  // A NUL byte would make the YAML parser read the text as UTF-32.
  EXPECT_EQ(ErrorOf(std::string("q\0\0\0{a: 1}", 10), "x"), "x: line 1, column 2: a NUL byte; a document is text");
}

TEST(Document, NestingIsBounded) {
  const int deep = 100000;
  const std::string lists = std::string(deep, '[') + std::string(deep, ']');
  EXPECT_EQ(ErrorOf(lists, "x.json"),
            "x.json: lists and objects nest more than 64 levels deep; a JSON input never needs that many");
  EXPECT_EQ(ErrorOf(lists, "x.yaml"),
            "x.yaml: lists and objects nest more than 64 levels deep; a YAML input never needs that many");
  std::string block;
  for (int i = 0; i < 3000; ++i) block += std::string(static_cast<std::size_t>(i), ' ') + "- \n";
  EXPECT_NE(ErrorOf(block, "x.yaml").find("nest more than 64 levels"), std::string::npos);
  const std::string ok = std::string(30, '[') + std::string(30, ']');
  EXPECT_TRUE(ParseDocument(ok, "x.json").ok());
  EXPECT_TRUE(ParseDocument(ok, "x.yaml").ok());
}

TEST(Document, YamlAliasesCannotExpandWithoutBound) {
  // The "billion laughs": ten aliases of ten aliases of ... 10^12 values from a few hundred bytes.
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 12; ++i) {
    const std::string p = "*a" + std::to_string(i - 1);
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + p;
    for (int k = 1; k < 10; ++k) text += ", " + p;
    text += "]\n";
  }
  EXPECT_EQ(ErrorOf(text, "x.yaml"), "x.yaml: YAML aliases expand the document to more than " +
                                         std::to_string(text.size() + kMaxAliasValues) +
                                         " values (1000000 more than it has bytes); use 'repeat' for identical layers "
                                         "instead of aliases");
  // Aliases used a few times are fine.
  EXPECT_EQ(ParseDocument("a: &x {b: 1}\nc: *x\n", "x.yaml").value()["c"]["b"], 1);
}

TEST(Document, EmptyAndOddDocumentsAreErrors) {
  EXPECT_EQ(ErrorOf("  \n", "x.yaml"), "x.yaml: the document is empty");
  EXPECT_EQ(ErrorOf("", "x.json"), "x.json: the document is empty");
  EXPECT_EQ(ErrorOf("? [a, b]\n: 1\n", "x.yaml"), "x.yaml: line 1: a mapping key must be a plain name, not a list or mapping");
}

TEST(Document, LoadReadsOnlyWhatItCanBound) {
  const std::string dir = testing::MakeTempDir();
  Result<Json> directory = LoadDocument(dir);
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.error().kind, ErrorKind::kIo);
  EXPECT_EQ(directory.error().message, dir + ": is a directory; give a file");
  // A device that never ends is read up to the size limit, then refused.
  Result<Json> zero = LoadDocument("/dev/zero");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().message, "/dev/zero: the file is more than 67108864 bytes; bmpipe reads documents of at most 64 MiB");
  // A named pipe without a writer does not block: it reads as empty.
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  Result<Json> pipe = LoadDocument(fifo);
  ASSERT_FALSE(pipe.ok());
  EXPECT_EQ(pipe.error().message, fifo + ": the document is empty");
  // A regular file over the size limit is refused before it is read.
  const std::string big = dir + "/big.json";
  ASSERT_EQ(truncate((std::ofstream(big), big.c_str()), static_cast<off_t>(kMaxDocumentBytes) + 1), 0);
  Result<Json> large = LoadDocument(big);
  ASSERT_FALSE(large.ok());
  EXPECT_EQ(large.error().message, big + ": the file is 67108865 bytes; bmpipe reads documents of at most 64 MiB");
  std::remove(big.c_str());
  std::remove(fifo.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace bmpipe

namespace bmpipe {
namespace {

// Objects of many keys read in linear time (nlohmann's ordered map searches on every insert): the
// keys keep their order, and a duplicate among them is still found.
TEST(Document, ManyKeysKeepTheirOrderAndDuplicatesAreFound) {
  constexpr int kKeys = 100000;
  std::string json = "{", yaml;
  for (int i = 0; i < kKeys; ++i) {
    json += (i == 0 ? "" : ",") + ("\"k" + std::to_string(i) + "\":") + std::to_string(i);
    yaml += "k" + std::to_string(i) + ": " + std::to_string(i) + "\n";
  }
  for (const auto& [text, path] : {std::pair<std::string, std::string>{json + "}", "x.json"}, {yaml, "x.yaml"}}) {
    Result<Json> doc = ParseDocument(text, path);
    ASSERT_TRUE(doc.ok()) << doc.error().message;
    ASSERT_EQ(doc.value().size(), static_cast<std::size_t>(kKeys));
    EXPECT_EQ(doc.value().begin().key(), "k0");
    EXPECT_EQ(doc.value()["k99999"], kKeys - 1);
  }
  Result<Json> dup = ParseDocument(json + ",\"k5\":1}", "x.json");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message.find("key 'k5' appears twice"), std::string::npos) << dup.error().message;
  dup = ParseDocument(yaml + "k7: 1\n", "x.yaml");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message.find("key 'k7' appears twice"), std::string::npos) << dup.error().message;
}

}  // namespace
}  // namespace bmpipe
