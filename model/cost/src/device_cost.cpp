#include "reshard/model/device_cost.hpp"

#include <algorithm>
#include <cmath>

#include "reshard/model/errors.hpp"
#include "reshard/model/memory.hpp"
#include "reshard/model/yaml_reader.hpp"

namespace reshard::model {

namespace {

constexpr const char* kDeviceProfileKeys[] = {"profile", "machine", "call_time", "copy_rate", "call_time_source", "copy_rate_source"};

// The bytes one operation copies on the device (copied(o), device_cost.hpp).
Bytes device_copied(const Schedule& s, const Op& op) {
  const std::int64_t hops = op.chain < 0 ? (op.src != op.dst ? 1 : 0)
                                         : static_cast<std::int64_t>(s.chains[static_cast<std::size_t>(op.chain)].hops.size());
  return Bytes{op.bytes.value * (1 + 2 * hops)};
}

}  // namespace

bool DeviceProfile::is_device_profile(const std::filesystem::path& path) {
  const auto root = yaml::load_file(path);
  const auto profile = root.get("profile");
  return profile && profile->is_scalar() && profile->str() == "device";
}

DeviceProfile DeviceProfile::load(const std::filesystem::path& path) {
  const auto root = yaml::load_file(path);
  root.allow_only({std::begin(kDeviceProfileKeys), std::end(kDeviceProfileKeys)});
  DeviceProfile p;
  const auto profile = root.at("profile");
  if (profile.str() != "device") profile.fail("'" + profile.str() + "': a device profile says 'profile: device'");
  p.machine = root.at("machine").str();
  const auto call = root.at("call_time");
  p.call_time = call.duration();
  if (!(p.call_time.value > 0) || !std::isfinite(p.call_time.value)) call.fail("must be a positive duration (e.g. 2.3us)");
  const auto rate = root.at("copy_rate");
  p.copy_rate = rate.bandwidth();
  if (!(p.copy_rate.value > 0) || !std::isfinite(p.copy_rate.value)) rate.fail("must be a positive rate (e.g. 2148GBps)");
  p.call_time_source = root.at("call_time_source").str();
  p.copy_rate_source = root.at("copy_rate_source").str();
  return p;
}

DevicePrediction estimate_device(const Schedule& s, const DeviceProfile& profile) {
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    if (const std::string why = op_problem(s, i, -1, false); !why.empty()) throw ScheduleError(why);
  std::int32_t count = 0;
  const std::vector<std::int32_t> step = op_steps(s, count);
  DevicePrediction pr;
  pr.steps.resize(static_cast<std::size_t>(count));
  for (std::int32_t k = 0; k < count; ++k) pr.steps[static_cast<std::size_t>(k)].step = k;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    DeviceStep& st = pr.steps[static_cast<std::size_t>(step[i])];
    ++st.ops;
    st.copied.value += device_copied(s, s.ops[i]).value;
  }
  for (DeviceStep& st : pr.steps) {
    st.calls = 1;  // the step's launch
    st.issue = Seconds{profile.call_time.value * static_cast<double>(st.calls)};
    st.copy = Seconds{st.copied.as_double() / profile.copy_rate.value};
    st.time = Seconds{std::max(st.issue.value, st.copy.value)};
    pr.time.value += st.time.value;
    pr.calls += st.calls;
    pr.copied.value += st.copied.value;
  }
  return pr;
}

}  // namespace reshard::model
