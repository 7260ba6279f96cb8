#include "engine/step_time_model.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/comm_stats.h"
#include "engine/cost_profile.h"
#include "engine/pipeline_schedule.h"

namespace zeroshard {
namespace {

bool IsComputeKind(ActionKind k) {
  return k == ActionKind::kForward || k == ActionKind::kBackward || k == ActionKind::kBackwardInput ||
         k == ActionKind::kBackwardWeight || k == ActionKind::kRecompute;
}

// One unit's seconds per action kind, before scaling.
struct UnitSeconds {
  double forward = 0, fused = 0, input = 0, weight = 0, recompute = 0;
};

absl::StatusOr<std::vector<UnitSeconds>> UnitCosts(const std::vector<std::string>& names,
                                                   const CostProfile& profile) {
  std::vector<UnitSeconds> out;
  for (const std::string& name : names) {
    const UnitCost* c = FindUnitCost(profile, name);
    if (c == nullptr) {
      return absl::NotFoundError(absl::StrCat("cost profile ", profile.source(), " has no unit '", name,
                                              "'; profile a run of the same model"));
    }
    UnitSeconds s;
    s.forward = c->forward_seconds();
    s.recompute = c->recompute_seconds();
    if (c->split_measured()) {
      s.input = c->backward_input_seconds();
      s.weight = c->backward_weight_seconds();
      s.fused = s.input + s.weight;
    } else {
      s.fused = c->backward_input_seconds();
      s.input = s.weight = s.fused / 2;
    }
    out.push_back(s);
  }
  return out;
}

double ActionSeconds(const Action& a, const UnitSeconds& u) {
  switch (a.kind) {
    case ActionKind::kForward:
      return u.forward;
    case ActionKind::kBackward:
      return u.fused;
    case ActionKind::kBackwardInput:
      return u.input;
    case ActionKind::kBackwardWeight:
      return u.weight;
    case ActionKind::kRecompute:
      return u.recompute;
    default:
      return 0;
  }
}

// The links the walk prices groups with, and what it substituted.
class Links {
 public:
  Links(const CostProfile& profile, std::map<std::string, int> sizes) : profile_(profile), sizes_(std::move(sizes)) {}

  // Group g's link: the profile's fit for g, else its "dp" fit (noted);
  // null when it has neither.
  const LinkCost* Find(const std::string& group) {
    const LinkCost* link = FindLinkCost(profile_, group);
    if (link != nullptr) return link;
    link = FindLinkCost(profile_, "dp");
    if (link != nullptr) notes_.insert(absl::StrCat("group '", group, "' priced with the 'dp' link"));
    return link;
  }
  double Seconds(const IssuedCollective& c) {
    auto size = sizes_.find(c.group);
    const int n = size == sizes_.end() ? 1 : size->second;
    if (n <= 1) return 0;
    const LinkCost* link = Find(c.group);
    if (link == nullptr) {
      notes_.insert(absl::StrCat("group '", c.group, "' not priced (the profile fitted no link)"));
      return 0;
    }
    return CollectiveSeconds(CommOpName(c.op), c.bytes_per_rank, n, *link);
  }
  double Seconds(const std::vector<IssuedCollective>& issues) {
    double total = 0;
    for (const IssuedCollective& c : issues) total += Seconds(c);
    return total;
  }
  void Note(std::string note) { notes_.insert(std::move(note)); }
  std::vector<std::string> notes() const { return {notes_.begin(), notes_.end()}; }

 private:
  const CostProfile& profile_;
  std::map<std::string, int> sizes_;
  std::set<std::string> notes_;
};

// Elements UPDATE(bucket) steps: the master region of each trained unit.
std::vector<int64_t> BucketUpdateElements(const StepPlan& plan, const EngineOptions& options) {
  std::vector<int64_t> out;
  for (const GradBucket& b : plan.buckets) {
    int64_t n = 0;
    for (int u : b.units) {
      if (!plan.units[u].trainable) continue;
      n += options.zero.shards_master() ? plan.layouts[u].shard_numel() : plan.layouts[u].padded_numel();
    }
    out.push_back(n);
  }
  return out;
}

// A rank's compute lane and comm lane (a FIFO of collectives) in time.
// Work is seconds on a dedicated core; a lane runs at `alone` of that
// while the other idles and at `shared` while both run.
class TwoLanes {
 public:
  TwoLanes(double alone, double shared) : alone_(alone), shared_(shared) {}

