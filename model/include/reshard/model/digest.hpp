// Digests that tie a Measurement (written by `reshard exec -o`) to what it measured. A digest is
// FNV-1a over 64 bits, 16 hex digits: it detects an edited or stale file (op bytes changed, an
// operation dropped, `verified` flipped, the scenario changed since), not a deliberate forgery.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace reshard::model {

struct Scenario;

std::string digest(std::string_view text);
// The digest of the scenario file, its model file and its topology file, in that order.
std::string scenario_digest(const Scenario& s);
// The digest of a Measurement document: its compact JSON without its "digest" member.
std::string document_digest(const nlohmann::json& doc);

// What makes a Measurement document untrustworthy ("" when nothing): no digest, a digest that does
// not match the document or the scenario's files as they are now, or `verified` false.
std::string measurement_distrust(const nlohmann::json& doc, const Scenario& s);

}  // namespace reshard::model
