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

// (sender, receiver, micro-batch, gradient, chunk boundary) of a pipeline
// transfer; the boundary is the first unit after it.
using TransferKey = std::tuple<int, int, int, bool, int>;

// The chunk boundary a transfer crosses: SEND_ACT of u and RECV_GRAD of u
// sit below u + 1, RECV_ACT and SEND_GRAD of u above u.
int Boundary(const Action& a) {
  return a.kind == ActionKind::kSendAct || a.kind == ActionKind::kRecvGrad ? a.unit + 1 : a.unit;
}

// A posted RECV_* waiting for its consumer.
struct PostedRecv {
  int action = 0;
  TransferKey key;
};

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
  std::vector<int> last_reduce;                          // by bucket: its last REDUCE's action, -1 if none
  std::vector<bool> reduced_for_good;                    // by bucket: its last REDUCE ran
  // The optimizer phase, by bucket: NORM_PARTIAL, UPDATE and PUBLISH ran.
  std::vector<bool> norm_partial, updated, published;
  bool norm_reduced = false;
  // Which of them the program has at all (a hand-written program may leave
  // some out; those present keep their order).
  std::vector<bool> has_norm_partial, has_publish;
  bool has_reduce_norm = false;
  // By bucket: its chunks (StepProgram::chunks) not yet UPDATEd; a bucket
  // with chunks counts as updated after its last one.
  std::vector<int> chunks_left;
  std::vector<std::vector<int>> buckets_written;         // by unit: the buckets it writes
  // RECV_* posted and not yet consumed, by (mb, unit, gradient).
  std::map<std::tuple<int, int, bool>, PostedRecv> posted_recvs;
  // A consumer blocked on a transfer: the SEND it waits for.
  int blocked_sender = -1;
  Action awaited_send;
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
    s.last_reduce.assign(buckets, -1);
    s.reduced_for_good.assign(buckets, false);
    s.norm_partial.assign(buckets, false);
    s.updated.assign(buckets, false);
    s.published.assign(buckets, false);
    s.has_norm_partial.assign(buckets, false);
    s.has_publish.assign(buckets, false);
    s.buckets_written.assign(units, {});
    for (int b = 0; b < static_cast<int>(p.bucket_writers.size()); ++b) {
      for (int u : p.bucket_writers[b]) s.buckets_written[u].push_back(b);
    }
    for (int i = 0; i < static_cast<int>(p.actions.size()); ++i) {
      const Action& a = p.actions[i];
      const bool uses_unit = IsCompute(a.kind) || a.kind == ActionKind::kGather || a.kind == ActionKind::kWaitGather ||
                             a.kind == ActionKind::kRelease || a.kind == ActionKind::kTiedReduce ||
                             a.kind == ActionKind::kTiedPublish;
      const bool uses_mb = IsCompute(a.kind) || IsSend(a.kind) || IsRecv(a.kind);
      const bool uses_bucket = a.kind == ActionKind::kReduce || a.kind == ActionKind::kWaitReduce ||
                               a.kind == ActionKind::kNormPartial || a.kind == ActionKind::kUpdate ||
                               a.kind == ActionKind::kPublish;
      if (a.kind == ActionKind::kBeginStep && i != 0) {
        return Malformed(r, i, "BEGIN_STEP after the program's first action");
      }
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
        if (Boundary(a) < 1 || Boundary(a) >= units) {
          return Malformed(
              r, i,
              absl::StrCat("unit ", a.unit, ": the transfer crosses no boundary between units (the ",
                           ActionKindName(a.kind), " of a unit in [",
                           a.kind == ActionKind::kSendAct || a.kind == ActionKind::kRecvGrad ? 0 : 1, ", ",
                           a.kind == ActionKind::kSendAct || a.kind == ActionKind::kRecvGrad ? units - 1 : units,
                           ") expected)"));
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
      if (a.kind == ActionKind::kReduce) s.last_reduce[a.bucket] = i;
      if (a.kind == ActionKind::kNormPartial) s.has_norm_partial[a.bucket] = true;
      if (a.kind == ActionKind::kPublish) s.has_publish[a.bucket] = true;
      if (a.kind == ActionKind::kReduceNorm) s.has_reduce_norm = true;
    }
    s.chunks_left.assign(buckets, 0);
    for (const OffloadChunk& c : p.chunks) {
      if (c.bucket >= 0 && c.bucket < buckets) ++s.chunks_left[c.bucket];
    }
    RETURN_IF_ERROR(CheckOffloadIo(r));
    return CheckParamShardIo(r);
  }

  // The parameter shards' I/O (engine.offload.params: NVME), per rank in
  // program order with the program run twice (cyclic): a param slot is
  // LOADed only when no LOAD is in flight into it, the GATHER that read it
  // is waited (WAIT_GATHER or RELEASE) and its STORE is waited; WAIT_LOAD
  // waits the slot's LOAD of that unit; a GATHER (when the program streams
  // shards) follows WAIT_LOAD of the unit into a slot still holding it; a
  // STORE writes a slot holding the unit loaded; a streamed UPDATE(chunk)
  // of a unit the program stores finds its shard in a slot; no LOAD of a
  // unit falls between the first UPDATE / PUBLISH after the LOAD whose
  // slot its STORE writes back and that STORE (it would read the shard
  // before the update), so the next step's loads see the stored shard;
  // each stored unit is stored once a step.
  absl::Status CheckParamShardIo(int r) const {
    const StepProgram& p = ranks_[r].program;
    const int K = p.param_slots, units = p.num_units, n = static_cast<int>(p.actions.size());
    auto bad = [&](int i, const std::string& rule) {
      return absl::FailedPreconditionError(absl::StrCat(At(r, i), ": ", rule));
    };
    bool any = false;
    for (const Action& a : p.actions) any |= a.param_slot >= 0;
    if (!any && K == 0) return absl::OkStatus();
    // Per STORE: the LOAD whose slot contents it writes (same pass).
    std::vector<int> stored_times(units, 0);
    std::vector<bool> stored(units, false);
    for (int i = 0; i < n; ++i) {
      const Action& a = p.actions[i];
      if (a.param_slot < 0) continue;
      if (a.param_slot >= K || a.unit < 0 || a.unit >= units || a.chunk >= 0) {
        return Malformed(r, i, absl::StrCat("param_slot ", a.param_slot, " of unit ", a.unit, ", expected a slot in [0, ",
                                            K, ") of a unit in [0, ", units, ") and no chunk"));
      }
      if (a.kind == ActionKind::kStore) stored[a.unit] = true;
    }
    struct Slot {
      int unit = -1;
      bool loading = false, loaded = false, storing = false;
      int gather_unit = -1;  // a GATHER read it and is not waited yet
      int load_action = -1;
    };
    std::vector<Slot> slot(K);
    std::vector<int> gather_slot(units, -1);
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<int> times(units, 0);
      // By unit: LOADs of this pass, to check them against each STORE.
      std::vector<std::vector<int>> loads(units);
      for (int i = 0; i < n; ++i) {
        const Action& a = p.actions[i];
        const bool io = a.param_slot >= 0;
        if (!io && a.kind == ActionKind::kGather && K > 0) {
          int s = -1;
          for (int k = 0; k < K; ++k) {
            if (slot[k].unit == a.unit && slot[k].loaded) s = k;
          }
          if (s < 0) {
            return bad(i, absl::StrCat("GATHER of unit ", UnitName(r, a.unit),
                                       ", whose shard is not in a param slot (WAIT_LOAD first)"));
          }
          slot[s].gather_unit = a.unit;
          gather_slot[a.unit] = s;
          continue;
        }
        if (!io && (a.kind == ActionKind::kWaitGather || a.kind == ActionKind::kRelease) && a.unit >= 0 &&
            a.unit < units && gather_slot[a.unit] >= 0) {
          if (slot[gather_slot[a.unit]].gather_unit == a.unit) slot[gather_slot[a.unit]].gather_unit = -1;
          gather_slot[a.unit] = -1;
          continue;
        }
        if (!io && a.kind == ActionKind::kUpdate && a.chunk >= 0 && a.chunk < static_cast<int>(p.chunks.size())) {
          const int u = p.chunks[a.chunk].unit;
          bool held = false;
          for (const Slot& k : slot) held |= k.unit == u && k.loaded;
          if (u >= 0 && u < units && stored[u] && !held) {
            return bad(i, absl::StrCat("UPDATE of chunk ", a.chunk, " rounds into unit ", UnitName(r, u),
                                       "'s shard, which is not in a param slot (WAIT_LOAD first)"));
          }
          continue;
        }
        if (!io) continue;
        Slot& k = slot[a.param_slot];
        const std::string name = UnitName(r, a.unit);
        const std::string where = absl::StrCat("param slot ", a.param_slot);
        switch (a.kind) {
          case ActionKind::kLoad:
            if (k.loading) return bad(i, absl::StrCat("LOAD into ", where, " while its LOAD of unit ",
                                                      UnitName(r, k.unit), " is in flight"));
            if (k.gather_unit >= 0) {
              return bad(i, absl::StrCat("LOAD into ", where, " while the GATHER of unit ", UnitName(r, k.gather_unit),
                                         " reading it is not waited (WAIT_GATHER first)"));
            }
            if (k.storing) {
              return bad(i, absl::StrCat("LOAD into ", where, " while the STORE of unit ", UnitName(r, k.unit),
                                         " from it is not waited (WAIT_STORE first)"));
            }
            k = Slot();
            k.unit = a.unit;
            k.loading = true;
            k.load_action = i;
            loads[a.unit].push_back(i);
            break;
          case ActionKind::kWaitLoad:
            if (!k.loading || k.unit != a.unit) {
              return bad(i, absl::StrCat("WAIT_LOAD of unit ", name, " with no LOAD of it in flight into ", where));
            }
            k.loading = false;
            k.loaded = true;
            break;
          case ActionKind::kStore: {
            if (k.unit != a.unit || !k.loaded) {
              return bad(i, absl::StrCat("STORE of unit ", name, " from ", where,
                                         ", which does not hold it loaded (WAIT_LOAD first)"));
            }
            // A LOAD of the unit between the first UPDATE / PUBLISH after
            // the load this STORE writes back and the STORE reads the shard
            // before the update is on disk.
            int rounded = k.load_action;
            while (rounded < i && p.actions[rounded].kind != ActionKind::kUpdate &&
                   p.actions[rounded].kind != ActionKind::kPublish) {
              ++rounded;
            }
            for (int l : loads[a.unit]) {
              if (l > rounded && l < i) {
                return bad(l, absl::StrCat("LOAD of unit ", name, " reads its shard before the update is stored (",
                                           "STORE at action ", i, ")"));
              }
            }
            k.storing = true;
            ++times[a.unit];
            break;
          }
          case ActionKind::kWaitStore:
            if (k.storing && k.unit == a.unit) {
              k.storing = false;
            } else if (pass == 1 || k.storing) {
              return bad(i, absl::StrCat("WAIT_STORE of unit ", name, " with no STORE of it in flight from ", where));
            }
            break;
          default:
            return Malformed(r, i, "param_slot on an action other than LOAD, WAIT_LOAD, STORE, WAIT_STORE");
        }
      }
      for (int u = 0; u < units; ++u) {
        if (stored[u] && times[u] != 1) {
          return absl::FailedPreconditionError(absl::StrCat("rank ", r, ": unit ", UnitName(r, u), "'s shard is STOREd ",
                                                            times[u], " times in a step, expected once"));
        }
      }
    }
    return absl::OkStatus();
  }

  // The NVMe tier's streaming, per rank in program order with the program
  // run twice (it is cyclic: the last stores of one step drain into the
  // next): a slot is LOADed only once its previous chunk is stored; a LOAD
  // while that STORE is in flight is queued behind it (OffloadStore), and
  // the store counts as complete at the WAIT_LOAD of the chunk loaded (or
  // its own WAIT_STORE); WAIT_LOAD waits a LOAD in flight; UPDATE(chunk)
  // follows WAIT_LOAD(chunk) and finds the slot's previous STORE complete
  // (the update writes the slot the store still reads); STORE(chunk)
  // follows its UPDATE; WAIT_STORE waits a STORE in flight (on the first
  // run also none: the step before the first has no stores); every chunk
  // is loaded, updated and stored once a step. With streamed gradient
  // shards a chunk reads its piece at its LOAD when that is in the optimizer
  // phase, else at its WAIT_LOAD; that read must be in the phase (every
  // reduction stored) and after its unit's TIED_REDUCE (the summed shard
  // stored again).
  absl::Status CheckOffloadIo(int r) const {
    const StepProgram& p = ranks_[r].program;
    const int C = static_cast<int>(p.chunks.size()), K = p.offload_slots;
    auto bad = [&](int i, const std::string& rule) {
      return absl::FailedPreconditionError(absl::StrCat(At(r, i), ": ", rule));
    };
    enum class Io { kNone, kLoading, kLoaded, kUpdated, kStoring };
    std::vector<Io> chunk(C, Io::kNone);
    std::vector<int> occupant(std::max(K, 0), -1);
    // By slot: the chunk whose STORE from it a LOAD was queued behind and
    // that has not completed yet; -1 when none.
    std::vector<int> queued_behind(std::max(K, 0), -1);
    std::vector<bool> has_tie(p.num_units, false);
    for (const Action& a : p.actions) {
      if (a.kind == ActionKind::kTiedReduce && a.unit >= 0 && a.unit < p.num_units) has_tie[a.unit] = true;
    }
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<int> loads(C, 0), updates(C, 0), stores(C, 0);
      bool in_phase = false;
      std::vector<bool> tied(p.num_units, false);
      std::vector<bool> grads_read(C, false);
      // The read of chunk c's gradient piece at action i.
      auto read_grads = [&](int i, int c) -> absl::Status {
        grads_read[c] = true;
        if (!in_phase) {
          return bad(i, absl::StrCat(ActionKindName(p.actions[i].kind),
                                     " reads the chunk's gradient piece before the optimizer phase (its reduction may "
                                     "not be stored yet)"));
        }
        const int u = p.chunks[c].unit;
        if (u >= 0 && u < p.num_units && has_tie[u] && !tied[u]) {
          return bad(i, absl::StrCat(ActionKindName(p.actions[i].kind),
                                     " reads the chunk's gradient piece before the TIED_REDUCE of unit ", UnitName(r, u),
                                     " (the summed shard is not stored yet)"));
        }
        return absl::OkStatus();
      };
      for (int i = 0; i < static_cast<int>(p.actions.size()); ++i) {
        const Action& a = p.actions[i];
        if (IsOptimizerPhase(a.kind)) in_phase = true;
        if (a.kind == ActionKind::kTiedReduce && a.unit >= 0 && a.unit < p.num_units) tied[a.unit] = true;
        const bool streamed_update = a.kind == ActionKind::kUpdate && a.chunk >= 0;
        if (!IsOffloadIo(a.kind) && !streamed_update) continue;
        if (a.param_slot >= 0) continue;  // a parameter shard's: CheckParamShardIo
        const int c = a.chunk;
        if (c < 0 || c >= C) return Malformed(r, i, absl::StrCat("chunk ", c, ", expected in [0, ", C, ")"));
        const int slot = p.chunks[c].slot;
        if (slot < 0 || slot >= K || a.slot != slot) {
          return Malformed(r, i, absl::StrCat("slot ", a.slot, ", expected the chunk's slot ", slot, " in [0, ", K,
                                              ")"));
        }
        switch (a.kind) {
          case ActionKind::kLoad: {
            const int before = occupant[slot];
            if (before >= 0 && chunk[before] == Io::kStoring) {
              queued_behind[slot] = before;
            } else if (before >= 0 && chunk[before] != Io::kNone) {
              return bad(i, absl::StrCat("LOAD into slot ", slot, ", which still holds chunk ", before,
                                         " (not stored yet)"));
            }
            chunk[c] = Io::kLoading;
            occupant[slot] = c;
            ++loads[c];
            grads_read[c] = false;
            if (p.streams_grads && in_phase) RETURN_IF_ERROR(read_grads(i, c));
            break;
          }
          case ActionKind::kWaitLoad:
            if (chunk[c] != Io::kLoading) return bad(i, "WAIT_LOAD of a chunk with no LOAD in flight");
            if (p.streams_grads && !grads_read[c]) RETURN_IF_ERROR(read_grads(i, c));
            chunk[c] = Io::kLoaded;
            // The load's reads ran after the queued-behind store's writes.
            if (queued_behind[slot] >= 0) {
              if (chunk[queued_behind[slot]] == Io::kStoring) chunk[queued_behind[slot]] = Io::kNone;
              queued_behind[slot] = -1;
            }
            break;
          case ActionKind::kUpdate:
            if (queued_behind[slot] >= 0) {
              return bad(i, absl::StrCat("UPDATE into slot ", slot, " while the STORE of chunk ", queued_behind[slot],
                                         " from it may still be in flight (WAIT_LOAD chunk ", c, " first)"));
            }
            if (chunk[c] != Io::kLoaded) return bad(i, "UPDATE of a chunk that is not loaded (WAIT_LOAD first)");
            chunk[c] = Io::kUpdated;
            ++updates[c];
            break;
          case ActionKind::kStore:
            if (chunk[c] != Io::kUpdated) return bad(i, "STORE of a chunk before its UPDATE");
            chunk[c] = Io::kStoring;
            ++stores[c];
            break;
          case ActionKind::kWaitStore:
            if (chunk[c] == Io::kStoring) {
              chunk[c] = Io::kNone;
              if (queued_behind[slot] == c) queued_behind[slot] = -1;
            } else if (pass == 1 || chunk[c] != Io::kNone) {
              return bad(i, "WAIT_STORE of a chunk with no STORE in flight");
            }
            break;
          default:
            break;
        }
      }
      for (int c = 0; c < C; ++c) {
        for (const auto& [count, what] : {std::pair<int, const char*>{loads[c], "LOADed"},
                                          std::pair<int, const char*>{updates[c], "UPDATEd"},
                                          std::pair<int, const char*>{stores[c], "STOREd"}}) {
          if (count != 1) {
            return absl::FailedPreconditionError(
                absl::StrCat("rank ", r, ": chunk ", c, " (unit ", UnitName(r, p.chunks[c].unit), " elements [",
                             p.chunks[c].begin, ", ", p.chunks[c].begin + p.chunks[c].length, ")) is ", what, " ",
                             count, " times in a step, expected once"));
          }
        }
      }
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
    // Input from another stage: a RECV must be posted for it.
    if (a.kind == ActionKind::kForward && u > 0 && !s.computes[u - 1] && !s.posted_recvs.count({m, u, false})) {
      return Violation(r, "FORWARD of a unit whose input comes from another stage, with no RECV_ACT of it posted");
    }
    if ((a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardInput) && u + 1 < units &&
        !s.computes[u + 1] && !s.posted_recvs.count({m, u, true})) {
      return Violation(r, absl::StrCat(ActionKindName(a.kind),
                                       " of a unit whose output gradient comes from another stage, with no RECV_GRAD "
                                       "of it posted"));
    }
    if (a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardWeight) {
      for (int b : s.buckets_written[u]) {
        if (s.reduced_for_good[b]) {
          return Violation(r, absl::StrCat("a backward adding to bucket ", BucketName(r, b),
                                           " after its last REDUCE (the gradient would be lost)"));
        }
      }
    }
    return CheckParams(r, a);
  }

  // The RECV_* a compute action consumes, if one is posted for it.
  const PostedRecv* ConsumedRecv(int r, const Action& a) const {
    const RankState& s = state_[r];
    bool grad;
    if (a.kind == ActionKind::kForward) {
      grad = false;
    } else if (a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardInput) {
      grad = true;
    } else {
      return nullptr;
    }
    auto it = s.posted_recvs.find({a.micro_batch, a.unit, grad});
    return it == s.posted_recvs.end() ? nullptr : &it->second;
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
      case ActionKind::kTiedReduce:
      case ActionKind::kNormPartial:
      case ActionKind::kReduceNorm:
      case ActionKind::kUpdate:
      case ActionKind::kPublish:
      case ActionKind::kTiedPublish:
      case ActionKind::kScalerUpdate:
        RETURN_IF_ERROR(CheckOptimizerOrder(r, a));
        break;
      case ActionKind::kRecvAct:
      case ActionKind::kRecvGrad: {
        if (s.posted_recvs.count({a.micro_batch, a.unit, IsGrad(a.kind)})) {
          return Violation(r, absl::StrCat("a second ", ActionKindName(a.kind),
                                           " of the same micro-batch and unit before its consumer ran"));
        }
        const int sender = ranks_[r].groups.at("pp")[a.peer_stage];
        key = TransferKey{sender, r, a.micro_batch, IsGrad(a.kind), Boundary(a)};
        break;
      }
      default:
        break;
    }
    // A compute action consuming a posted RECV waits for the matching SEND.
    if (const PostedRecv* recv = ConsumedRecv(r, a); recv != nullptr) {
      key = recv->key;
      if (sent_[key] <= received_[key]) {
        transfer_ready = false;
        const Action& posted = program.actions[recv->action];
        s.blocked_sender = std::get<0>(key);
        s.awaited_send = Action();
        s.awaited_send.kind = IsGrad(posted.kind) ? ActionKind::kSendGrad : ActionKind::kSendAct;
        s.awaited_send.micro_batch = posted.micro_batch;
        s.awaited_send.unit = IsGrad(posted.kind) ? posted.unit + 1 : posted.unit - 1;
        s.awaited_send.peer_stage = s.stage;
        s.waiting_for =
            absl::StrCat(ActionKindName(s.awaited_send.kind), " mb=", posted.micro_batch,
                         " unit=", UnitName(r, s.awaited_send.unit), " from stage ", posted.peer_stage, " (rank ",
                         s.blocked_sender, "; the ", ActionKindName(posted.kind), " is action ", recv->action, ")");
      }
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
    s.blocked_sender = -1;
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

  // The optimizer phase follows every WAIT_REDUCE; per bucket NORM_PARTIAL,
  // then (after REDUCE_NORM, which follows every NORM_PARTIAL) UPDATE, then
  // PUBLISH, each once; SCALER_UPDATE after every PUBLISH. Of these, the
  // rules bind the actions the program has.
  absl::Status CheckOptimizerOrder(int r, const Action& a) const {
    const RankState& s = state_[r];
    const int buckets = static_cast<int>(s.reducing.size());
    for (int b = 0; b < buckets; ++b) {
      if (s.reducing[b]) {
        return Violation(r, absl::StrCat(ActionKindName(a.kind), " before the WAIT_REDUCE of bucket ", BucketName(r, b)));
      }
    }
    auto missing = [&](const std::vector<bool>& done, const std::vector<bool>& present,
                       const char* what) -> absl::Status {
      for (int b = 0; b < buckets; ++b) {
        if (present[b] && !done[b]) {
          return Violation(r, absl::StrCat(ActionKindName(a.kind), " before the ", what, " of bucket ", BucketName(r, b)));
        }
      }
      return absl::OkStatus();
    };
    switch (a.kind) {
      case ActionKind::kNormPartial:
        if (s.norm_partial[a.bucket] || s.norm_reduced) return Violation(r, "a NORM_PARTIAL after its bucket's or REDUCE_NORM");
        break;
      case ActionKind::kReduceNorm:
        if (s.norm_reduced) return Violation(r, "a second REDUCE_NORM");
        return missing(s.norm_partial, s.has_norm_partial, "NORM_PARTIAL");
      case ActionKind::kUpdate:
        if (s.has_reduce_norm && !s.norm_reduced) return Violation(r, "UPDATE before REDUCE_NORM");
        if (a.chunk < 0 && s.updated[a.bucket]) return Violation(r, "a second UPDATE of the bucket");
        break;
      case ActionKind::kTiedPublish:
        if (s.has_reduce_norm && !s.norm_reduced) return Violation(r, "TIED_PUBLISH before REDUCE_NORM");
        break;
      case ActionKind::kPublish:
        if (!s.updated[a.bucket]) return Violation(r, "PUBLISH before the bucket's UPDATE");
        if (s.published[a.bucket]) return Violation(r, "a second PUBLISH of the bucket");
        break;
      case ActionKind::kScalerUpdate:
        if (s.has_reduce_norm && !s.norm_reduced) return Violation(r, "SCALER_UPDATE before REDUCE_NORM");
        return missing(s.published, s.has_publish, "PUBLISH");
      default:
        break;
    }
    return absl::OkStatus();
  }

  void Apply(int r, const Action& a, std::vector<Ticket> issued, const TransferKey& key) {
    RankState& s = state_[r];
    const int m = a.micro_batch, u = a.unit;
    if (ConsumedRecv(r, a) != nullptr) {
      ++received_[key];
      pending_sends_[key].erase(pending_sends_[key].begin());
      s.posted_recvs.erase({m, u, a.kind != ActionKind::kForward});
    }
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
        if (s.last_reduce[a.bucket] == s.pc) s.reduced_for_good[a.bucket] = true;
        break;
      case ActionKind::kWaitReduce:
        s.reducing[a.bucket] = false;
        break;
      case ActionKind::kNormPartial:
        s.norm_partial[a.bucket] = true;
        break;
      case ActionKind::kReduceNorm:
        s.norm_reduced = true;
        break;
      case ActionKind::kUpdate:
        if (a.chunk >= 0) {
          s.updated[a.bucket] = --s.chunks_left[a.bucket] <= 0;
        } else {
          s.updated[a.bucket] = true;
        }
        break;
      case ActionKind::kPublish:
        s.published[a.bucket] = true;
        break;
      case ActionKind::kSendAct:
      case ActionKind::kSendGrad: {
        const int receiver = ranks_[r].groups.at("pp")[a.peer_stage];
        const TransferKey sent{r, receiver, m, IsGrad(a.kind), Boundary(a)};
        ++sent_[sent];
        pending_sends_[sent].push_back({r, s.pc});
        break;
      }
      case ActionKind::kRecvAct:
      case ActionKind::kRecvGrad:
        s.posted_recvs[{m, u, IsGrad(a.kind)}] = PostedRecv{s.pc, key};
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
        std::string where;
        if (s.blocked_sender >= 0) {
          // Where the sender would issue it: after the action it is stuck at, or never.
          const int sender = s.blocked_sender;
          const std::vector<Action>& actions = ranks_[sender].program.actions;
          int at = -1;
          for (int i = state_[sender].pc; i < static_cast<int>(actions.size()) && at < 0; ++i) {
            const Action& x = actions[i];
            if (x.kind == s.awaited_send.kind && x.micro_batch == s.awaited_send.micro_batch &&
                x.unit == s.awaited_send.unit && x.peer_stage == s.awaited_send.peer_stage) {
              at = i;
            }
          }
          where = at >= 0 ? absl::StrCat(", which rank ", sender, " issues at action ", at)
                          : absl::StrCat(", which rank ", sender, " never issues");
        }
        stuck.push_back(absl::StrCat(At(r, s.pc), " waits for ", s.waiting_for, where));
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
    for (const auto& [what, recv] : s.posted_recvs) {
      const auto [m, u, grad] = what;
      return left(recv.action, absl::StrCat("never consumed (no ", grad ? "backward" : "FORWARD", " of mb=", m,
                                            " unit=", UnitName(r, u), " follows it)"));
    }
    // Each unit the program forwards at all: once for every micro-batch
    // (a forward without its backward was caught above as kept).
    const int mbs = static_cast<int>(s.compute.size());
    for (int u = 0; u < static_cast<int>(s.computes.size()); ++u) {
      bool forwards = false;
      for (int m = 0; m < mbs; ++m) forwards |= s.compute[m][u].forward;
      for (int m = 0; m < mbs; ++m) {
        const Compute& c = s.compute[m][u];
        if (forwards && !c.forward) {
          return absl::FailedPreconditionError(absl::StrCat("rank ", r, ": no FORWARD of mb=", m,
                                                            " unit=", UnitName(r, u),
                                                            " (the program forwards the unit for other micro-batches; "
                                                            "each runs once)"));
        }
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
  bool posted_ = false;                                                    // the current Step issued a collective
};

}  // namespace

absl::StatusOr<Simulation> SimulatePrograms(const std::vector<SimulatedRank>& ranks) {
  Simulator simulator(ranks);
  return simulator.Run();
}

}  // namespace zeroshard
