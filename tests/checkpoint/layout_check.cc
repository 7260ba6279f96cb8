// Offline checks of checkpoints across grid layouts, in-process, for
// layout_roundtrip_test.sh and layout_fault_test.sh. Prints one line per
// check, "ok NAME" or "FAIL NAME: WHY" (the scripts record each as a test
// case), and "info ..." lines; exits 1 when a check failed.
//
//   layout_check roundtrip WORK TOL_WEIGHTS TOL_OPTIMIZER TOL_L2 SRC_ROOT...
//     For every source and every target of the 11 layouts: reshard, verify
//     clean, files named by their coordinates, units on the stages the
//     engine chose at that pp, consolidate (f32, optimizer state)
//     byte-identical to consolidating the source. Then every source's consolidated tensors
//     against the first source's: per tensor max |a - b| / max |a| within
//     TOL_WEIGHTS (parameters) or TOL_OPTIMIZER (optimizer state), and
//     ||a - b|| / ||a|| over every parameter within TOL_L2.
//   layout_check close A B MAX_REL
//     ||wA - wB|| / ||wA|| over every master weight (the whole model).
//   layout_check same A B WORK
//     consolidate(A) and consolidate(B) (f32, optimizer state) byte-identical.
//   layout_check corrupt ROOT SEED SAMPLES
//     Flips (xor 0xff) each byte of the manifest, each header byte of every
//     shard file and SAMPLES data bytes drawn by SEED, one at a time: each
//     is caught by VerifyCheckpoint naming the file (and, for data, the
//     tensor); every byte is restored after its check.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_root.h"
#include "checkpoint/consolidate.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/manifest.h"
#include "checkpoint/reshard.h"
#include "checkpoint/safetensors_file.h"
#include "checkpoint/verify.h"
#include "comm/process_grid.h"
#include "core/file_io.h"

namespace zeroshard {
namespace {

int failures = 0;

void Record(const std::string& name, bool ok, const std::string& why = "") {
  if (ok) {
    std::printf("ok %s\n", name.c_str());
  } else {
    ++failures;
    std::printf("FAIL %s: %s\n", name.c_str(), why.c_str());
  }
  std::fflush(stdout);
}

std::string Label(const GridShape& g) { return absl::StrCat("dp", g.dp, "_tp", g.tp, "_pp", g.pp); }

const std::vector<GridShape>& Layouts() {
  static const std::vector<GridShape> layouts = {{1, 1, 1}, {2, 1, 1}, {1, 2, 1}, {1, 1, 2}, {2, 2, 1}, {2, 1, 2},
                                                 {1, 2, 2}, {2, 2, 2}, {4, 1, 1}, {1, 4, 1}, {1, 1, 4}};
  return layouts;
}

std::string Join(const std::vector<absl::Status>& problems) {
  std::string s;
  for (const absl::Status& p : problems) absl::StrAppend(&s, s.empty() ? "" : " | ", p.message());
  return s;
}

// consolidate --optimizer (f32) of `reader` into `path`; its bytes.
absl::StatusOr<std::string> Consolidated(const CheckpointReader& reader, const std::string& path) {
  ConsolidateOptions options;
  options.optimizer = true;
  if (absl::Status s = ConsolidateCheckpoint(reader, path, options); !s.ok()) return s;
  return ReadFileToString(path);
}

// The first tensor whose bytes differ, for a failure message.
std::string FirstDifference(const std::string& a_path, const std::string& b_path) {
  absl::StatusOr<SafetensorsFile> a = SafetensorsFile::Open(a_path), b = SafetensorsFile::Open(b_path);
  if (!a.ok() || !b.ok()) return "cannot reopen the consolidated files";
  for (const SafetensorsTensorInfo& t : a->header().tensors) {
    const SafetensorsTensorInfo* u = b->header().Find(t.name);
    if (u == nullptr) return absl::StrCat("'", t.name, "' missing from ", b_path);
    std::vector<float> x(t.numel()), y(u->numel());
    if (x.size() != y.size()) return absl::StrCat("'", t.name, "' has ", x.size(), " vs ", y.size(), " elements");
    if (!a->ReadAsF32(t.name, 0, t.numel(), x.data()).ok() || !b->ReadAsF32(t.name, 0, t.numel(), y.data()).ok()) {
      return absl::StrCat("cannot read '", t.name, "'");
    }
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::memcmp(&x[i], &y[i], 4) != 0) {
        return absl::StrFormat("'%s'[%d]: %.9g vs %.9g", t.name, i, x[i], y[i]);
      }
    }
  }
  return "headers or metadata differ";
}

