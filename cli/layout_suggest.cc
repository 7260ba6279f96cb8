#include "cli/layout_suggest.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "cli/check_config.h"
#include "engine/config_validation.h"
#include "engine/engine_options.h"
#include "engine/memory_plan.h"
#include "engine/pipeline_plan.h"
#include "engine/pipeline_schedule.h"
#include "engine/step_plan.h"

namespace zeroshard::cli {
namespace {

constexpr int kMaxMicroBatches = 16;

std::string OffloadText(const EngineConfig& engine) {
  const OffloadConfig& o = engine.offload();
  std::vector<std::string> parts;
  auto add = [&](const char* name, OffloadTierProto tier) {
    if (tier != OffloadTierProto::DEVICE) parts.push_back(absl::StrCat(name, " ", OffloadTierProto_Name(tier)));
  };
  add("optimizer_state", o.optimizer_state());
  add("master_weights", o.master_weights());
  add("params", o.params());
  add("grads", o.grads());
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

// A message on one line (the table keeps one row per layout), without the
// config's path every row would repeat.
std::string OneLine(absl::string_view message, const std::string& path) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(message, '\n', absl::SkipWhitespace())) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, path)) absl::ConsumePrefix(&line, ": ");
    lines.emplace_back(line);
  }
  return absl::StrJoin(lines, " ");
}

std::vector<std::vector<int>> Factorizations(int world) {
  std::vector<std::vector<int>> out;
  for (int dp = 1; dp <= world; ++dp) {
    if (world % dp != 0) continue;
    for (int tp = 1; tp <= world / dp; ++tp) {
      if ((world / dp) % tp != 0) continue;
      out.push_back({dp, tp, world / dp / tp});
    }
  }
  return out;
}

void Evaluate(const std::string& path, const std::vector<std::string>& overrides, int world,
              const CostProfile& profile, LayoutChoice* c) {
  std::vector<std::string> sets = overrides;
  sets.insert(sets.end(), c->sets.begin(), c->sets.end());
  absl::StatusOr<RunConfig> run = LoadRunConfig(path, sets, world);
  if (!run.ok()) {
    c->verdict = OneLine(run.status().message(), path);
    return;
  }
  c->offload = OffloadText(run->engine);
  absl::StatusOr<EngineOptions> options = EngineOptionsFromConfig(run->engine);
  if (!options.ok()) {
    c->verdict = OneLine(options.status().message(), path);
    return;
  }
  absl::StatusOr<int64_t> limit = ResolveMemoryLimit(*options, RanksOnHost(world));
  if (!limit.ok()) {
    c->verdict = OneLine(limit.status().message(), path);
    return;
  }
  std::string report;
  const absl::Status planned = MemoryPlanReport(*run, world, *limit, &report);
  if (!planned.ok()) {
    c->verdict = OneLine(planned.message(), path);
    return;
  }
  absl::StatusOr<StepTimePrediction> p = PredictRunStep(*run, profile);
  if (!p.ok()) {
    c->verdict = OneLine(p.status().message(), path);
    return;
  }
  c->feasible = true;
  c->prediction = *p;
  c->priced = true;
  for (const std::string& note : p->notes) {
    if (absl::StrContains(note, "not priced")) c->priced = false;
  }
  c->verdict = p->notes.empty() ? "fits" : absl::StrCat("fits; ", absl::StrJoin(p->notes, "; "));
}

}  // namespace

absl::StatusOr<StepTimePrediction> PredictRunStep(const RunConfig& run, const CostProfile& profile) {
  absl::StatusOr<EngineOptions> options = EngineOptionsFromConfig(run.engine);
  if (!options.ok()) return options.status();
  absl::StatusOr<std::unique_ptr<Model>> model = run.build_model();
  if (!model.ok()) return model.status();
  const ParallelConfig& parallel = run.engine.parallel();
  const int dp = parallel.dp(), tp = parallel.tp(), pp = parallel.pp();
  const int64_t rows = MicroBatchSize(run.engine, run.global_batch);
  const double scale = ComputeScale(profile, rows * run.sequence_length, tp);
  // This layout's ranks on the profiled host's cores, each with the
  // profiled compute threads.
  const CoreShare host{profile.host_cores(), RanksOnHost(dp * tp * pp), profile.threads_per_rank()};
  absl::StatusOr<StepTimePrediction> p;
  if (pp == 1) {
    const int shard = options->sharding.shard_group_size > 0 ? options->sharding.shard_group_size : dp;
    absl::StatusOr<StepPlan> plan = PlanDataParallelStep(**model, *options, shard);
    if (!plan.ok()) return plan.status();
    p = PredictStepTime(*plan, *options, {{"dp", shard}, {"dp_replica", dp / shard}, {"world", dp * tp}}, scale,
                        profile, host);
  } else {
    absl::StatusOr<PipelinePlan> plan = PlanPipeline(**model, *options, dp, {rows, run.sequence_length});
    if (!plan.ok()) return plan.status();
    p = PredictPipelineStepTime(*plan, *options, dp, scale, profile, host);
  }
  if (p.ok() && tp != std::max(1, profile.tp())) {
    p->notes.push_back(absl::StrCat("tp collectives not priced (profiled at tp ", std::max(1, profile.tp()), ")"));
  }
  return p;
}