  int Queue(double work) {
    items_.push_back({next_, work});
    return next_++;
  }
  void Compute(double work) {
    while (work > 0) {
      if (items_.empty()) {
        now_ += work / alone_;
        return;
      }
      Item& head = items_.front();
      if (work < head.work) {
        now_ += work / shared_;
        head.work -= work;
        return;
      }
      now_ += head.work / shared_;
      work -= head.work;
      Finish();
    }
  }
  // The compute lane blocked until `ticket` completes (< 0: all queued).
  void WaitFor(int ticket) {
    while (!items_.empty() && (ticket < 0 || done_.count(ticket) == 0)) {
      now_ += items_.front().work / alone_;
      Finish();
    }
  }
  // A collective the compute lane waits on from the start.
  void RunSynchronously(double work) {
    WaitFor(-1);
    now_ += work / alone_;
  }
  double now() const { return now_; }

 private:
  struct Item {
    int ticket;
    double work;
  };
  void Finish() {
    done_.insert(items_.front().ticket);
    items_.pop_front();
  }
  double alone_, shared_;
  double now_ = 0;
  int next_ = 0;
  std::deque<Item> items_;
  std::set<int> done_;
};

struct Walk {
  double step = 0, comm_busy = 0, computing = 0, updating = 0, waited = 0;
};

// The walk the header describes, from action `from` on.
Walk WalkProgram(const StepProgram& program, size_t from, const std::vector<UnitSeconds>& units, double scale,
                 const std::vector<int64_t>& update_elements, double seconds_per_element, Links& links,
                 const CoreShare& host) {
  Walk w;
  TwoLanes lanes(host.Rate(false), host.Rate(true));
  std::map<int, int> gather_ticket, reduce_ticket;
  auto queue = [&](const std::vector<IssuedCollective>& issues) {
    const double d = links.Seconds(issues);
    w.comm_busy += d;
    return lanes.Queue(d);
  };
  auto wait = [&](std::map<int, int>& tickets, int key) {
    auto it = tickets.find(key);
    if (it == tickets.end()) return;
    const double t0 = lanes.now();
    lanes.WaitFor(it->second);
    w.waited += lanes.now() - t0;
    tickets.erase(it);
  };
  auto synchronous = [&](const std::vector<IssuedCollective>& issues) {
    if (issues.empty()) return;
    const double t0 = lanes.now();
    const double d = links.Seconds(issues);
    w.comm_busy += d;
    lanes.RunSynchronously(d);
    w.waited += lanes.now() - t0;
  };
  for (size_t i = from; i < program.actions.size(); ++i) {
    const Action& a = program.actions[i];
    if (IsComputeKind(a.kind)) {
      const double d = ActionSeconds(a, units[a.unit]) * scale;
      lanes.Compute(d);
      w.computing += d;
      continue;
    }
    switch (a.kind) {
      case ActionKind::kGather:
        gather_ticket[a.unit] = queue(a.issues);
        break;
      case ActionKind::kWaitGather:
      case ActionKind::kRelease:
        wait(gather_ticket, a.unit);
        break;
      case ActionKind::kReduce:
        reduce_ticket[a.bucket] = queue(a.issues);
        break;
      case ActionKind::kWaitReduce:
        wait(reduce_ticket, a.bucket);
        break;
      case ActionKind::kPublish:
        queue(a.issues);
        break;
      case ActionKind::kUpdate: {
        const int64_t n = a.chunk >= 0 ? program.chunks[a.chunk].length
                                       : (a.bucket >= 0 && a.bucket < static_cast<int>(update_elements.size())
                                              ? update_elements[a.bucket]
                                              : 0);
        synchronous(a.issues);
        const double d = static_cast<double>(n) * seconds_per_element;
        lanes.Compute(d);
        w.updating += d;
        break;
      }
      case ActionKind::kLoad:
      case ActionKind::kWaitLoad:
      case ActionKind::kStore:
      case ActionKind::kWaitStore:
        links.Note("NVMe I/O not priced");
        break;
      default:
        synchronous(a.issues);
        break;
    }
  }
  const double t0 = lanes.now();
  lanes.WaitFor(-1);
  w.waited += lanes.now() - t0;
  w.step = lanes.now();
  return w;
}

}  // namespace

double ComputeScale(const CostProfile& profile, int64_t micro_batch_elements, int tp) {
  double scale = 1;
  if (micro_batch_elements > 0 && profile.micro_batch_elements() > 0) {
    scale = static_cast<double>(micro_batch_elements) / static_cast<double>(profile.micro_batch_elements());
  }
  const int profiled_tp = std::max(1, profile.tp());
  return scale * profiled_tp / std::max(1, tp);
}

absl::StatusOr<StepTimePrediction> PredictStepTime(const StepPlan& plan, const EngineOptions& options,
                                                   const std::map<std::string, int>& group_sizes,
                                                   double compute_scale, const CostProfile& profile,
                                                   const CoreShare& host) {
  absl::StatusOr<std::vector<UnitSeconds>> units = UnitCosts(plan.train.names.units, profile);
  if (!units.ok()) return units.status();
  Links links(profile, group_sizes);
  const Walk w = WalkProgram(plan.train, 0, *units, compute_scale, BucketUpdateElements(plan, options),
                             profile.optimizer_seconds_per_element(), links, host);
  StepTimePrediction p;
  p.step_seconds = w.step;
  p.compute_seconds = w.computing;
  p.optimizer_seconds = w.updating;
  p.comm_seconds = w.comm_busy;
  p.exposed_seconds = w.waited;
  p.notes = links.notes();
  return p;
}

absl::StatusOr<StepTimePrediction> PredictPipelineStepTime(const PipelinePlan& plan, const EngineOptions& options,
                                                           int dp, double compute_scale, const CostProfile& profile,
                                                           const CoreShare& host) {
  if (plan.stages.empty()) return absl::InvalidArgumentError("a pipeline plan without stages");
  const std::vector<std::string>& names = plan.stages[0].train.names.units;
  absl::StatusOr<std::vector<UnitSeconds>> units = UnitCosts(names, profile);
  if (!units.ok()) return units.status();
  const int chunks = plan.shape.chunks();
  std::vector<int> chunk_of(names.size(), 0);
  for (int c = 0; c < chunks; ++c) {
    for (int u = plan.chunk_begin[c]; u < plan.chunk_begin[c + 1]; ++u) chunk_of[u] = c;
  }
  // The schedule's stages compute alone (transfers run on the compute thread).
  const double chunk_scale = compute_scale / host.Rate(false);
  ChunkCosts costs;
  costs.forward.assign(chunks, 0);
  costs.backward_input.assign(chunks, 0);
  costs.backward_weight.assign(chunks, 0);
  for (size_t u = 0; u < names.size(); ++u) {
    costs.forward[chunk_of[u]] += (*units)[u].forward * chunk_scale;
    costs.backward_input[chunk_of[u]] += (*units)[u].input * chunk_scale;
    costs.backward_weight[chunk_of[u]] += (*units)[u].weight * chunk_scale;
  }
  std::map<std::string, int> sizes = {{"dp", dp}, {"pp", plan.shape.stages}, {"world", dp * plan.shape.stages}};
  if (!plan.tied_stages.empty()) sizes["embed"] = static_cast<int>(plan.tied_stages.size());
  Links links(profile, sizes);
  // Each boundary's activation bytes from the SEND_ACT that crosses it.
  std::vector<int64_t> boundary_bytes(std::max(0, chunks - 1), 0);
  for (const StepPlan& stage : plan.stages) {
    for (const Action& a : stage.train.actions) {
      if (a.kind != ActionKind::kSendAct || a.unit < 0) continue;
      const int c = chunk_of[a.unit];
      if (c + 1 >= chunks) continue;
      int64_t bytes = 0;
      for (const IssuedCollective& i : a.issues) bytes += i.bytes_per_rank;
      boundary_bytes[c] = std::max(boundary_bytes[c], bytes);
    }
  }
  const LinkCost* pp_link = links.Find("pp");
  for (int64_t bytes : boundary_bytes) {
    costs.transfer.push_back(pp_link == nullptr ? 0
                                                : TransferSeconds(bytes, pp_link->latency_seconds(),
                                                                  pp_link->bytes_per_second()));
  }
  if (pp_link == nullptr) links.Note("pipeline transfers not priced (the profile fitted no link)");
  absl::StatusOr<ScheduleTimeline> timeline = SimulatePipelineSchedule(plan.schedule, plan.shape, costs);
  if (!timeline.ok()) return timeline.status();

  StepTimePrediction p;
  p.bubble_fraction = timeline->overall_bubble;
  for (double busy : timeline->busy) p.compute_seconds = std::max(p.compute_seconds, busy);
  double slowest_tail = 0;
  for (const StepPlan& stage : plan.stages) {
    // The optimizer phase and any reduction after the stage's last backward.
    size_t from = 0;
    for (size_t i = 0; i < stage.train.actions.size(); ++i) {
      if (IsComputeKind(stage.train.actions[i].kind)) from = i + 1;
    }
    const Walk w = WalkProgram(stage.train, from, *units, compute_scale, BucketUpdateElements(stage, options),
                               profile.optimizer_seconds_per_element(), links, host);
    if (w.step > slowest_tail) {
      slowest_tail = w.step;
      p.optimizer_seconds = w.updating;
      p.comm_seconds = w.comm_busy;
    }
  }
  p.step_seconds = timeline->makespan + slowest_tail;
  p.exposed_seconds = p.step_seconds - p.compute_seconds - p.optimizer_seconds;
  p.notes = links.notes();
  return p;
}

}  // namespace zeroshard