int Roundtrip(const std::string& work, double tol_weights, double tol_optimizer, double tol_l2,
              const std::vector<std::string>& sources) {
  RemoveTree(work).IgnoreError();
  if (!MakeDirectories(work).ok()) return 2;
  std::vector<std::string> consolidated;
  // The units' stages the engine chose at each pp: a reshard to another pp
  // must choose the same.
  std::map<int, std::vector<int>> engine_stages;
  for (const std::string& src : sources) {
    absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(src);
    if (!reader.ok()) continue;
    std::vector<int>& stages = engine_stages[reader->manifest().topology().pp()];
    stages.clear();
    for (const CheckpointUnit& u : reader->manifest().units()) stages.push_back(u.stage());
  }
  for (const std::string& src : sources) {
    absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(src);
    if (!reader.ok()) {
      Record(absl::StrCat("open_", src), false, std::string(reader.status().message()));
      continue;
    }
    const CheckpointTopology& topo = reader->manifest().topology();
    const std::string label = Label({topo.dp(), topo.tp(), topo.pp()});
    const std::string base_path = JoinPath(work, label + ".safetensors");
    absl::StatusOr<std::string> base = Consolidated(*reader, base_path);
    Record(absl::StrCat("consolidate_", label), base.ok(), base.ok() ? "" : std::string(base.status().message()));
    if (!base.ok()) continue;
    consolidated.push_back(base_path);
    std::vector<absl::Status> problems = VerifyCheckpoint(src);
    Record(absl::StrCat("verify_", label), problems.empty(), Join(problems));
    for (const GridShape& target : Layouts()) {
      const std::string name = absl::StrCat("reshard_", label, "_to_", Label(target));
      const std::string out_root = JoinPath(work, "resharded");
      RemoveTree(out_root).IgnoreError();
      absl::StatusOr<std::string> dir = ReshardCheckpoint(*reader, out_root, target);
      if (!dir.ok()) {
        Record(name, false, absl::StrCat("reshard: ", dir.status().message()));
        continue;
      }
      problems = VerifyCheckpoint(*dir);
      if (!problems.empty()) {
        Record(name, false, absl::StrCat("verify: ", Join(problems)));
        continue;
      }
      absl::StatusOr<CheckpointReader> out = CheckpointReader::Open(*dir);
      if (!out.ok()) {
        Record(name, false, absl::StrCat("open: ", out.status().message()));
        continue;
      }
      const CheckpointManifest& m = out->manifest();
      std::string why;
      if (m.topology().dp() != target.dp || m.topology().tp() != target.tp || m.topology().pp() != target.pp ||
          m.format_version() != kManifestFormatVersion || m.step() != reader->manifest().step() ||
          m.optimizer_steps() != reader->manifest().optimizer_steps()) {
        why = absl::StrCat("manifest says format ", m.format_version(), " dp ", m.topology().dp(), " tp ",
                           m.topology().tp(), " pp ", m.topology().pp(), " step ", m.step());
      }
      for (int f = 0; f < m.files_size() && why.empty(); ++f) {
        const GridCoords c = CoordsOfRank(target, f);
        const std::string want = ShardFileName(c.pp, c.dp, c.tp);
        if (m.files(f).path() != want || !PathExists(JoinPath(*dir, want))) {
          why = absl::StrCat("file ", f, " is '", m.files(f).path(), "', expected '", want, "' (present)");
        }
      }
      std::vector<int> stages;
      for (const CheckpointUnit& u : m.units()) stages.push_back(u.stage());
      auto engine = engine_stages.find(target.pp);
      if (why.empty() && engine != engine_stages.end() && stages != engine->second) {
        why = absl::StrCat("unit stages ", absl::StrJoin(stages, ","), ", the engine's at pp ", target.pp, ": ",
                           absl::StrJoin(engine->second, ","));
      }
      const std::string path = JoinPath(work, "resharded.safetensors");
      absl::StatusOr<std::string> bytes = Consolidated(*out, path);
      if (why.empty() && !bytes.ok()) why = absl::StrCat("consolidate: ", bytes.status().message());
      if (why.empty() && *bytes != *base) why = absl::StrCat("consolidated bytes differ: ", FirstDifference(base_path, path));
      Record(name, why.empty(), why);
    }
  }
  // Every layout trained the same model on the same data: the results differ
  // only by summation order.
  if (consolidated.size() < 2) return failures > 0 ? 1 : 0;
  absl::StatusOr<SafetensorsFile> ref = SafetensorsFile::Open(consolidated[0]);
  if (!ref.ok()) return 1;
  double worst_master = 0, worst_optimizer = 0, worst_l2 = 0;
  std::string worst_master_at, worst_optimizer_at;
  for (size_t i = 1; i < consolidated.size(); ++i) {
    absl::StatusOr<SafetensorsFile> other = SafetensorsFile::Open(consolidated[i]);
    std::string why;  // the first tensor out of tolerance, or what could not be compared
    double worst = 0, diff2 = 0, norm2 = 0;  // diff2, norm2: of the parameters
    if (!other.ok()) why = std::string(other.status().message());
    for (const SafetensorsTensorInfo& t : ref->header().tensors) {
      if (!other.ok()) break;
      const SafetensorsTensorInfo* u = other->header().Find(t.name);
      std::vector<float> a(t.numel()), b(t.numel());
      if (u == nullptr || u->shape != t.shape || !ref->ReadAsF32(t.name, 0, t.numel(), a.data()).ok() ||
          !other->ReadAsF32(t.name, 0, t.numel(), b.data()).ok()) {
        why = absl::StrCat("tensor '", t.name, "' missing, of another shape or unreadable");
        break;
      }
      double max_abs = 0, max_diff = 0;
      for (size_t k = 0; k < a.size(); ++k) {
        max_abs = std::max(max_abs, std::fabs(static_cast<double>(a[k])));
        max_diff = std::max(max_diff, std::fabs(static_cast<double>(a[k]) - b[k]));
      }
      const double rel = max_abs > 0 ? max_diff / max_abs : max_diff;
      worst = std::max(worst, rel);
      const bool optimizer = absl::StartsWith(t.name, "optimizer.");
      const double tol = optimizer ? tol_optimizer : tol_weights;
      for (size_t k = 0; k < a.size() && !optimizer; ++k) {
        diff2 += (static_cast<double>(a[k]) - b[k]) * (static_cast<double>(a[k]) - b[k]);
        norm2 += static_cast<double>(a[k]) * a[k];
      }
      double& w = optimizer ? worst_optimizer : worst_master;
      if (rel > w) {
        w = rel;
        (optimizer ? worst_optimizer_at : worst_master_at) = absl::StrCat(t.name, " of ", consolidated[i]);
      }
      if (!(rel <= tol) && why.empty()) {
        why = absl::StrFormat("'%s': max |a - b| / max |a| = %.3g > %.3g", t.name, rel, tol);
      }
    }
    const double l2 = norm2 > 0 ? std::sqrt(diff2 / norm2) : 0;
    worst_l2 = std::max(worst_l2, l2);
    if (!(l2 <= tol_l2) && why.empty()) why = absl::StrFormat("weights ||a - b|| / ||a|| = %.3g > %.3g", l2, tol_l2);
    std::printf("info %s vs %s: worst per-tensor max|a-b|/max|a| %.3g, weights ||a-b||/||a|| %.3g\n",
                consolidated[i].c_str(), consolidated[0].c_str(), worst, l2);
    const std::string file = consolidated[i].substr(consolidated[i].rfind('/') + 1);
    Record(absl::StrCat("agrees_with_the_first_", file.substr(0, file.find('.'))), why.empty(), why);
  }
  std::printf("info measured across layouts: per-tensor max|a-b|/max|a| of weights %.3g (%s), of optimizer "
              "state %.3g (%s); whole-model weights ||a-b||/||a|| %.3g\n",
              worst_master, worst_master_at.c_str(), worst_optimizer, worst_optimizer_at.c_str(), worst_l2);
  return failures > 0 ? 1 : 0;
}

