#include "cli/supervisor_attempt.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace zeroshard::cli {
namespace {

std::string TmpPath(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return std::string(base != nullptr ? base : "/tmp") + "/" + name;
}

pid_t ReadPid(const std::string& path) {
  std::ifstream in(path);
  pid_t pid = -1;
  in >> pid;
  return pid;
}

bool Alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// As Open MPI's ranks: a process in a group (here a session) of its own,
// stopped, with a launcher that exits: it must still end with the attempt.
TEST(SupervisorAttemptTest, NoProcessOutlivesItsAttempt) {
  const std::string pidfile = TmpPath("stopped.pid");
  std::remove(pidfile.c_str());
  absl::StatusOr<Attempt> a = RunAttempt(
      {"sh", "-c",
       "setsid sh -c 'echo $$ >\"$0.tmp\"; mv \"$0.tmp\" \"$0\"; kill -STOP $$' \"$0\" </dev/null >/dev/null 2>&1 & "
       "while [ ! -s \"$0\" ]; do sleep 0.01; done; echo bye; exit 3",
       pidfile},
      [](const std::string&) { return false; });
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->exit_code, 3);
  EXPECT_EQ(a->output, "bye\n");
  const pid_t stopped = ReadPid(pidfile);
  ASSERT_GT(stopped, 0);
  ASSERT_NE(::getpgid(stopped), ::getpgid(0));
  EXPECT_FALSE(Alive(stopped)) << "pid " << stopped << " outlived its attempt";
  if (Alive(stopped)) ::kill(stopped, SIGKILL);
}

// Once the output names a failure the attempt has `grace_s` to end, then
// the launcher and everything below it are killed.
TEST(SupervisorAttemptTest, AFailureInTheOutputEndsTheAttemptAfterTheGrace) {
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<Attempt> a = RunAttempt({"sh", "-c", "echo FAILED; sleep 300"},
                                         [](const std::string& out) { return out.find("FAILED") != std::string::npos; },
                                         /*grace_s=*/0.2);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->exit_code, -1);
  EXPECT_EQ(a->signal, SIGKILL);
  EXPECT_LT(s, 60);
  EXPECT_TRUE(Descendants(::getpid()).empty());
}

TEST(SupervisorAttemptTest, MissingProgramIsNamed) {
  absl::StatusOr<Attempt> a = RunAttempt({"/nonexistent/trainer"}, [](const std::string&) { return false; });
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "cannot start '/nonexistent/trainer': No such file or directory");
}

}  // namespace
}  // namespace zeroshard::cli
