// What several commands take alike: a strategy (or auto), a profile or parameters file, and the
// scenario a schedule file was built for.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "reshard/model/planned.hpp"

namespace reshard::cli {

// The schedule a command's flags ask for: `--strategy` (a line, or "auto": the tuner's choice under
// `--profile` or `--params`), `--max-staging` (parse_max_staging), `--max-chain` (> 0 replaces the
// strategy's), the tuner's candidates reported to `progress` (stage "tune").
model::ScheduleRequest schedule_request(const std::string& strategy, const std::string& profile, const std::string& params,
                                        const std::string& max_staging, int max_chain = 0,
                                        const model::ProgressFn& progress = {});

// `--max-staging SIZE` (compare, plan, simulate): the most staging memory one GPU may need in the
// schedules auto considers (model::TuneOptions::max_staging). parse_max_staging reads its text
// (empty: no cap; a size with its unit, model::parse_size) or throws ConfigError naming the option.
void add_max_staging_option(CLI::App* cmd, std::string& text);
std::optional<model::Bytes> parse_max_staging(const std::string& text);

// The scenario file of a schedule read from `schedule_file`: `given` when given (--scenario), else
// the file the schedule records (`recorded`, relative to the schedule's folder), else the scenario
// it names (`scenario_name`), found as NAME.yaml next to the schedule, in ./scenarios/ or in the
// shipped scenarios/ (the first whose `name` matches). Throws ConfigError naming the schedule and
// the places looked at when none matches.
std::string schedule_scenario_file(const std::string& schedule_file, const std::string& scenario_name,
                                   const std::string& recorded, const std::string& given);

// A scenario's precision change in one line, for the readable reports of compare and simulate:
// format, block, weights quantised at each side, bytes that travel against the model's own.
std::string precision_line(const model::LoadedScenario& sc);

// `--without GPUS` (plan, compare, simulate, exec): the refit over the survivors of these GPUs
// (model/membership.hpp). `without` applies it to a loaded scenario (its layouts restricted; empty
// text: unchanged) or to a planned one (its plan mapped onto the survivors), `change` getting what
// changed; `membership_fields` reports it as text (study::membership_json as JSON).
void add_without_option(CLI::App* cmd, std::string& text);
model::LoadedScenario without(model::LoadedScenario sc, const std::string& text, std::optional<model::MembershipChange>& change);
model::PlannedScenario without(model::PlannedScenario planned, const std::string& text,
                               std::optional<model::MembershipChange>& change);
std::vector<std::pair<std::string, std::string>> membership_fields(const model::MembershipChange& c);
// `--delta DENSITY` (plan, compare, simulate, sweep): a delta refit in which that share of every
// tensor's elements changed, the scenario's `delta:` key given one number (model/delta.hpp).
void add_delta_option(CLI::App* cmd, std::string& text);
// The override delta=TEXT appended to `sets` when TEXT is given; ConfigError naming --delta for
// anything but a number in (0, 1].
void add_delta_override(const std::string& text, std::vector<std::string>& sets);

// Whether a path names a schedule file (.json, or the binary format by its magic) rather than a scenario.
bool is_schedule_file(const std::string& path);

}  // namespace reshard::cli
