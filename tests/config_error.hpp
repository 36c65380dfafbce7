// Expecting a ConfigError from a test: its message, or a test failure.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "reshard/model/errors.hpp"

namespace reshard::test {

// The message of the ConfigError `f` throws ("" and a test failure when it throws none or another).
template <class F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const model::ConfigError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a ConfigError: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

}  // namespace reshard::test

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)
