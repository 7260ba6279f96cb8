#include "engine/config_loader.h"

#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/status_macros.h"
#include "engine/config_validation.h"
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

absl::StatusOr<TrainConfig> ParseTrainConfig(absl::string_view text, absl::string_view source_name) {
  TrainConfig config;
  CollectingErrors errors(source_name);
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &config)) {
    if (errors.errors().empty()) return absl::InvalidArgumentError(absl::StrCat(source_name, ": parse error"));
    return absl::InvalidArgumentError(absl::StrJoin(errors.errors(), "\n"));
  }
  return config;
}

absl::Status ApplyOverride(absl::string_view override_text, TrainConfig* config) {
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

absl::StatusOr<TrainConfig> LoadTrainConfig(const std::string& path, const std::vector<std::string>& overrides,
                                            int world_size) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read config file"));
  std::stringstream text;
  text << in.rdbuf();
  ASSIGN_OR_RETURN(TrainConfig config, ParseTrainConfig(text.str(), path));
  for (const std::string& o : overrides) RETURN_IF_ERROR(ApplyOverride(o, &config));
  ValidationOptions options;
  options.world_size = world_size;
  std::vector<std::string> errors = TrainConfigErrors(config, options);
  if (!errors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": invalid config:\n", absl::StrJoin(errors, "\n")));
  }
  return config;
}

}  // namespace zeroshard
