// docs/config_reference.md must list exactly the leaf fields of TrainConfig,
// each with the proto's default, so the reference cannot drift.
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2_config.pb.h"

namespace zeroshard {
namespace {

namespace pb = google::protobuf;

std::string DefaultText(const pb::FieldDescriptor* f) {
  if (f->is_repeated()) return "(empty)";
  // A scalar without a written default: "unset" has its own meaning.
  if (!f->has_default_value() && f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) return "(unset)";
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
      return std::to_string(f->default_value_int32());
    case pb::FieldDescriptor::CPPTYPE_INT64:
      return std::to_string(f->default_value_int64());
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      return std::to_string(f->default_value_uint64());
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      return f->default_value_bool() ? "true" : "false";
    case pb::FieldDescriptor::CPPTYPE_ENUM:
      return f->default_value_enum()->name();
    case pb::FieldDescriptor::CPPTYPE_STRING:
      return "\"" + f->default_value_string() + "\"";
    case pb::FieldDescriptor::CPPTYPE_DOUBLE: {
      std::ostringstream s;
      s << f->default_value_double();
      return s.str();
    }
    default:
      return "?";
  }
}

void Leaves(const pb::Descriptor* d, const std::string& prefix, std::map<std::string, const pb::FieldDescriptor*>* out) {
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      Leaves(f->message_type(), prefix + f->name() + ".", out);
    } else {
      (*out)[prefix + f->name()] = f;
    }
  }
}

double AsDouble(const std::string& s) { return std::stod(s); }

TEST(ConfigDocTest, ReferenceListsEveryFieldWithItsDefault) {
  std::ifstream in("docs/config_reference.md");
  ASSERT_TRUE(in) << "docs/config_reference.md not found (run from the workspace root)";
  std::map<std::string, std::string> documented;  // path -> default column
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cols = absl::StrSplit(line, " | ");
    ASSERT_GE(cols.size(), 4u) << line;
    std::string path(absl::StripSuffix(absl::StripPrefix(cols[0], "| `"), "`"));
    EXPECT_EQ(documented.count(path), 0u) << "documented twice: " << path;
    documented[path] = cols[2];
  }
  std::map<std::string, const pb::FieldDescriptor*> fields;
  Leaves(TrainConfig::descriptor(), "", &fields);
  for (const auto& [path, field] : fields) {
    auto it = documented.find(path);
    if (it == documented.end()) {
      ADD_FAILURE() << "config field " << path << " is missing from docs/config_reference.md";
      continue;
    }
    const std::string want = DefaultText(field);
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_DOUBLE) {
      EXPECT_DOUBLE_EQ(AsDouble(it->second), field->default_value_double()) << path;
    } else {
      EXPECT_EQ(it->second, want) << "default of " << path;
    }
  }
  for (const auto& [path, unused] : documented) {
    EXPECT_EQ(fields.count(path), 1u) << "docs/config_reference.md lists " << path << ", which config.proto lacks";
  }
  EXPECT_GT(fields.size(), 60u);
}

}  // namespace
}  // namespace zeroshard
