#include "reshard/model/strategy_params.hpp"

#include <cctype>
#include <charconv>
#include <iterator>
#include <limits>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "reshard/model/errors.hpp"

namespace reshard::model {

namespace {
// The one table of the named strategies, in enum order: name, stable id (what a binary schedule
// file stores: never reused, a new strategy takes an id no strategy has had), what each takes,
// whether the tuner moves its parameters (gather_broadcast and nemo_rl_reshard are fixed
// deployments; direct has no parameter to move).
//   strategy                  name           id   chunk  chan.  max_ch bucket relays egress tuned
constexpr StrategyTraits kStrategies[] = {
    {Strategy::GatherBroadcast, "gather_broadcast", 0, true, true, false, true, false, true, false},
    {Strategy::Direct, "direct", 1, false, false, false, false, false, false, false},
    {Strategy::DomainGrouped, "domain_grouped", 2, true, false, false, false, true, true, true},
    {Strategy::DomainChain, "domain_chain", 3, true, false, true, false, true, true, true},
    {Strategy::Hybrid, "hybrid", 4, true, false, true, false, true, true, true},
    {Strategy::NemoRlReshard, "nemo_rl_reshard", 5, true, true, false, true, true, true, false},
};
static_assert([] {
  for (std::size_t i = 0; i < std::size(kStrategies); ++i) {
    if (static_cast<std::size_t>(kStrategies[i].strategy) != i) return false;
    for (std::size_t k = 0; k < i; ++k)
      if (kStrategies[k].id == kStrategies[i].id) return false;
  }
  return true;
}(), "kStrategies lists the strategies in enum order, each with an id of its own");

// The one table of a line's parameters, in the order describe() writes them.
using K = StrategyParameter::Kind;
using P = StrategyParams;
using T = StrategyTraits;
const StrategyParameter kParameters[] = {
    {K::Size, "chunk", "chunk_bytes", &T::chunk, &P::chunk, nullptr, nullptr, true, false},
    {K::Count, "channels", "channels", &T::channels, nullptr, &P::channels, nullptr, true, true},
    {K::Count, "max_chain", "max_chain", &T::max_chain, nullptr, &P::max_chain, nullptr, true, false},
    {K::Size, "bucket", "bucket_bytes", &T::bucket, &P::bucket, nullptr, nullptr, true, true},
    {K::Flag, "relay_ingress", "relay_ingress", &T::relays, nullptr, nullptr, &P::relay_ingress, true, false},
    {K::Flag, "relay_egress", "relay_egress", &T::egress, nullptr, nullptr, &P::relay_egress, true, false},
    {K::Flag, "rail_blind", "rail_blind", &T::relays, nullptr, nullptr, &P::rail_aligned_ingress, false, false},
};

const StrategyTraits* traits_named(const std::string& name) {
  for (const auto& t : kStrategies)
    if (name == t.name) return &t;
  return nullptr;
}
std::string strategy_list() {
  std::string list;
  for (const auto& t : kStrategies) list += std::string(list.empty() ? "" : ", ") + t.name;
  return list;
}
const StrategyParameter* parameter_named(const std::string& key) {
  for (const auto& q : kParameters)
    if (key == q.key) return &q;
  return nullptr;
}
// "chunk=SIZE", "channels=N", "relay_ingress".
std::string usage_of(const StrategyParameter& q) {
  return std::string(q.key) + (q.kind == K::Size ? "=SIZE" : q.kind == K::Count ? "=N" : "");
}
// The keys of one kind, for errors: "chunk, channels, max_chain, bucket" (values) or the flags.
std::string keys_list(bool flags) {
  std::string list;
  for (const auto& q : kParameters)
    if ((q.kind == K::Flag) == flags) list += std::string(list.empty() ? "" : ", ") + q.key;
  return list;
}
// What a strategy's line may hold, for errors.
std::string describe_usage(const StrategyTraits& t) {
  std::string keys;
  for (const auto& q : kParameters)
    if (t.*q.allowed) keys += (keys.empty() ? " " : ", ") + usage_of(q);
  return std::string(t.name) + " takes" + (keys.empty() ? " no parameters" : keys);
}
// A size as parse_size reads it back exactly: the largest binary or decimal unit that divides it.
std::string format_size(Bytes b) {
  static const std::pair<const char*, std::int64_t> units[] = {
      {"TiB", 1LL << 40}, {"TB", 1'000'000'000'000LL}, {"GiB", 1LL << 30}, {"GB", 1'000'000'000LL},
      {"MiB", 1LL << 20}, {"MB", 1'000'000LL},         {"KiB", 1LL << 10}, {"KB", 1'000LL}};
  for (const auto& [name, size] : units)
    if (b.value >= size && b.value % size == 0) return std::to_string(b.value / size) + name;
  return std::to_string(b.value) + "B";
}
}  // namespace

std::span<const StrategyParameter> strategy_parameters() { return kParameters; }

const StrategyTraits& traits(Strategy s) { return kStrategies[static_cast<std::size_t>(s)]; }

const char* to_string(Strategy s) { return traits(s).name; }

std::ostream& operator<<(std::ostream& out, Strategy s) { return out << to_string(s); }

void to_json(nlohmann::json& j, Strategy s) { j = to_string(s); }

const std::vector<Strategy>& all_strategies() {
  static const std::vector<Strategy> all = [] {
    std::vector<Strategy> v;
    for (const auto& t : kStrategies) v.push_back(t.strategy);
    return v;
  }();
  return all;
}

const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& t : kStrategies) v.push_back(t.name);
    return v;
  }();
  return names;
}

Strategy strategy_named(const std::string& name) {
  const StrategyTraits* t = traits_named(name);
  if (!t) throw PlanError("unknown strategy '" + name + "'; expected one of: " + strategy_list() + ", auto");
  return t->strategy;
}

std::optional<Strategy> strategy_with_id(std::uint8_t id) {
  for (const auto& t : kStrategies)
    if (t.id == id) return t.strategy;
  return std::nullopt;
}

std::string describe(const StrategyParams& p) {
  const StrategyTraits& t = traits(p.strategy);
  std::string s = t.name;
  for (const auto& q : kParameters) {
    if (!(t.*q.allowed)) continue;
    switch (q.kind) {
      case K::Size:
        if (!q.omit_zero || (p.*q.size).value > 0) s += " " + std::string(q.key) + "=" + format_size(p.*q.size);
        break;
      case K::Count:
        if (!q.omit_zero || p.*q.count > 0) s += " " + std::string(q.key) + "=" + std::to_string(p.*q.count);
        break;
      case K::Flag:
        if (p.*q.flag == q.flag_value) s += " " + std::string(q.key);
        break;
    }
  }
  return s;
}

StrategyParams parse_strategy(const std::string& spec) {
  std::istringstream in(spec);
  StrategyParams p;
  std::string usage = "NAME";
  for (const auto& q : kParameters) usage += " [" + usage_of(q) + "]";
  std::string name;
  if (!(in >> name)) throw PlanError("empty strategy; expected " + usage);
  p.strategy = strategy_named(name);
  const StrategyTraits& t = traits(p.strategy);
  auto refuse = [&](const std::string& token) {
    throw PlanError("strategy '" + spec + "': " + name + " takes no '" + token + "' (" + describe_usage(t) + ")");
  };
  // A size written with its unit apart ("bucket=1.6 GB", as the docs write sizes) is one token.
  std::vector<std::string> tokens;
  for (std::string token; in >> token;) {
    if (!tokens.empty()) {
      const std::string& last = tokens.back();
      const StrategyParameter* q = parameter_named(last.substr(0, last.find('=')));
      if (q && q->kind == K::Size && last.find('=') != std::string::npos &&
          std::isdigit(static_cast<unsigned char>(last.back())) && std::isalpha(static_cast<unsigned char>(token.front())) &&
          token.find('=') == std::string::npos && !parameter_named(token)) {
        tokens.back() += token;
        continue;
      }
    }
    tokens.push_back(token);
  }
  for (const std::string& token : tokens) {
    const auto eq = token.find('=');
    const std::string key = token.substr(0, eq);
    const StrategyParameter* q = parameter_named(key);
    if (eq == std::string::npos) {
      if (!q || q->kind != K::Flag)
        throw PlanError("strategy '" + spec + "': unknown flag '" + token + "' (" + keys_list(true) + ")");
      if (!(t.*q->allowed)) refuse(token);
      p.*q->flag = q->flag_value;
      continue;
    }
    const std::string value = token.substr(eq + 1);
    if (key == "chunks")
      throw PlanError("strategy '" + spec + "': 'chunks' is gone: every chain op pipelines in chunks of chunk=SIZE "
                      "(default 512KiB), and gather_broadcast's parallel rings are channels=N");
    if (!q || q->kind == K::Flag)
      throw PlanError("strategy '" + spec + "': unknown parameter '" + key + "' (" + keys_list(false) + ")");
    if (!(t.*q->allowed)) refuse(key);
    if (q->kind == K::Size) {
      Bytes b;
      try {
        b = parse_size(value);
      } catch (const std::invalid_argument& e) {
        throw PlanError("strategy '" + spec + "': '" + token + "': " + e.what());
      }
      if (b.value < 1) throw PlanError("strategy '" + spec + "': '" + token + "' must be positive");
      p.*q->size = b;
      continue;
    }
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || end != value.data() + value.size() || v < 1 || v > kMaxParts)
      throw PlanError("strategy '" + spec + "': '" + token + "' needs an integer in 1.." + std::to_string(kMaxParts));
    p.*q->count = static_cast<std::int32_t>(v);
  }
  return p;
}