int Close(const std::string& a_root, const std::string& b_root, double max_rel) {
  absl::StatusOr<CheckpointReader> a = CheckpointReader::Open(a_root), b = CheckpointReader::Open(b_root);
  const std::string name = absl::StrCat("weights_close_", a_root.substr(a_root.rfind('/') + 1), "_",
                                        b_root.substr(b_root.rfind('/') + 1));
  if (!a.ok() || !b.ok()) {
    Record(name, false, std::string((a.ok() ? b.status() : a.status()).message()));
    return 1;
  }
  double diff2 = 0, norm2 = 0;
  std::string why;
  const CheckpointManifest& ma = a->manifest();
  if (ma.units_size() != b->manifest().units_size()) why = "unit counts differ";
  for (int u = 0; u < ma.units_size() && why.empty(); ++u) {
    for (int p = 0; p < ma.units(u).params_size() && why.empty(); ++p) {
      absl::StatusOr<std::vector<float>> x = a->ReadParam(u, p, kKindMaster), y = b->ReadParam(u, p, kKindMaster);
      if (!x.ok() || !y.ok() || x->size() != y->size() ||
          b->manifest().units(u).params(p).name() != ma.units(u).params(p).name()) {
        why = absl::StrCat("parameter '", ma.units(u).params(p).name(), "' cannot be compared");
        break;
      }
      for (size_t i = 0; i < x->size(); ++i) {
        const double d = static_cast<double>((*x)[i]) - (*y)[i];
        diff2 += d * d;
        norm2 += static_cast<double>((*x)[i]) * (*x)[i];
      }
    }
  }
  const double rel = norm2 > 0 ? std::sqrt(diff2 / norm2) : std::sqrt(diff2);
  std::printf("info %s vs %s: ||a - b|| / ||a|| = %.3g\n", a_root.c_str(), b_root.c_str(), rel);
  if (why.empty() && !(rel <= max_rel)) why = absl::StrFormat("relative L2 difference %.3g > %.3g", rel, max_rel);
  Record(name, why.empty(), why);
  return failures > 0 ? 1 : 0;
}