absl::StatusOr<std::vector<LayoutChoice>> SuggestLayouts(const std::string& path,
                                                         const std::vector<std::string>& overrides, int world,
                                                         const CostProfile& profile) {
  absl::StatusOr<RunConfig> base = LoadRunConfig(path, overrides, /*world_size=*/-1);
  if (!base.ok()) return base.status();
  const int configured_m = base->engine.gradient_accumulation_steps();
  std::vector<LayoutChoice> out;
  for (const std::vector<int>& f : Factorizations(world)) {
    const int dp = f[0], tp = f[1], pp = f[2];
    if (base->global_batch % dp != 0) continue;
    std::set<int> ms = {configured_m};
    for (int m = 1; m <= kMaxMicroBatches; m *= 2) ms.insert(m);
    for (int m : ms) {
      if (m < 1 || base->global_batch % (static_cast<int64_t>(dp) * m) != 0) continue;
      std::vector<std::pair<std::string, int>> schedules = {{"-", 1}};
      if (pp > 1) {
        schedules = {{"GPIPE", 1}, {"ONE_F_ONE_B", 1}, {"ZERO_BUBBLE_H1", 1}, {"INTERLEAVED_1F1B", 2}};
      }
      for (const auto& [schedule, v] : schedules) {
        LayoutChoice c;
        c.dp = dp;
        c.tp = tp;
        c.pp = pp;
        c.micro_batches = m;
        c.virtual_stages = v;
        c.schedule = schedule;
        c.sets = {absl::StrCat("engine.parallel.dp=", dp), absl::StrCat("engine.parallel.tp=", tp),
                  absl::StrCat("engine.parallel.pp=", pp), absl::StrCat("engine.gradient_accumulation_steps=", m)};
        if (tp == 1) c.sets.push_back("engine.parallel.sequence_parallel=false");
        if (pp > 1) {
          c.sets.push_back(absl::StrCat("engine.parallel.pipeline_schedule=", schedule));
          c.sets.push_back(absl::StrCat("engine.parallel.virtual_stages=", v));
        }
        Evaluate(path, overrides, world, profile, &c);
        out.push_back(std::move(c));
      }
    }
  }
  auto tier = [](const LayoutChoice& c) { return c.feasible ? (c.priced ? 0 : 1) : 2; };
  std::stable_sort(out.begin(), out.end(), [&](const LayoutChoice& a, const LayoutChoice& b) {
    if (tier(a) != tier(b)) return tier(a) < tier(b);
    return tier(a) < 2 && a.prediction.step_seconds < b.prediction.step_seconds;
  });
  return out;
}

std::string FormatLayoutChoices(const std::vector<LayoutChoice>& choices) {
  std::string out =
      "| rank | dp | tp | pp | micro-batches | schedule | offload | predicted step ms | bubble | verdict |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n";
  int rank = 0;
  for (const LayoutChoice& c : choices) {
    const std::string schedule =
        c.virtual_stages > 1 ? absl::StrCat(c.schedule, " (v ", c.virtual_stages, ")") : c.schedule;
    const std::string step = c.feasible ? absl::StrFormat("%.1f", c.prediction.step_seconds * 1000) : "-";
    const std::string bubble = c.feasible && c.pp > 1 ? absl::StrFormat("%.3f", c.prediction.bubble_fraction) : "-";
    absl::StrAppendFormat(&out, "| %s | %d | %d | %d | %d | %s | %s | %s | %s | %s |\n",
                          c.feasible ? absl::StrCat(++rank) : "-", c.dp, c.tp, c.pp, c.micro_batches, schedule,
                          c.offload.empty() ? "-" : c.offload, step, bubble, c.verdict);
  }
  for (const LayoutChoice& c : choices) {
    if (!c.feasible || !c.priced) continue;
    std::string flags;
    for (const std::string& s : c.sets) absl::StrAppend(&flags, flags.empty() ? "" : " ", "--set ", s);
    absl::StrAppend(&out, "\nbest: ", flags, "\n");
    return out;
  }
  absl::StrAppend(&out, "\nbest: none (no layout is both feasible and priced by the profile)\n");
  return out;
}

}  // namespace zeroshard::cli
