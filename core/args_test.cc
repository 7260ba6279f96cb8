#include "core/args.h"

#include <vector>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

absl::StatusOr<ParsedArgs> Parse(std::vector<const char*> argv) {
  return ParseArgs(static_cast<int>(argv.size()), const_cast<char**>(argv.data()), 0,
                   {{"out"}, {"set", true, true}, {"optimizer", false}});
}

TEST(ArgsTest, PositionalFlagsAndRepeats) {
  absl::StatusOr<ParsedArgs> a = Parse({"dir", "--out=x.st", "--set", "a=1", "--optimizer", "--set=b=2", "more"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->positional, (std::vector<std::string>{"dir", "more"}));
  EXPECT_EQ(a->Get("out"), "x.st");
  EXPECT_EQ(a->GetAll("set"), (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_TRUE(a->Has("optimizer"));
  EXPECT_FALSE(a->Has("missing"));
  EXPECT_EQ(a->Get("missing", "dflt"), "dflt");
}

TEST(ArgsTest, ErrorsNameTheFlag) {
  EXPECT_EQ(Parse({"--bogus"}).status().message(), "unknown flag --bogus");
  EXPECT_EQ(Parse({"--out"}).status().message(), "--out needs a value");
  EXPECT_EQ(Parse({"--out=a", "--out=b"}).status().message(), "--out given more than once");
  EXPECT_EQ(Parse({"--optimizer=yes"}).status().message(), "--optimizer takes no value");
  EXPECT_EQ(Parse({"--bogus"}).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<ParsedArgs> a = Parse({"--out=abc"});
  EXPECT_EQ(a->GetInt("out", 0).status().message(), "--out: 'abc' is not an integer");
}

}  // namespace
}  // namespace zeroshard