int Same(const std::string& a_root, const std::string& b_root, const std::string& work) {
  const std::string name = absl::StrCat("bitwise_", a_root.substr(a_root.rfind('/') + 1), "_",
                                        b_root.substr(b_root.rfind('/') + 1));
  MakeDirectories(work).IgnoreError();
  absl::StatusOr<CheckpointReader> a = CheckpointReader::Open(a_root), b = CheckpointReader::Open(b_root);
  if (!a.ok() || !b.ok()) {
    Record(name, false, std::string((a.ok() ? b.status() : a.status()).message()));
    return 1;
  }
  const std::string pa = JoinPath(work, "same_a.safetensors"), pb = JoinPath(work, "same_b.safetensors");
  absl::StatusOr<std::string> x = Consolidated(*a, pa), y = Consolidated(*b, pb);
  std::string why;
  if (!x.ok() || !y.ok()) {
    why = std::string((x.ok() ? y.status() : x.status()).message());
  } else if (*x != *y) {
    why = FirstDifference(pa, pb);
  }
  Record(name, why.empty(), why);
  return failures > 0 ? 1 : 0;
}

// Xors byte `offset` of `path` with 0xff (twice restores it).
bool FlipByte(const std::string& path, int64_t offset) {
  const int fd = open(path.c_str(), O_RDWR);
  if (fd < 0) return false;
  unsigned char c = 0;
  bool ok = pread(fd, &c, 1, offset) == 1;
  c ^= 0xff;
  ok = ok && pwrite(fd, &c, 1, offset) == 1;
  close(fd);
  return ok;
}