nlohmann::json to_json(const StrategyParams& p) {
  nlohmann::json j = {{"strategy", to_string(p.strategy)}};
  for (const auto& q : kParameters) {
    switch (q.kind) {
      case K::Size: j[q.json] = (p.*q.size).value; break;
      case K::Count: j[q.json] = p.*q.count; break;
      case K::Flag: j[q.json] = p.*q.flag == q.flag_value; break;
    }
  }
  return j;
}

StrategyParams strategy_params_from_json(const nlohmann::json& j, const checked::JsonWhere& where) {
  using namespace checked;
  StrategyParams params;
  {
    const auto sw = where.at("strategy");
    const std::string name = string(member(j, "strategy", where), sw);
    try {
      params.strategy = strategy_named(name);
    } catch (const PlanError& e) {
      sw.fail(e.what());
    }
  }
  for (const auto& q : kParameters) {
    const auto& v = member(j, q.json, where);
    const auto w = where.at(q.json);
    switch (q.kind) {
      case K::Size: params.*q.size = Bytes{integer(v, w, 0, std::numeric_limits<std::int64_t>::max())}; break;
      case K::Count: params.*q.count = integer_as<std::int32_t>(v, w, 0, std::numeric_limits<std::int32_t>::max()); break;
      case K::Flag: params.*q.flag = boolean(v, w) ? q.flag_value : !q.flag_value; break;
    }
  }
  return params;
}

StrategyParams strategy_params_from_json(const nlohmann::json& j) {
  const std::string file;
  return strategy_params_from_json(j, {file, "params"});
}

}  // namespace reshard::model
