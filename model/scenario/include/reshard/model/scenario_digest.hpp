// The digests that tie a Measurement to its scenario (model/digest.hpp: FNV-1a, 16 hex digits).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "reshard/model/scenario.hpp"

namespace reshard::model {

// The digest of the scenario file, its model file and its topology file, in that order.
std::string scenario_digest(const Scenario& s);

// What makes a Measurement document untrustworthy ("" when nothing): no digest, a digest that does
// not match the document or the scenario's files as they are now, or `verified` false.
std::string measurement_distrust(const nlohmann::json& doc, const Scenario& s);

}  // namespace reshard::model