// Every problem VerifyCheckpoint reports names `file` (and `tensor`); at
// least one problem.
std::string CaughtNaming(const std::string& dir, const std::string& file, const std::string& tensor,
                         bool only_one) {
  const std::vector<absl::Status> problems = VerifyCheckpoint(dir);
  if (problems.empty()) return "not detected";
  if (only_one && problems.size() != 1) return absl::StrCat(problems.size(), " problems: ", Join(problems));
  for (const absl::Status& p : problems) {
    if (!absl::StrContains(p.message(), file)) return absl::StrCat("does not name '", file, "': ", p.message());
    if (!tensor.empty() && !absl::StrContains(p.message(), absl::StrCat("'", tensor, "'"))) {
      return absl::StrCat("does not name tensor '", tensor, "': ", p.message());
    }
    if (p.code() != absl::StatusCode::kDataLoss) return absl::StrCat("code ", p.code(), ": ", p.message());
  }
  return "";
}

int Corrupt(const std::string& root, uint64_t seed, int samples) {
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(root);
  if (!reader.ok()) {
    Record("corrupt_open", false, std::string(reader.status().message()));
    return 1;
  }
  const std::string dir = reader->dir();
  const CheckpointManifest m = reader->manifest();
  std::printf("info corrupt: %s (dp %d tp %d pp %d, %d shard files), seed %llu, %d data bytes\n", dir.c_str(),
              m.topology().dp(), m.topology().tp(), m.topology().pp(), m.files_size(),
              static_cast<unsigned long long>(seed), samples);
  std::vector<std::string> paths = {JoinPath(dir, kManifestFileName)};
  for (const CheckpointFile& f : m.files()) paths.push_back(JoinPath(dir, f.path()));
  std::vector<uint32_t> crcs;
  for (const std::string& p : paths) {
    absl::StatusOr<std::string> bytes = ReadFileToString(p);
    crcs.push_back(bytes.ok() ? Crc32c(*bytes) : 0);
  }
  std::vector<absl::Status> problems = VerifyCheckpoint(dir);
  Record("corrupt_clean_before", problems.empty(), Join(problems));

  // The manifest: every byte (its checksum line included).
  {
    const std::string& path = paths[0];
    const int64_t size = FileSize(path).value_or(0);
    int caught = 0;
    std::string first_miss;
    for (int64_t i = 0; i < size; ++i) {
      if (!FlipByte(path, i)) {
        first_miss = absl::StrCat("cannot flip byte ", i);
        break;
      }
      const std::string why = CaughtNaming(dir, path, "", true);
      FlipByte(path, i);
      if (why.empty()) {
        ++caught;
      } else if (first_miss.empty()) {
        first_miss = absl::StrCat("byte ", i, ": ", why);
      }
    }
    std::printf("info manifest: %d of %lld flipped bytes caught\n", caught, static_cast<long long>(size));
    Record("corrupt_every_manifest_byte", size > 0 && caught == size, first_miss);
  }
  // Every header byte of every shard file (the 8-byte length and the JSON).
  {
    int64_t total = 0, caught = 0;
    std::string first_miss;
    for (int f = 0; f < m.files_size(); ++f) {
      const std::string& path = paths[f + 1];
      const int64_t n = 8 + m.files(f).header_bytes();
      for (int64_t i = 0; i < n; ++i, ++total) {
        if (!FlipByte(path, i)) {
          if (first_miss.empty()) first_miss = absl::StrCat(path, ": cannot flip byte ", i);
          continue;
        }
        const std::string why = CaughtNaming(dir, path, "", true);
        FlipByte(path, i);
        if (why.empty()) {
          ++caught;
        } else if (first_miss.empty()) {
          first_miss = absl::StrCat(path, " header byte ", i, ": ", why);
        }
      }
    }
    std::printf("info shard headers: %lld of %lld flipped bytes caught\n", static_cast<long long>(caught),
                static_cast<long long>(total));
    Record("corrupt_every_shard_header_byte", total > 0 && caught == total, first_miss);
  }
  // A seeded sample of data bytes over all files (uniform over their bytes).
  {
    std::vector<int64_t> data_bytes;  // per file
    int64_t total_bytes = 0;
    for (const CheckpointFile& f : m.files()) {
      data_bytes.push_back(f.size_bytes() - 8 - f.header_bytes());
      total_bytes += data_bytes.back();
    }
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> pick(0, total_bytes - 1);
    int caught = 0;
    std::vector<int> per_file(m.files_size(), 0);
    std::string first_miss;
    for (int s = 0; s < samples; ++s) {
      int64_t at = pick(rng);
      int f = 0;
      while (at >= data_bytes[f]) at -= data_bytes[f++];
      const CheckpointFile& file = m.files(f);
      std::string tensor;
      for (const CheckpointTensor& t : file.tensors()) {
        if (t.data_begin() <= at && at < t.data_end()) tensor = t.name();
      }
      const std::string& path = paths[f + 1];
      const int64_t offset = 8 + file.header_bytes() + at;
      if (!FlipByte(path, offset)) {
        if (first_miss.empty()) first_miss = absl::StrCat(path, ": cannot flip byte ", offset);
        continue;
      }
      const std::string why = tensor.empty() ? "no tensor holds the byte" : CaughtNaming(dir, path, tensor, true);
      FlipByte(path, offset);
      ++per_file[f];
      if (why.empty()) {
        ++caught;
      } else if (first_miss.empty()) {
        first_miss = absl::StrCat(path, " byte ", offset, " (tensor ", tensor, "): ", why);
      }
    }
    std::string spread;
    for (int f = 0; f < m.files_size(); ++f) absl::StrAppend(&spread, f == 0 ? "" : " ", per_file[f]);
    std::printf("info data: %d of %d flipped bytes caught (per file: %s; %lld data bytes in all)\n", caught, samples,
                spread.c_str(), static_cast<long long>(total_bytes));
    Record("corrupt_sampled_data_bytes", samples >= 1 && caught == samples, first_miss);
    Record("corrupt_sampled_data_bytes_in_every_file",
           std::count(per_file.begin(), per_file.end(), 0) == 0, spread);
  }
  problems = VerifyCheckpoint(dir);
  bool restored = problems.empty();
  for (size_t i = 0; i < paths.size(); ++i) {
    absl::StatusOr<std::string> bytes = ReadFileToString(paths[i]);
    restored = restored && bytes.ok() && Crc32c(*bytes) == crcs[i];
  }
  Record("corrupt_every_byte_restored", restored, Join(problems));
  return failures > 0 ? 1 : 0;
}

