#include "engine/config_loader.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace zeroshard {
namespace {

namespace pb = google::protobuf;

class CollectingErrors : public pb::io::ErrorCollector {
 public:
  explicit CollectingErrors(absl::string_view source) : source_(source) {}
  void AddError(int line, int column, const std::string& message) override {
    errors_.push_back(absl::StrCat(source_, ":", line + 1, ":", column + 1, ": ", message));
  }
  void AddWarning(int line, int column, const std::string& message) override {
    AddError(line, column, absl::StrCat("warning: ", message));
  }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::string source_;
  std::vector<std::string> errors_;
};

std::string FieldNames(const pb::Descriptor* d) {
  std::vector<std::string> names;
  for (int i = 0; i < d->field_count(); ++i) names.push_back(d->field(i)->name());
  return absl::StrJoin(names, ", ");
}

}  // namespace

std::string ConfigMessageName(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (!absl::ConsumePrefix(&line, "#")) break;  // the first field: the header is over
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "proto-message:")) continue;
    line = absl::StripAsciiWhitespace(line);
    const size_t end = line.find_first_of(" \t#");
    return std::string(line.substr(0, end));
  }
  return "";
}

absl::Status ParseConfigText(absl::string_view text, absl::string_view source_name, pb::Message* message) {
  message->Clear();
  CollectingErrors errors(source_name);
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), message)) {
    if (errors.errors().empty()) return absl::InvalidArgumentError(absl::StrCat(source_name, ": parse error"));
    return absl::InvalidArgumentError(absl::StrJoin(errors.errors(), "\n"));
  }
  return absl::OkStatus();
}

absl::Status ApplyOverride(absl::string_view override_text, pb::Message* config) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("--set ", override_text, ": ", why));
  };
  const size_t eq = override_text.find('=');
  if (eq == absl::string_view::npos || eq == 0) return bad("expected PATH=VALUE, e.g. engine.zero.stage=2");
  const absl::string_view path = override_text.substr(0, eq);
  const std::string value(override_text.substr(eq + 1));

  pb::Message* msg = config;
  std::vector<absl::string_view> parts = absl::StrSplit(path, '.');
  std::string walked;
  for (size_t i = 0; i < parts.size(); ++i) {
    const pb::Descriptor* d = msg->GetDescriptor();
    const pb::FieldDescriptor* f = d->FindFieldByName(std::string(parts[i]));
    if (f == nullptr) {
      return bad(absl::StrCat("no field '", parts[i], "' in ", walked.empty() ? "the config" : walked,
                              "; fields are: ", FieldNames(d)));
    }
    absl::StrAppend(&walked, walked.empty() ? "" : ".", parts[i]);
    const pb::Reflection* r = msg->GetReflection();
    if (i + 1 < parts.size()) {
      if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE || f->is_repeated()) {
        return bad(absl::StrCat(walked, " is not a section"));
      }
      msg = r->MutableMessage(msg, f);
      continue;
    }
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      return bad(absl::StrCat(walked, " is a section; set one of its fields: ", FieldNames(f->message_type())));
    }
    if (f->is_repeated() && value.empty()) {
      r->ClearField(msg, f);
      return absl::OkStatus();
    }
    std::string literal = value;
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING && !(literal.size() >= 2 && literal.front() == '"')) {
      literal = absl::StrCat("\"", absl::CEscape(value), "\"");
    }
    CollectingErrors value_errors(override_text);  // Keeps protobuf from logging to stderr.
    pb::TextFormat::Parser parser;
    parser.RecordErrorsTo(&value_errors);
    if (!parser.ParseFieldValueFromString(literal, f, msg)) {
      std::string expected;
      switch (f->cpp_type()) {
        case pb::FieldDescriptor::CPPTYPE_ENUM: {
          std::vector<std::string> names;
          for (int k = 0; k < f->enum_type()->value_count(); ++k) names.push_back(f->enum_type()->value(k)->name());
          expected = absl::StrCat("one of ", absl::StrJoin(names, ", "));
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_BOOL:
          expected = "true or false";
          break;
        default:
          expected = absl::StrCat("a value of type ", f->cpp_type_name());
      }
      return bad(absl::StrCat("'", value, "' is not valid for ", walked, "; expected ", expected));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read config file"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::Status LoadConfigMessage(const std::string& path, const std::vector<std::string>& overrides,
                               absl::string_view headerless_message, pb::Message* message) {
  ASSIGN_OR_RETURN(const std::string text, ReadConfigFile(path));
  const std::string named = ConfigMessageName(text);
  const std::string& expected = message->GetDescriptor()->full_name();
  if (named.empty() && expected != headerless_message) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": has no '# proto-message:' header, so it is a ",
                                                   headerless_message, ", but this program reads a ", expected,
                                                   "; start the file with '# proto-message: ", expected, "'"));
  }
  if (!named.empty() && named != expected) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": its header names ", named, " ('# proto-message: ", named,
                                                   "'), but this program reads a ", expected));
  }
  RETURN_IF_ERROR(ParseConfigText(text, path, message));
  for (const std::string& o : overrides) RETURN_IF_ERROR(ApplyOverride(o, message));
  return absl::OkStatus();
}

absl::Status InvalidConfig(const std::string& path, const std::vector<std::string>& errors) {
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(path, ": invalid config:\n", absl::StrJoin(errors, "\n")));
}

}  // namespace zeroshard
