#include "bmpipe/core/json_cursor.h"

#include <gtest/gtest.h>

namespace bmpipe {
namespace {

template <typename T>
std::string Failure(const Json& doc, const std::function<T(const JsonCursor&)>& read) {
  Result<T> r = ReadDocument<T>("f", [&] { return read(JsonCursor(doc, "")); });
  return r.ok() ? "" : r.error().message;
}

TEST(JsonCursor, SecondsRoundToTheNearestNanosecond) {
  Json doc = {{"t", 0.0002}, {"u", 1.2345678904}, {"b", 2.0e9}};
  JsonCursor c(doc, "");
  EXPECT_EQ(c.Required("t", "").Seconds(), 200'000);
  EXPECT_EQ(c.Required("u", "").Seconds(), 1'234'567'890);
  EXPECT_EQ(c.Required("b", "").ByteCount(), 2'000'000'000);
}

TEST(JsonCursor, IntegersMustBeWholeAndInRange) {
  Json doc = {{"n", 3.0}, {"x", 3.5}, {"y", 70}};
  JsonCursor c(doc, "");
  EXPECT_EQ(c.Required("n", "").Integer(1, 10, "fix"), 3);
  EXPECT_EQ(Failure<std::int64_t>(doc, [](const JsonCursor& j) { return j.Required("x", "").Integer(1, 10, "fix it"); }),
            "f: x = 3.5: must be a whole number; fix it");
  EXPECT_EQ(Failure<std::int64_t>(doc, [](const JsonCursor& j) { return j.Required("y", "").Integer(1, 10, "fix it"); }),
            "f: y = 70: must be between 1 and 10; fix it");
}

TEST(JsonCursor, PathsNameNestedElements) {
  Json doc = {{"a", {{{"b", {1, "two"}}}}}};
  EXPECT_EQ(Failure<double>(doc,
                            [](const JsonCursor& j) {
                              return j.Required("a", "").Elements()[0].Required("b", "").Elements()[1].Number();
                            }),
            "f: a[0].b[1] = \"two\": expected a number, found a string");
}

TEST(JsonCursor, DidYouMean) {
  EXPECT_EQ(DidYouMean("micro_batch", {"stages", "micro_batches"}), "; did you mean 'micro_batches'?");
  EXPECT_EQ(DidYouMean("zzz", {"stages", "micro_batches"}), "");
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

}  // namespace
}  // namespace bmpipe
