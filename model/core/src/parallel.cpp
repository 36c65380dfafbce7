#include "reshard/model/parallel.hpp"

#include <stdexcept>

#include "reshard/model/errors.hpp"

namespace reshard::model {

const Processes& one_process() {
  static const Processes alone;
  return alone;
}

nlohmann::json error_json(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const OverrideError& e) {
    return {{"class", "OverrideError"}, {"message", e.what()}, {"override", e.override_text()}, {"file", e.file()},
            {"line", e.line()}, {"key", e.key()}, {"reason", e.reason()}};
  } catch (const ConfigError& e) {
    return {{"class", "ConfigError"}, {"message", e.what()}, {"file", e.file()}, {"line", e.line()}, {"key", e.key()},
            {"reason", e.reason()}};
  } catch (const PlanError& e) {
    return {{"class", "PlanError"}, {"message", e.what()}};
  } catch (const IndexError& e) {
    return {{"class", "IndexError"}, {"message", e.what()}};
  } catch (const ScheduleError& e) {
    return {{"class", "ScheduleError"}, {"message", e.what()}};
  } catch (const Error& e) {
    return {{"class", "Error"}, {"message", e.what()}};
  } catch (const std::exception& e) {
    return {{"class", "internal"}, {"message", e.what()}};
  } catch (...) {
    return {{"class", "internal"}, {"message", "unknown exception"}};
  }
}

std::exception_ptr error_from_json(const nlohmann::json& j) {
  const std::string cls = j.at("class"), message = j.at("message");
  if (cls == "ConfigError" || cls == "OverrideError") {
    const ConfigError e(j.at("file").get<std::string>(), j.at("line").get<int>(), j.at("key").get<std::string>(),
                        j.at("reason").get<std::string>());
    if (cls == "OverrideError") return std::make_exception_ptr(OverrideError(j.at("override").get<std::string>(), e));
    return std::make_exception_ptr(e);
  }
  if (cls == "PlanError") return std::make_exception_ptr(PlanError(message));
  if (cls == "IndexError") return std::make_exception_ptr(IndexError(message));
  if (cls == "ScheduleError") return std::make_exception_ptr(ScheduleError(message));
  if (cls == "Error") return std::make_exception_ptr(Error(message));
  return std::make_exception_ptr(std::runtime_error(message));
}

}  // namespace reshard::model
