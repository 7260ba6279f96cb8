#include "engine/program_simulator.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

bool IsCompute(ActionKind k) {
  return k == ActionKind::kForward || k == ActionKind::kBackward || k == ActionKind::kBackwardInput ||
         k == ActionKind::kBackwardWeight || k == ActionKind::kRecompute;
}
bool IsBackward(ActionKind k) {
  return k == ActionKind::kBackward || k == ActionKind::kBackwardInput || k == ActionKind::kBackwardWeight;
}
bool IsSend(ActionKind k) { return k == ActionKind::kSendAct || k == ActionKind::kSendGrad; }
bool IsRecv(ActionKind k) { return k == ActionKind::kRecvAct || k == ActionKind::kRecvGrad; }
bool IsGrad(ActionKind k) { return k == ActionKind::kSendGrad || k == ActionKind::kRecvGrad; }
// Issued without waiting: a later action (or none) waits for them.
bool IsAsync(ActionKind k) { return k == ActionKind::kGather || k == ActionKind::kReduce || IsSend(k) || IsRecv(k); }
// Point-to-point: matched by the SEND/RECV rule, not in the group's order.
bool IsPointToPoint(CommOp op) { return op == CommOp::kSend || op == CommOp::kRecv; }

std::string NameOr(const std::vector<std::string>& names, int index) {
  if (index >= 0 && index < static_cast<int>(names.size()) && !names[index].empty()) return names[index];
  return absl::StrCat(index);
}

std::string Members(const std::vector<int>& members) { return absl::StrCat("ranks ", absl::StrJoin(members, ", ")); }

// One collective of a group, as its first member issued it.
struct Posted {
  int rank = 0;
  int action = 0;
  CommOp op = CommOp::kAllReduce;
  int64_t bytes = 0;
  int count = 0;  // members that issued it so far
};

struct Group {
  std::string name;
  std::vector<int> members;
  std::vector<Posted> seq;
};

struct Ticket {
  int group = 0;
  int index = 0;
};

// (sender, receiver, micro-batch, gradient) of a pipeline transfer.
using TransferKey = std::tuple<int, int, int, bool>;

struct Compute {
  bool forward = false;
  bool input = false;   // BACKWARD or BACKWARD_INPUT done
  bool weight = false;  // BACKWARD or BACKWARD_WEIGHT done
  bool recomputed = false;
  int forward_action = -1;
};

enum class Gather { kReleased, kInFlight, kGathered };

struct RankState {
  int pc = 0;
  int posted = 0;                       // issues of the current blocking action issued so far
  std::vector<Ticket> current;          // their tickets
  std::string waiting_for;              // why the rank is blocked, for the deadlock message
  std::map<std::string, int> group_of;  // group name -> index into groups_
  std::map<int, int> next_index;        // group index -> this rank's next collective in it
  int stage = -1;                       // position in "pp"; -1 without one
  std::vector<bool> computes;           // by unit
  std::vector<bool> has_backward;       // by unit: some backward of it in the program
  std::vector<bool> ever_gathered;      // by unit: some GATHER of it in the program
  std::vector<Gather> gather;
  std::vector<std::vector<Ticket>> gather_tickets;
  std::vector<int> gather_action;
  std::vector<bool> reducing;
  std::vector<std::vector<Ticket>> reduce_tickets;
  std::vector<int> reduce_action;
  std::vector<std::vector<int>> weight_count_at_reduce;  // by bucket, by unit
  std::vector<int> weight_count;                         // by unit
  std::vector<std::vector<Compute>> compute;             // [mb][unit]
  std::set<std::pair<int, int>> kept;                    // (mb, unit)
  RankPrediction prediction;
};

class Simulator {
 public:
  explicit Simulator(const std::vector<SimulatedRank>& ranks) : ranks_(ranks) {}

