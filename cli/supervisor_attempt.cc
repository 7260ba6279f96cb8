#include "cli/supervisor_attempt.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace zeroshard::cli {
namespace {

// Parent of every live process, from /proc/PID/stat ("PID (COMM) S PPID ...";
// COMM may hold spaces and parentheses, so read after the last ')').
// Zombies are left out: there is nothing left to kill.
std::map<pid_t, pid_t> ParentLinks() {
  std::map<pid_t, pid_t> parent;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return parent;
  while (dirent* e = ::readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 4 >= stat.size()) continue;
    const char state = stat[close + 2];
    int ppid = 0;
    const size_t from = close + 4, to = stat.find(' ', from);
    if (state == 'Z' || !absl::SimpleAtoi(stat.substr(from, to - from), &ppid)) continue;
    parent[pid] = ppid;
  }
  ::closedir(proc);
  return parent;
}

// Kills every descendant of this process and reaps them all (orphans of
// the attempt are reparented here: we are their subreaper).
void EndEveryChild() {
  for (int round = 0; round < 50; ++round) {
    const std::vector<pid_t> left = Descendants(::getpid());
    for (pid_t p : left) ::kill(p, SIGKILL);
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (left.empty()) return;
    ::usleep(20 * 1000);
  }
}

}  // namespace

std::vector<pid_t> Descendants(pid_t root) {
  const std::map<pid_t, pid_t> parent = ParentLinks();
  std::vector<pid_t> out;
  std::vector<pid_t> frontier = {root};
  while (!frontier.empty()) {
    const pid_t p = frontier.back();
    frontier.pop_back();
    for (const auto& [child, pp] : parent) {
      if (pp == p) {
        out.push_back(child);
        frontier.push_back(child);
      }
    }
  }
  return out;
}

absl::StatusOr<Attempt> RunAttempt(const std::vector<std::string>& argv,
                                   const std::function<bool(const std::string&)>& failed, double grace_s) {
  // Orphans of the attempt (ranks whose launcher died) become our children.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  int fds[2];
  if (::pipe(fds) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, cargv[0], &actions, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (spawned != 0) {
    ::close(fds[0]);
    return absl::NotFoundError(absl::StrCat("cannot start '", argv[0], "': ", std::strerror(spawned)));
  }
  using Clock = std::chrono::steady_clock;
  constexpr size_t kTail = 1 << 16;
  Attempt attempt;
  bool exited = false, eof = false, failure_seen = false;
  Clock::time_point deadline = Clock::time_point::max();
  int status = 0;
  while (!eof || !exited) {
    if (!eof) {
      pollfd p{fds[0], POLLIN, 0};
      if (::poll(&p, 1, 100) > 0) {
        char buf[4096];
        const ssize_t n = ::read(fds[0], buf, sizeof(buf));
        if (n <= 0) {
          eof = true;
        } else {
          std::cout.write(buf, n);
          std::cout.flush();
          attempt.output.append(buf, static_cast<size_t>(n));
          if (attempt.output.size() > 2 * kTail) attempt.output.erase(0, attempt.output.size() - kTail);
        }
      }
    } else {
      ::usleep(50 * 1000);
    }
    if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      // Ranks still holding the pipe get a moment, then end with the rest.
      deadline = std::min(deadline, Clock::now() + std::chrono::seconds(2));
    }
    if (!failure_seen && failed(attempt.output)) {
      failure_seen = true;
      deadline = std::min(deadline, Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1e3)));
    }
    if (Clock::now() > deadline) {
      ::kill(-pid, SIGKILL);
      for (pid_t p : Descendants(::getpid())) ::kill(p, SIGKILL);
      if (exited) break;
      deadline = Clock::time_point::max();
    }
  }
  ::kill(-pid, SIGKILL);
  if (!exited) ::waitpid(pid, &status, 0);
  EndEveryChild();
  ::close(fds[0]);
  if (WIFSIGNALED(status)) {
    attempt.exit_code = -1;
    attempt.signal = WTERMSIG(status);
  } else {
    attempt.exit_code = WEXITSTATUS(status);
  }
  return attempt;
}

}  // namespace zeroshard::cli
