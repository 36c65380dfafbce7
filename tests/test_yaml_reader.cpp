#include <gtest/gtest.h>

#include "reshard/model/errors.hpp"
#include "reshard/model/yaml_reader.hpp"

using namespace reshard::model;

TEST(YamlReader, UnknownKeyNamesFileLineAndKey) {
  const auto root = yaml::load_string("a: 1\nnic:\n  speed: 400Gbps\n  colour: red\n", "t.yaml");
  const auto nic = root.at("nic");
  try {
    nic.allow_only({"speed"});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), "t.yaml");
    EXPECT_EQ(e.line(), 4);
    EXPECT_EQ(e.key(), "nic.colour");
  }
}

TEST(YamlReader, UnitErrorsCarryTheLine) {
  const auto root = yaml::load_string("x: 1\nbw: 400\n", "u.yaml");
  try {
    (void)root.at("bw").bandwidth();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.key(), "bw");
    EXPECT_NE(std::string(e.what()).find("no unit"), std::string::npos);
  }
}

TEST(YamlReader, MissingKeyAndSyntaxError) {
  const auto root = yaml::load_string("x: 1\n", "m.yaml");
  EXPECT_THROW((void)root.at("y"), ConfigError);
  EXPECT_THROW(yaml::load_string("a: [1, 2\n", "bad.yaml"), ConfigError);
  EXPECT_THROW(yaml::load_file("/nonexistent/file.yaml"), ConfigError);
}