  absl::StatusOr<Simulation> Run() {
    RETURN_IF_ERROR(Init());
    bool progress = true;
    while (progress) {
      progress = false;
      for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
        while (state_[r].pc < static_cast<int>(ranks_[r].program.actions.size())) {
          posted_ = false;
          ASSIGN_OR_RETURN(bool moved, Step(r));
          // A blocked action that issued its next collective moved too: the
          // other members may now complete it.
          if (posted_) progress = true;
          if (!moved) break;
          progress = true;
        }
      }
    }
    RETURN_IF_ERROR(CheckDeadlock());
    Simulation sim;
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      RETURN_IF_ERROR(CheckEnd(r));
      std::map<std::string, int> sizes;
      for (const auto& [name, members] : ranks_[r].groups) sizes[name] = static_cast<int>(members.size());
      RankPrediction& p = state_[r].prediction;
      p.collectives = CountCollectives(ranks_[r].program, sizes);
      sim.ranks.push_back(std::move(p));
    }
    return sim;
  }

 private:
  std::string At(int r, int index) const {
    const StepProgram& program = ranks_[r].program;
    return absl::StrCat("rank ", r, " action ", index, " (", FormatAction(program, program.actions[index]), ")");
  }
  absl::Status Violation(int r, const std::string& rule) const {
    return absl::FailedPreconditionError(absl::StrCat(At(r, state_[r].pc), ": ", rule));
  }
  absl::Status Malformed(int r, int index, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(At(r, index), ": ", what));
  }
  std::string UnitName(int r, int u) const { return NameOr(ranks_[r].program.names.units, u); }
  std::string BucketName(int r, int b) const { return NameOr(ranks_[r].program.names.buckets, b); }

  absl::Status Init() {
    const int n = static_cast<int>(ranks_.size());
    for (int r = 0; r < n; ++r) {
      for (const auto& [name, members] : ranks_[r].groups) {
        std::set<int> distinct(members.begin(), members.end());
        if (distinct.size() != members.size() || !distinct.count(r) || *distinct.begin() < 0 ||
            *distinct.rbegin() >= n) {
          return absl::InvalidArgumentError(absl::StrCat("rank ", r, " lists group ", name, " as ", Members(members),
                                                         ", expected distinct ranks in [0, ", n, ") including ", r));
        }
        for (int m : members) {
          auto other = ranks_[m].groups.find(name);
          if (other == ranks_[m].groups.end() || other->second != members) {
            return absl::InvalidArgumentError(absl::StrCat(
                "rank ", r, " lists group ", name, " as ", Members(members), " but rank ", m,
                other == ranks_[m].groups.end() ? " has no such group" : " lists it as " + Members(other->second)));
          }
        }
      }
    }
    state_.resize(n);
    std::map<std::pair<std::string, std::vector<int>>, int> ids;
    for (int r = 0; r < n; ++r) {
      RankState& s = state_[r];
      for (const auto& [name, members] : ranks_[r].groups) {
        auto [it, added] = ids.emplace(std::make_pair(name, members), static_cast<int>(groups_.size()));
        if (added) groups_.push_back(Group{name, members, {}});
        s.group_of[name] = it->second;
      }
      auto pp = ranks_[r].groups.find("pp");
      if (pp != ranks_[r].groups.end()) {
        s.stage = static_cast<int>(std::find(pp->second.begin(), pp->second.end(), r) - pp->second.begin());
      }
      RETURN_IF_ERROR(InitRank(r));
    }
    return absl::OkStatus();
  }

  absl::Status InitRank(int r) {
    const StepProgram& p = ranks_[r].program;
    RankState& s = state_[r];
    const int units = std::max(0, p.num_units);
    const int buckets = std::max(0, p.num_buckets);
    const int mbs = std::max(0, p.micro_batches);
    s.computes.assign(units, ranks_[r].units.empty());
    for (int u : ranks_[r].units) {
      if (u < 0 || u >= units) {
        return absl::InvalidArgumentError(
            absl::StrCat("rank ", r, " computes unit ", u, ", expected in [0, ", units, ")"));
      }
      s.computes[u] = true;
    }
    for (int b = 0; b < static_cast<int>(p.bucket_writers.size()); ++b) {
      for (int u : p.bucket_writers[b]) {
        if (b >= buckets || u < 0 || u >= units) {
          return absl::InvalidArgumentError(absl::StrCat("rank ", r, " bucket_writers[", b, "] lists unit ", u,
                                                         ", expected a bucket in [0, ", buckets, ") and units in [0, ",
                                                         units, ")"));
        }
      }
    }
    s.has_backward.assign(units, false);
    s.ever_gathered.assign(units, false);
    s.gather.assign(units, Gather::kReleased);
    s.gather_tickets.assign(units, {});
    s.gather_action.assign(units, -1);
    s.reducing.assign(buckets, false);
    s.reduce_tickets.assign(buckets, {});
    s.reduce_action.assign(buckets, -1);
    s.weight_count.assign(units, 0);
    s.weight_count_at_reduce.assign(buckets, std::vector<int>(units, 0));
    s.compute.assign(mbs, std::vector<Compute>(units));
    for (int i = 0; i < static_cast<int>(p.actions.size()); ++i) {
      const Action& a = p.actions[i];
      const bool uses_unit = IsCompute(a.kind) || a.kind == ActionKind::kGather || a.kind == ActionKind::kWaitGather ||
                             a.kind == ActionKind::kRelease;
      const bool uses_mb = IsCompute(a.kind) || IsSend(a.kind) || IsRecv(a.kind);
      const bool uses_bucket = a.kind == ActionKind::kReduce || a.kind == ActionKind::kWaitReduce;
      if (uses_unit && (a.unit < 0 || a.unit >= units)) {
        return Malformed(r, i, absl::StrCat("unit ", a.unit, ", expected in [0, ", units, ")"));
      }
      if (uses_mb && (a.micro_batch < 0 || a.micro_batch >= mbs)) {
        return Malformed(r, i, absl::StrCat("micro-batch ", a.micro_batch, ", expected in [0, ", mbs, ")"));
      }
      if (uses_bucket && (a.bucket < 0 || a.bucket >= buckets)) {
        return Malformed(r, i, absl::StrCat("bucket ", a.bucket, ", expected in [0, ", buckets, ")"));
      }
      if (IsSend(a.kind) || IsRecv(a.kind)) {
        auto pp = ranks_[r].groups.find("pp");
        if (pp == ranks_[r].groups.end()) return Malformed(r, i, "a transfer on a rank without a pp group");
        const int stages = static_cast<int>(pp->second.size());
        if (a.peer_stage < 0 || a.peer_stage >= stages || a.peer_stage == s.stage) {
          return Malformed(r, i,
                           absl::StrCat("peer stage ", a.peer_stage, ", expected in [0, ", stages,
                                        ") other than this rank's stage ", s.stage));
        }
      }
      for (const IssuedCollective& c : a.issues) {
        if (!s.group_of.count(c.group)) {
          std::vector<std::string> names;
          for (const auto& g : ranks_[r].groups) names.push_back(g.first);
          return Malformed(r, i,
                           absl::StrCat("issues on group '", c.group, "', which rank ", r,
                                        " is not in (its groups: ", absl::StrJoin(names, ", "), ")"));
        }
      }
      if (IsBackward(a.kind)) s.has_backward[a.unit] = true;
      if (a.kind == ActionKind::kGather) s.ever_gathered[a.unit] = true;
    }
    return absl::OkStatus();
  }

  // Issues one collective of rank r's current action.
  absl::StatusOr<Ticket> Post(int r, const IssuedCollective& c) {
    RankState& s = state_[r];
    const int id = s.group_of.at(c.group);
    Group& g = groups_[id];
    const int index = s.next_index[id]++;
    posted_ = true;
    if (index < static_cast<int>(g.seq.size())) {
      Posted& first = g.seq[index];
      if (first.op != c.op || first.bytes != c.bytes_per_rank) {
        return Violation(
            r, absl::StrCat(CommOpName(c.op), " of ", c.bytes_per_rank, " bytes is collective ", index, " of group ",
                            g.name, " (", Members(g.members), "), but ", At(first.rank, first.action), " issued ",
                            CommOpName(first.op), " of ", first.bytes,
                            " bytes there; a group's collectives must match in order, "
                            "op and bytes on every member"));
      }
      ++first.count;
    } else {
      g.seq.push_back(Posted{r, s.pc, c.op, c.bytes_per_rank, 1});
    }
    return Ticket{id, index};
  }

  // Whether every ticket's collective is complete; else why not.
  bool Complete(const std::vector<Ticket>& tickets, std::string* why) const {
    for (const Ticket& t : tickets) {
      const Group& g = groups_[t.group];
      const Posted& p = g.seq[t.index];
      if (p.count == static_cast<int>(g.members.size())) continue;
      std::vector<int> missing;
      for (int m : g.members) {
        auto next = state_[m].next_index.find(t.group);
        if (next == state_[m].next_index.end() || next->second <= t.index) missing.push_back(m);
      }
      *why = absl::StrCat(CommOpName(p.op), " ", t.index, " of group ", g.name, " (", Members(g.members),
                          "), not yet issued by rank ", absl::StrJoin(missing, ", rank "));
      return false;
    }
    return true;
  }

  absl::Status CheckParams(int r, const Action& a) const {
    const RankState& s = state_[r];
    if (!ranks_[r].gathers_params || !s.ever_gathered[a.unit] || s.gather[a.unit] == Gather::kGathered) {
      return absl::OkStatus();
    }
    if (s.gather[a.unit] == Gather::kInFlight) {
      return Violation(r, "the unit's GATHER is not waited (WAIT_GATHER before it computes)");
    }
    return Violation(r, "the unit's parameters are not gathered (GATHER and WAIT_GATHER before it computes)");
  }

  // Rules of compute actions that depend only on the rank's own past.
  absl::Status CheckCompute(int r, const Action& a) const {
    const RankState& s = state_[r];
    const int m = a.micro_batch, u = a.unit;
    if (!s.computes[u]) return Violation(r, "this rank does not compute the unit");
    const Compute& c = s.compute[m][u];
    const int units = static_cast<int>(s.computes.size());
    auto mb_unit = [&](int unit) { return absl::StrCat("mb=", m, " unit=", UnitName(r, unit)); };
    switch (a.kind) {
      case ActionKind::kForward:
        if (c.forward) return Violation(r, "a second FORWARD of the same micro-batch and unit");
        if (u > 0 && s.computes[u - 1] && !s.compute[m][u - 1].forward) {
          return Violation(r, absl::StrCat("FORWARD before the FORWARD of ", mb_unit(u - 1), " below it"));
        }
        break;
      case ActionKind::kRecompute:
        if (!c.forward) return Violation(r, "RECOMPUTE before the unit's FORWARD");
        if (c.input) return Violation(r, "RECOMPUTE after the unit's backward");
        if (c.recomputed) return Violation(r, "a second RECOMPUTE of the same micro-batch and unit");
        break;
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
        if (!c.forward) return Violation(r, absl::StrCat(ActionKindName(a.kind), " before the unit's FORWARD"));
        if (c.input) return Violation(r, "a second backward of the same micro-batch and unit");
        if (u + 1 < units && s.computes[u + 1] && s.has_backward[u + 1] && !s.compute[m][u + 1].input) {
          return Violation(
              r, absl::StrCat(ActionKindName(a.kind), " before the backward of ", mb_unit(u + 1), " above it"));
        }
        break;
      case ActionKind::kBackwardWeight:
        if (!c.input) return Violation(r, "BACKWARD_WEIGHT before the unit's BACKWARD_INPUT");
        if (c.weight) return Violation(r, "a second BACKWARD_WEIGHT of the same micro-batch and unit");
        break;
      default:
        break;
    }
    return CheckParams(r, a);
  }

  // Runs rank r's current action if nothing it waits for is missing:
  // true when it ran, false when it is blocked (waiting_for says why).
  absl::StatusOr<bool> Step(int r) {
    RankState& s = state_[r];
    const StepProgram& program = ranks_[r].program;
    const Action& a = program.actions[s.pc];
    std::vector<Ticket> waits;
    bool transfer_ready = true;
    TransferKey key;
    if (IsCompute(a.kind)) RETURN_IF_ERROR(CheckCompute(r, a));
    switch (a.kind) {
      case ActionKind::kGather:
        if (s.gather[a.unit] != Gather::kReleased)
          return Violation(r, "GATHER of a unit already gathered or in flight");
        break;
      case ActionKind::kWaitGather:
        if (s.gather[a.unit] != Gather::kInFlight)
          return Violation(r, "WAIT_GATHER of a unit with no GATHER in flight");
        waits = s.gather_tickets[a.unit];
        break;
      case ActionKind::kRelease:
        if (s.gather[a.unit] == Gather::kReleased) return Violation(r, "RELEASE of a unit that is not gathered");
        if (s.gather[a.unit] == Gather::kInFlight) waits = s.gather_tickets[a.unit];
        break;
      case ActionKind::kReduce:
        if (s.reducing[a.bucket]) return Violation(r, "REDUCE of a bucket still in flight (WAIT_REDUCE first)");
        if (a.bucket < static_cast<int>(program.bucket_writers.size())) {
          for (int w : program.bucket_writers[a.bucket]) {
            if (s.computes[w] && s.weight_count[w] <= s.weight_count_at_reduce[a.bucket][w]) {
              return Violation(r, absl::StrCat("REDUCE before a backward of unit ", UnitName(r, w),
                                               ", which adds to the bucket's gradients"));
            }
          }
        }
        break;
      case ActionKind::kWaitReduce:
        if (!s.reducing[a.bucket]) return Violation(r, "WAIT_REDUCE of a bucket with no REDUCE in flight");
        waits = s.reduce_tickets[a.bucket];
        break;
      case ActionKind::kOptimizer:
        for (int b = 0; b < static_cast<int>(s.reducing.size()); ++b) {
          if (s.reducing[b]) {
            return Violation(r, absl::StrCat("OPTIMIZER before the WAIT_REDUCE of bucket ", BucketName(r, b)));
          }
        }
        break;
      case ActionKind::kRecvAct:
      case ActionKind::kRecvGrad: {
        const int sender = ranks_[r].groups.at("pp")[a.peer_stage];
        key = TransferKey{sender, r, a.micro_batch, IsGrad(a.kind)};
        if (sent_[key] <= received_[key]) {
          transfer_ready = false;
          s.waiting_for = absl::StrCat(IsGrad(a.kind) ? "SEND_GRAD" : "SEND_ACT", " mb=", a.micro_batch, " from stage ",
                                       a.peer_stage, " (rank ", sender, ")");
        }
        break;
      }
      default:
        break;
    }
    if (!transfer_ready || !Complete(waits, &s.waiting_for)) return false;

    // The action's own collectives: issued at once by asynchronous actions,
    // one after another (each waited) by the others.
    std::vector<Ticket> issued;
    if (IsAsync(a.kind)) {
      for (const IssuedCollective& c : a.issues) {
        if (IsPointToPoint(c.op)) continue;
        ASSIGN_OR_RETURN(Ticket t, Post(r, c));
        issued.push_back(t);
      }
    } else {
      while (true) {
        if (!Complete(s.current, &s.waiting_for)) return false;
        if (s.posted == static_cast<int>(a.issues.size())) break;
        const IssuedCollective& c = a.issues[s.posted++];
        if (IsPointToPoint(c.op)) continue;
        ASSIGN_OR_RETURN(Ticket t, Post(r, c));
        s.current.push_back(t);
      }
    }
    Apply(r, a, std::move(issued), key);
    s.posted = 0;
    s.current.clear();
    s.waiting_for.clear();
    RankPrediction& p = s.prediction;
    ++p.actions;
    ++p.actions_by_kind[a.kind];
    int live = 0;
    for (Gather g : s.gather) live += g == Gather::kReleased ? 0 : 1;
    p.peak_gathered_units = std::max(p.peak_gathered_units, live);
    p.peak_kept_activations = std::max(p.peak_kept_activations, static_cast<int>(s.kept.size()));
    ++s.pc;
    return true;
  }

  void Apply(int r, const Action& a, std::vector<Ticket> issued, const TransferKey& key) {
    RankState& s = state_[r];
    const int m = a.micro_batch, u = a.unit;
    switch (a.kind) {
      case ActionKind::kForward:
        s.compute[m][u].forward = true;
        s.compute[m][u].forward_action = s.pc;
        // A unit never backpropagated (frozen, or an evaluation) keeps nothing.
        if (s.has_backward[u]) s.kept.insert({m, u});
        break;
      case ActionKind::kRecompute:
        s.compute[m][u].recomputed = true;
        break;
      case ActionKind::kBackward:
      case ActionKind::kBackwardWeight:
        s.compute[m][u].input = true;
        s.compute[m][u].weight = true;
        ++s.weight_count[u];
        s.kept.erase({m, u});
        break;
      case ActionKind::kBackwardInput:
        s.compute[m][u].input = true;
        break;
      case ActionKind::kGather:
        s.gather[u] = Gather::kInFlight;
        s.gather_tickets[u] = std::move(issued);
        s.gather_action[u] = s.pc;
        break;
      case ActionKind::kWaitGather:
        s.gather[u] = Gather::kGathered;
        break;
      case ActionKind::kRelease:
        s.gather[u] = Gather::kReleased;
        break;
      case ActionKind::kReduce:
        s.reducing[a.bucket] = true;
        s.reduce_tickets[a.bucket] = std::move(issued);
        s.reduce_action[a.bucket] = s.pc;
        s.weight_count_at_reduce[a.bucket] = s.weight_count;
        break;
      case ActionKind::kWaitReduce:
        s.reducing[a.bucket] = false;
        break;
      case ActionKind::kSendAct:
      case ActionKind::kSendGrad: {
        const int receiver = ranks_[r].groups.at("pp")[a.peer_stage];
        const TransferKey sent{r, receiver, m, IsGrad(a.kind)};
        ++sent_[sent];
        pending_sends_[sent].push_back({r, s.pc});
        break;
      }
      case ActionKind::kRecvAct:
      case ActionKind::kRecvGrad:
        ++received_[key];
        pending_sends_[key].erase(pending_sends_[key].begin());
        break;
      default:
        break;
    }
  }

  absl::Status CheckDeadlock() const {
    std::vector<std::string> stuck, finished;
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      const RankState& s = state_[r];
      if (s.pc < static_cast<int>(ranks_[r].program.actions.size())) {
        stuck.push_back(absl::StrCat(At(r, s.pc), " waits for ", s.waiting_for));
      } else {
        finished.push_back(absl::StrCat("rank ", r));
      }
    }
    if (stuck.empty()) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("deadlock: ", absl::StrJoin(stuck, "; "),
                     finished.empty() ? std::string() : absl::StrCat("; finished: ", absl::StrJoin(finished, ", "))));
  }

  // What a finished rank must not leave behind.
  absl::Status CheckEnd(int r) const {
    const RankState& s = state_[r];
    auto left = [&](int index, absl::string_view rule) {
      return absl::FailedPreconditionError(absl::StrCat(At(r, index), ": ", rule));
    };
    for (int b = 0; b < static_cast<int>(s.reducing.size()); ++b) {
      if (s.reducing[b]) return left(s.reduce_action[b], "the REDUCE is never waited (WAIT_REDUCE)");
    }
    for (int u = 0; u < static_cast<int>(s.gather.size()); ++u) {
      if (s.gather[u] != Gather::kReleased) {
        return left(s.gather_action[u], "the unit is still gathered at the end of the program (RELEASE)");
      }
    }
    if (!s.kept.empty()) {
      const auto [m, u] = *s.kept.begin();
      return left(s.compute[m][u].forward_action, "its activations are never freed (no backward)");
    }
    for (const auto& [key, sends] : pending_sends_) {
      if (std::get<0>(key) == r && !sends.empty()) {
        return left(sends.front().second, absl::StrCat("never received by rank ", std::get<1>(key)));
      }
    }
    return absl::OkStatus();
  }

  const std::vector<SimulatedRank>& ranks_;
  std::vector<RankState> state_;
  std::vector<Group> groups_;
  std::map<TransferKey, int> sent_;
  std::map<TransferKey, int> received_;
  std::map<TransferKey, std::vector<std::pair<int, int>>> pending_sends_;  // (rank, action), oldest first
  bool posted_ = false;  // the current Step issued a collective
};

}  // namespace

absl::StatusOr<Simulation> SimulatePrograms(const std::vector<SimulatedRank>& ranks) {
  Simulator simulator(ranks);
  return simulator.Run();
}

}  // namespace zeroshard