int Main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  double x = 0, y = 0, z = 0;
  uint64_t seed = 0;
  int n = 0;
  if (mode == "roundtrip" && argc >= 7 && absl::SimpleAtod(argv[3], &x) && absl::SimpleAtod(argv[4], &y) &&
      absl::SimpleAtod(argv[5], &z)) {
    return Roundtrip(argv[2], x, y, z, std::vector<std::string>(argv + 6, argv + argc));
  }
  if (mode == "close" && argc == 5 && absl::SimpleAtod(argv[4], &x)) return Close(argv[2], argv[3], x);
  if (mode == "same" && argc == 5) return Same(argv[2], argv[3], argv[4]);
  if (mode == "corrupt" && argc == 5 && absl::SimpleAtoi(argv[3], &seed) && absl::SimpleAtoi(argv[4], &n)) {
    return Corrupt(argv[2], seed, n);
  }
  std::fprintf(stderr,
               "usage: layout_check roundtrip WORK TOL_WEIGHTS TOL_OPTIMIZER TOL_L2 SRC...\n"
               "       layout_check close A B MAX_REL\n"
               "       layout_check same A B WORK\n"
               "       layout_check corrupt ROOT SEED SAMPLES\n");
  return 2;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) { return zeroshard::Main(argc, argv); }
