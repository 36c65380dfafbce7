// The progress line of the long commands (cli/progress.hpp): drawn in place on a terminal, absent
// otherwise; and the commands themselves, quiet on stderr when it is not a terminal.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../cli/progress.hpp"
#include "run_command.hpp"

namespace {

using reshard::cli::ProgressLine;

// The text of the last redraw: what follows the last '\r', spaces that clear a longer line cut.
std::string last_line(const std::string& drawn) {
  std::string s = drawn.substr(drawn.rfind('\r') + 1);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

TEST(ProgressLine, DisabledWritesNothing) {
  std::ostringstream out;
  {
    ProgressLine p(out, false);
    p.update({"tune", 7, 21, "direct: 1 s"});
    p.stage("plan");
    EXPECT_FALSE(p.callback());  // library code skips reporting altogether
  }
  EXPECT_EQ(out.str(), "");
}

TEST(ProgressLine, CountsItemAndEtaRedrawnInPlace) {
  std::ostringstream out;
  ProgressLine p(out, true);
  p.update({"tune", 7, 21, "direct: 1 s"});
  const std::string first = out.str();
  ASSERT_EQ(first.front(), '\r');
  // "tune 7/21 (direct: 1 s), <elapsed>, ETA <elapsed/7*14>": the stage has just begun, so both are
  // tiny but present.
  EXPECT_EQ(last_line(first).rfind("tune 7/21 (direct: 1 s), ", 0), 0u) << first;
  EXPECT_NE(first.find(", ETA "), std::string::npos) << first;
  // The last unit of a stage is drawn at once (no throttle) and has no ETA.
  p.update({"tune", 21, 21, ""});
  EXPECT_EQ(last_line(out.str()).rfind("tune 21/21, ", 0), 0u) << out.str();
  EXPECT_EQ(last_line(out.str()).find("ETA"), std::string::npos);
  // A new stage without counts: its name and elapsed time; the longer previous line is blanked.
  const std::size_t before = out.str().size();
  p.stage("validate");
  const std::string redraw = out.str().substr(before);
  EXPECT_EQ(last_line(redraw).rfind("validate, ", 0), 0u) << redraw;
  EXPECT_GT(redraw.size(), last_line(redraw).size() + 1);  // padded over the old text
  // Cleared: blanks then '\r', so the next output starts at column 0 of an empty line.
  p.clear();
  EXPECT_EQ(out.str().back(), '\r');
}

TEST(ProgressLine, ThrottledWithinAStage) {
  std::ostringstream out;
  ProgressLine p(out, true);
  p.update({"simulate", 1, 1000, ""});
  const auto once = out.str().size();
  for (int i = 2; i < 100; ++i) p.update({"simulate", i, 1000, ""});  // well within 0.1 s
  EXPECT_EQ(out.str().size(), once);
}

TEST(ProgressLine, LongItemIsCutToOneLine) {
  std::ostringstream out;
  ProgressLine p(out, true);
  p.update({"tune", 1, 2, std::string(500, 'x')});
  EXPECT_LE(last_line(out.str()).size(), 110u);
  EXPECT_EQ(out.str().find('\n'), std::string::npos);
}

using reshard::test::run_command;

const std::string kSmall = RESHARD_SOURCE_DIR "/scenarios/small-moe-ep.yaml";

TEST(ProgressCli, QuietWhenStderrIsNotATerminal) {
  int status = 0;
  const auto err = run_command(std::string(RESHARD_BINARY) + " compare " + kSmall + " --simulate 2>&1 >/dev/null", &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(err, "");
  const auto json = run_command(std::string(RESHARD_BINARY) + " compare " + kSmall + " --simulate --json 2>&1", &status);
  EXPECT_EQ(status, 0);
  EXPECT_TRUE(nlohmann::json::accept(json)) << json;
}

// On a terminal (script(1) gives the command one): compare shows its rows, the tuner's candidates
// and the confirmations with counts; simulate its events; plan its phases. --json stays quiet.
TEST(ProgressCli, DrawnOnATerminal) {
  int status = 0;
  if (run_command("command -v script >/dev/null 2>&1", &status), status != 0) GTEST_SKIP() << "no script(1) to give a terminal";
  auto on_tty = [&](const std::string& args) {
    return run_command("script -qec '" + std::string(RESHARD_BINARY) + " " + args + "' /dev/null", &status);
  };
  const auto compare = on_tty("compare " + kSmall + " --simulate");
  ASSERT_EQ(status, 0) << compare;
  for (const char* s : {"\rstrategies 0/6 (gather_broadcast: ", "\rstrategies 6/6 (", "\rtune 1/40 (", "\rconfirm 3/3 ("})
    EXPECT_NE(compare.find(s), std::string::npos) << s << "\n" << compare;
  const auto simulate = on_tty("simulate " + kSmall + " --strategy auto");
  ASSERT_EQ(status, 0) << simulate;
  // Alone, the tuner builds the named strategies first (compare passes its rows): 40 + 6 steps.
  for (const char* s : {"\rplan", "\rtune 1/46 (gather_broadcast chunk=", "\rsimulate "})
    EXPECT_NE(simulate.find(s), std::string::npos) << s << "\n" << simulate;
  const auto plan = on_tty("plan " + kSmall + " --strategy domain_chain");
  for (const char* s : {"\rplan", "\rlower bound", "\rbuild schedule", "\rvalidate"})
    EXPECT_NE(plan.find(s), std::string::npos) << s << "\n" << plan;
  const auto json = on_tty("compare " + kSmall + " --json");
  EXPECT_EQ(json.find('\r' + std::string("strategies")), std::string::npos) << json;
}

}  // namespace
