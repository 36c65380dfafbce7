#include <gtest/gtest.h>

#include <stdexcept>

#include "reshard/model/units.hpp"

using namespace reshard::model;
using namespace reshard::model::literals;

TEST(Units, BandwidthSuffixes) {
  // 400 Gb/s = 400e9 bits/s / 8 = 5e10 bytes/s (one ConnectX-7 NIC).
  EXPECT_DOUBLE_EQ(parse_bandwidth("400Gbps").value, 5e10);
  // NVLink 4: 450 GB/s per direction.
  EXPECT_DOUBLE_EQ(parse_bandwidth("450GBps").value, 4.5e11);
  EXPECT_DOUBLE_EQ(parse_bandwidth(" 1.8TBps ").value, 1.8e12);
  EXPECT_DOUBLE_EQ(parse_bandwidth("800Gbps").value, 1e11);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1e3MBps").value, 1e9);
}

// Every spelling reshard accepts, as it prints them (GB/s) and as configs and NIC datasheets write
// them: decimal and binary bytes per second, bits per second.
TEST(Units, BandwidthSpellings) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("450 GB/s").value, 450e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("450GBps").value, 450e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1GiB/s").value, 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_bandwidth("2MiB/s").value, 2.0 * 1048576);
  EXPECT_DOUBLE_EQ(parse_bandwidth("400Gbit/s").value, 50e9);  // 400e9 bits / 8
  EXPECT_DOUBLE_EQ(parse_bandwidth("400Gb/s").value, 50e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("400Gbps").value, 50e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1.6Tbit/s").value, 200e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("64 GB/s").value, parse_bandwidth(format(BytesPerSecond{64e9})).value);  // reads what it prints
}

TEST(Units, DurationAndSize) {
  EXPECT_DOUBLE_EQ(parse_duration("1.5us").value, 1.5e-6);
  EXPECT_DOUBLE_EQ(parse_duration("150ns").value, 150e-9);
  EXPECT_DOUBLE_EQ(parse_duration("2ms").value, 2e-3);
  EXPECT_EQ(parse_size("512KiB").value, 512LL << 10);  // 1 KiB = 1024 B, not 1000
  EXPECT_EQ(parse_size("64MiB").value, 64LL << 20);
  EXPECT_EQ(parse_size("5GB").value, 5'000'000'000LL);
}

TEST(Units, RejectsMissingWrongOrNegative) {
  EXPECT_THROW(parse_bandwidth("450"), std::invalid_argument);       // no unit
  EXPECT_THROW(parse_bandwidth("450GB/h"), std::invalid_argument);   // unknown unit
  EXPECT_THROW(parse_bandwidth("450Gb"), std::invalid_argument);     // a size, not a rate
  EXPECT_THROW(parse_bandwidth("-5GBps"), std::invalid_argument);    // negative
  EXPECT_THROW(parse_duration("3 parsecs"), std::invalid_argument);
  EXPECT_THROW(parse_size("GB"), std::invalid_argument);             // no number
}

TEST(Units, Arithmetic) {
  // 1 GiB over 50 GB/s = 1073741824 / 5e10 s.
  const Seconds t = 1_GiB / BytesPerSecond{5e10};
  EXPECT_DOUBLE_EQ(t.value, 1073741824.0 / 5e10);
  EXPECT_EQ((BytesPerSecond{1e9} * Seconds{2.5}).value, 2'500'000'000LL);
  EXPECT_EQ(format(Seconds{1.94}), "1.94 s");
  EXPECT_EQ(format(BytesPerSecond{4.5e11}), "450 GB/s");
  EXPECT_EQ(format(Bytes{1'342'000'000'000LL}), "1.34 TB");
  EXPECT_EQ(format(Bytes{25'453'000'000'000'000LL}), "25.5 PB");  // not "25453 TB"
  EXPECT_EQ(format(BytesPerSecond{2.5e15}), "2.50 PB/s");
  EXPECT_EQ(format(BytesPerSecond{0}), "0 B/s");
  EXPECT_EQ(parse_size("1.5PB").value, 1'500'000'000'000'000LL);
}
