// A precision change on the way (model/precision.hpp): bytes on the wire and conversion work by hand
// on the tiny scenario, the refusals, and the E4M3 / MX quantiser of the executor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "config_error.hpp"
#include "reshard/exec/pattern.hpp"
#include "quantize.hpp"
#include "reshard/exec/executor.hpp"
#include "reshard/model/cost.hpp"
#include "reshard/model/scenario.hpp"
#include "reshard/model/schedule.hpp"
#include "reshard/model/strategies.hpp"
#include "reshard/sim/schedule_sim.hpp"

using namespace reshard::model;
using reshard::test::config_error;
namespace q = reshard::exec::detail;

namespace {

const std::filesystem::path kScenario = std::filesystem::path(RESHARD_SOURCE_DIR) / "scenarios/small-gqa-fp8.yaml";

LoadedScenario tiny(const std::vector<Override>& sets = {}) { return load_scenario(kScenario, sets); }
Override set(const std::string& key, const std::string& value) { return Override{key, value, key + "=" + value}; }

// tiny-gqa (models/tiny-gqa.yaml), per layer, elements:
//   q [256, 256] 65 536   k, v [64, 256] 16 384 each   o [256, 256] 65 536
//   gate, up [768, 256] 196 608 each   down [256, 768] 196 608
//   norms: input and post-attention [256], q_norm and k_norm [32]: 576
// globals: embed_tokens and lm_head [1000, 256] 256 000 each, final norm [256].
constexpr std::int64_t kNormBytes = 576 * 2;
constexpr std::int64_t kGlobalBytes = (2 * 256'000 + 256) * 2;  // 1 024 512
constexpr std::int64_t kLayers = 4;

}  // namespace

TEST(Precision, Fp8BlockAtTheSourceMovesFp8PlusScalesExactly) {
  // Megatron TP2 splits q (128 rows), o (128 columns), gate/up (384 rows), down (384 columns) on
  // 128-block bounds: FP8 on the wire, 1 byte per element, plus one FP32 scale per 128 x 128 block:
  //   elements 2 * 65 536 + 3 * 196 608 = 720 896
  //   blocks   q [2, 2] 4 + o [2, 2] 4 + gate [6, 2] 12 + up 12 + down [2, 6] 12 = 44 -> 176 B
  // It splits k and v (64 rows) into 32-row halves, inside a block: they travel in BF16,
  //   2 * 16 384 * 2 = 65 536 B, and the destination quantises them.
  // Per layer 720 896 + 176 + 65 536 + 1 152 = 787 760; the model 4 * 787 760 + 1 024 512.
  const auto sc = tiny();
  const std::int64_t per_layer = 720'896 + 44 * 4 + 65'536 + kNormBytes;
  const std::int64_t wire = kLayers * per_layer + kGlobalBytes;
  EXPECT_EQ(wire, 4'175'552);
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  EXPECT_EQ(ts.logical_bytes.value, wire);
  // vLLM TP1 x DP2: both destination GPUs hold the whole model.
  EXPECT_EQ(ts.bytes_needed.value, 2 * wire);
  Bytes pieces;
  for (const Piece& p : ts.pieces) pieces += p.bytes * sc.destination.rank_set(p.needers).size();
  EXPECT_EQ(pieces.value, 2 * wire);

  const TensorInfo* qp = sc.inventory.find("model.layers.0.self_attn.q_proj.weight");
  const TensorInfo* kp = sc.inventory.find("model.layers.0.self_attn.k_proj.weight");
  const TensorInfo* scale = sc.inventory.find("model.layers.0.self_attn.q_proj.weight_scale_inv");
  ASSERT_TRUE(qp && kp && scale);
  EXPECT_EQ(qp->dtype, DType::FP8);
  EXPECT_EQ(qp->quant.site, QuantSite::Source);
  EXPECT_EQ(qp->quant.scale, scale->id);
  EXPECT_EQ(kp->dtype, DType::BF16);
  EXPECT_EQ(kp->quant.site, QuantSite::Destination);
  EXPECT_EQ(scale->dtype, DType::FP32);
  EXPECT_EQ(scale->shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(scale->quant.scale_of, qp->id);
  EXPECT_EQ(sc.inventory.find("model.layers.0.input_layernorm.weight")->quant.format, QuantFormat::None);
  EXPECT_EQ(sc.inventory.find("model.embed_tokens.weight")->dtype, DType::BF16);
  // Each TP rank's scale shard is the blocks of its weight shard: q rows [0, 128) -> block row 0.
  const auto& shards = sc.source.shards(scale->id);
  ASSERT_EQ(shards.size(), 2u);
  EXPECT_EQ(to_string(shards[0].box), "[0:1, 0:2]");
  EXPECT_EQ(to_string(shards[1].box), "[1:2, 0:2]");

  const PrecisionSummary s = summarize_precision(sc.inventory);
  EXPECT_EQ(s.at_source, 5 * kLayers);
  EXPECT_EQ(s.at_destination, 2 * kLayers);
  EXPECT_EQ(s.wire_bytes.value, wire);
  EXPECT_EQ(s.model_bytes.value, 3'529'216 * 2);  // the BF16 model: 4 * 754 240 + 512 256 parameters
  EXPECT_EQ(sc.inventory.parameters(), 3'529'216);  // scale tensors are bytes, not parameters
}

TEST(Precision, ConversionWorkAndItsTimeByHand) {
  // Source: every GPU (TP2 x PP2 x DP2) holds half of q, o, gate, up, down of its two layers:
  //   elements 720 896 / 2 * 2 = 720 896, read 2 B + written 1 B each = 2 162 688 B, plus
  //   22 blocks per layer (q 1x2, o 2x1, gate 3x2, up 3x2, down 2x3) * 2 layers * 4 B = 176 B.
  // Destination: both GPUs convert k and v of all four layers:
  //   4 * 32 768 * 3 = 393 216 B, plus 2 blocks each * 2 tensors * 4 layers * 4 B = 64 B.
  const auto sc = tiny();
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  ASSERT_EQ(ts.conversion.source.size(), 8u);
  for (const auto& [g, b] : ts.conversion.source) EXPECT_EQ(b.value, 2'162'864) << "GPU " << g;
  ASSERT_EQ(ts.conversion.destination.size(), 2u);
  EXPECT_EQ(ts.conversion.destination[0].first, 8);
  for (const auto& [g, b] : ts.conversion.destination) EXPECT_EQ(b.value, 393'280) << "GPU " << g;
  EXPECT_EQ(ts.conversion.source_tensors, 5 * kLayers);
  EXPECT_EQ(ts.conversion.destination_tensors, 2 * kLayers);

  // DGX H100: 3.35 TB/s of HBM per GPU.
  EXPECT_EQ(sc.topology.gpu_memory_bandwidth(0).value, 3.35e12);
  StrategyParams p;
  p.strategy = Strategy::Direct;
  const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
  const Prediction pr = estimate(s, ts, sc.inventory, sc.topology, CostParams{});
  EXPECT_DOUBLE_EQ(pr.convert_source.value, 2'162'864 / 3.35e12);
  EXPECT_DOUBLE_EQ(pr.convert_destination.value, 393'280 / 3.35e12);
  EXPECT_DOUBLE_EQ(pr.time.value, pr.convert_source.value + std::max(pr.pipeline.value, pr.critical_path.value) +
                                      pr.overheads.value + pr.convert_destination.value);
}

TEST(Precision, SimulationAddsTheConversionPhases) {
  // The conversion phases ride on the closing flow: the operations' times do not change and the
  // makespan grows by exactly T_convert_source + T_convert_destination.
  const auto sc = tiny();
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  StrategyParams p;
  p.strategy = Strategy::DomainChain;
  const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
  const Prediction pr = estimate(s, ts, sc.inventory, sc.topology, CostParams{});
  ASSERT_GT(pr.convert_source.value, 0);
  ASSERT_GT(pr.convert_destination.value, 0);
  reshard::sim::ScheduleSimOptions without;
  without.overheads = pr.overheads;
  const auto base = reshard::sim::simulate_schedule(s, sc.topology, CostParams{}, without);
  const auto with = reshard::sim::simulate_schedule(s, sc.topology, CostParams{}, reshard::sim::closing_terms(pr));
  EXPECT_EQ(with.ops_makespan.value, base.ops_makespan.value);
  EXPECT_NEAR(with.makespan.value, base.makespan.value + pr.convert_source.value + pr.convert_destination.value,
              1e-15);
  EXPECT_EQ(with.convert_source.value, pr.convert_source.value);
  EXPECT_EQ(with.convert_destination.value, pr.convert_destination.value);
}

TEST(Precision, QuantizeAtTheDestinationMovesTheModelDtype) {
  // Every weight travels in BF16: the wire carries the BF16 model, 3 529 216 * 2 B; each destination
  // GPU converts all seven weights of four layers: 753 664 * 4 elements * 3 B, plus 48 blocks per
  // layer (q 4, k 2, v 2, o 4, gate 12, up 12, down 12) * 4 layers * 4 B.
  const auto sc = tiny({set("destination.precision.quantize_at", "destination")});
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  EXPECT_EQ(ts.logical_bytes.value, 3'529'216 * 2);
  EXPECT_TRUE(ts.conversion.source.empty());
  for (const auto& [g, b] : ts.conversion.destination) EXPECT_EQ(b.value, 753'664 * 4 * 3 + 48 * 4 * 4);
}

TEST(Precision, Mxfp8ScalesEveryThirtyTwoElementsOfARow) {
  // 1 x 32 blocks: row splits never cut one, and every column split of TP2 (o 128, down 384) is a
  // multiple of 32, so all seven weights are quantised at the source. Per layer 753 664 FP8 bytes
  // + 753 664 / 32 = 23 552 E8M0 scales + 1 152 B of norms.
  const auto sc = tiny({set("destination.precision.format", "mxfp8")});
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  EXPECT_EQ(ts.logical_bytes.value, kLayers * (753'664 + 23'552 + kNormBytes) + kGlobalBytes);
  const TensorInfo* scale = sc.inventory.find("model.layers.0.mlp.down_proj.weight_scale");
  ASSERT_TRUE(scale);
  EXPECT_EQ(scale->dtype, DType::E8M0);
  EXPECT_EQ(scale->shape, (std::vector<std::int64_t>{256, 24}));
  EXPECT_TRUE(ts.conversion.destination.empty());
}

TEST(Precision, BlockBf16ChangesNothing) {
  const auto sc = tiny({set("destination.precision.format", "bf16")});
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  EXPECT_EQ(ts.logical_bytes.value, 3'529'216 * 2);
  EXPECT_TRUE(ts.conversion.source.empty() && ts.conversion.destination.empty());
}

TEST(Precision, DestinationShardsThatCutABlockAreRefused) {
  // vLLM TP2 gives each rank one 32-row KV head of k_proj: inside a 128-row block.
  const auto msg = config_error([] { tiny({set("destination.tp", "2"), set("destination.dp", "1")}); });
  EXPECT_HAS(msg, "small-gqa-fp8.yaml:");
  EXPECT_HAS(msg, "destination.precision");
  EXPECT_HAS(msg, "tensor 'model.layers.0.self_attn.k_proj.weight': destination shard [0:32, 0:256] cuts the 128 x 128");
  // k_proj is part of vLLM's merged qkv_proj, where vLLM tolerates the cut: the refusal says so.
  EXPECT_HAS(msg, "vLLM accepts this in its merged qkv_proj / gate_up_proj layers, _maybe_allow_fp8_block_shape_mismatch");
}

TEST(Precision, BadPrecisionBlocksAreNamed) {
  EXPECT_HAS(config_error([] { tiny({set("destination.precision.classes", "[embedding]")}); }),
             "class embedding stays in the model dtype");
  EXPECT_HAS(config_error([] { tiny({set("destination.precision.classes", "[router, attention]")}); }),
             "class router stays");
  EXPECT_HAS(config_error([] { tiny({set("destination.precision.format", "int4")}); }), "unknown format 'int4'");
  EXPECT_HAS(config_error([] { tiny({set("destination.precision.quantize_at", "both")}); }),
             "expected source or destination");
  EXPECT_HAS(config_error([] { tiny({set("destination.precision.weight_block_size", "[128]")}); }),
             "two positive block extents");
  EXPECT_HAS(config_error([] { tiny({set("source.precision", "{format: fp8_block}")}); }),
             "precision describes the destination");
}

// ---- The executor's quantiser -------------------------------------------------------------------

TEST(E4M3, RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(q::e4m3(1.0f), 0x38);       // exponent 7 (2^0), mantissa 0
  EXPECT_EQ(q::e4m3(-3.0f), 0xC4);      // 1.5 * 2^1: sign, exponent 8, mantissa 4
  EXPECT_EQ(q::e4m3(448.0f), 0x7E);     // the largest finite value
  EXPECT_EQ(q::e4m3(1000.0f), 0x7E);    // saturates, never NaN
  EXPECT_EQ(q::e4m3(-INFINITY), 0xFE);
  EXPECT_EQ(q::e4m3(1.0625f), 0x38);    // halfway between 1 (m 0) and 1.125 (m 1): even, 1
  EXPECT_EQ(q::e4m3(1.1875f), 0x3A);    // halfway between 1.125 (m 1) and 1.25 (m 2): even, 1.25
  EXPECT_EQ(q::e4m3(std::ldexp(1.0f, -9)), 0x01);       // smallest subnormal
  EXPECT_EQ(q::e4m3(std::ldexp(1.0f, -10)), 0x00);      // halfway to 0: even, 0
  EXPECT_EQ(q::e4m3(std::ldexp(3.0f, -10)), 0x02);      // 1.5 * 2^-9: even, 2 * 2^-9
  EXPECT_EQ(q::e4m3(std::ldexp(15.5f, -10)), 0x08);     // 7.75 * 2^-9 rounds up to the smallest normal 2^-6
  EXPECT_EQ(q::e4m3(464.0f), 0x7E);     // halfway between 448 and 480 (not finite in E4M3): saturated
  // Every finite byte is its own value's encoding.
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7F) == 0x7F) continue;  // NaN
    EXPECT_EQ(q::e4m3(q::e4m3_value(static_cast<std::uint8_t>(b))), b) << b;
  }
}

namespace {
TensorInfo weight(std::vector<std::int64_t> shape, QuantFormat f, std::int64_t br, std::int64_t bc) {
  TensorInfo t;
  t.id = 3;
  t.name = "w";
  t.shape = std::move(shape);
  t.quant.format = f;
  t.quant.block_rows = br;
  t.quant.block_cols = bc;
  return t;
}
Box box(std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) { return Box{{{r0, r1}, {c0, c1}}}; }
}  // namespace

TEST(Quantizer, Fp8BlockScaleIsAmaxOver448) {
  // One 2 x 2 block with amax 448: s = 1 exactly, so q = e4m3(v).
  const TensorInfo w = weight({2, 2}, QuantFormat::Fp8Block, 2, 2);
  std::vector<unsigned char> payload(4), scales;
  q::quantize_box(w, box(0, 2, 0, 2), {448.0f, 1.0625f, -3.0f, 0.001f}, payload.data(), scales);
  EXPECT_EQ(payload, (std::vector<unsigned char>{0x7E, 0x38, 0xC4, 0x01}));  // 0.001 * 2^9 = 0.512 -> 1
  ASSERT_EQ(scales.size(), 4u);
  float s = 0;
  std::memcpy(&s, scales.data(), 4);
  EXPECT_EQ(s, 1.0f);
  // amax 2: s = 2 / 448, and 2 / s = 448 -> the largest value.
  q::quantize_box(w, box(0, 2, 0, 2), {2.0f, -2.0f, 0.0f, 0.0f}, payload.data(), scales);
  std::memcpy(&s, scales.data(), 4);
  EXPECT_EQ(s, 2.0f / 448.0f);
  EXPECT_EQ(payload[0], 0x7E);
  EXPECT_EQ(payload[1], 0xFE);
  EXPECT_EQ(payload[2], 0x00);
  // An all-zero block: amax clamped at 1e-4 (DeepGEMM), so s = 1e-4 / 448, not 1; the bytes are 0.
  q::quantize_box(w, box(0, 2, 0, 2), {0.0f, 0.0f, -0.0f, 0.0f}, payload.data(), scales);
  std::memcpy(&s, scales.data(), 4);
  EXPECT_EQ(s, 1e-4f / 448.0f);
  EXPECT_EQ(payload, (std::vector<unsigned char>{0x00, 0x00, 0x80, 0x00}));
}

// DeepGEMM's per_block_cast_to_fp8 multiplies by 448 / amax (FP32); dividing by amax / 448 rounds
// differently for some values. Hand-worked: amax 1, v = 2^-16. Multiplied: 2^-16 x 448 = 3.5 x 2^-9
// exactly, a subnormal tie -> even, 4 x 2^-9 (byte 0x04). Divided: FP32(1 / 448) is a little more
// than 1 / 448, so v / s = 3.49999... x 2^-9 -> 3 x 2^-9 (byte 0x03), the byte reshard used to write.
// And with amax 3 (448 / 3 inexact) every BF16 value of [0, 3] is e4m3(v * FP32(448 / 3)).
TEST(Quantizer, Fp8BlockMultipliesBy448OverAmaxAsDeepGemm) {
  const TensorInfo w = weight({1, 2}, QuantFormat::Fp8Block, 1, 2);
  std::vector<unsigned char> payload(2), scales;
  const float v = std::ldexp(1.0f, -16);
  q::quantize_box(w, box(0, 1, 0, 2), {1.0f, v}, payload.data(), scales);
  EXPECT_EQ(payload[1], 0x04);
  EXPECT_EQ(q::e4m3(v / (1.0f / 448.0f)), 0x03);  // the division form
  const float factor = 448.0f / 3.0f;
  int checked = 0;
  for (std::uint32_t b = 0; b < 0x8000; ++b) {  // the non-negative BF16 bit patterns
    const float x = q::bf16_value(static_cast<std::uint16_t>(b));
    if (!(x <= 3.0f)) continue;
    q::quantize_box(w, box(0, 1, 0, 2), {3.0f, x}, payload.data(), scales);
    ASSERT_EQ(payload[1], q::e4m3(x * factor)) << x;
    ++checked;
  }
  EXPECT_GT(checked, 16000);
}

// MXFP8 rounds a tie away from zero as the OCP MX reference does; FP8 block (torch's cast) to even.
TEST(E4M3, TiesAwayFromZeroForMxfp8) {
  EXPECT_EQ(q::e4m3(1.0625f, q::Ties::AwayFromZero), 0x39);  // halfway 1 / 1.125: away, 1.125
  EXPECT_EQ(q::e4m3(-1.0625f, q::Ties::AwayFromZero), 0xB9);
  EXPECT_EQ(q::e4m3(1.1875f, q::Ties::AwayFromZero), 0x3A);  // halfway 1.125 / 1.25: away, 1.25
  EXPECT_EQ(q::e4m3(std::ldexp(1.0f, -10), q::Ties::AwayFromZero), 0x01);  // subnormal tie: up
  EXPECT_EQ(q::e4m3(1.07f, q::Ties::AwayFromZero), 0x39);  // not a tie: nearest
  // In a block: amax 256 -> X = 8 - 8 = 0, factor 1, so 1.0625 is a tie -> 1.125 (0x39).
  const TensorInfo w = weight({1, 32}, QuantFormat::Mxfp8, 1, 32);
  std::vector<float> v(32, 0.0f);
  v[0] = 256.0f;
  v[1] = 1.0625f;
  std::vector<unsigned char> payload(32), scales;
  q::quantize_box(w, box(0, 1, 0, 32), v, payload.data(), scales);
  EXPECT_EQ(scales, (std::vector<unsigned char>{127}));
  EXPECT_EQ(payload[1], 0x39);
}

TEST(Quantizer, Mxfp8ScaleIsAPowerOfTwoFromTheLargestExponent) {
  // amax 3: floor(log2 3) = 1, X = 1 - 8 = -7, E8M0 byte 127 - 7 = 120; 3 * 2^7 = 384 = 1.5 * 2^8.
  const TensorInfo w = weight({1, 64}, QuantFormat::Mxfp8, 1, 32);
  std::vector<float> v(64, 0.0f);
  v[0] = 3.0f;
  v[1] = -0.5f;    // 0.5 * 2^7 = 64 = 2^6: byte (6 + 7) << 3 = 0x68, negative 0xE8
  v[32] = 1.0f;    // second block: amax 1, X = -8, byte 119; 1 * 2^8 = 256: 0x78
  std::vector<unsigned char> payload(64), scales;
  q::quantize_box(w, box(0, 1, 0, 64), v, payload.data(), scales);
  EXPECT_EQ(scales, (std::vector<unsigned char>{120, 119}));
  EXPECT_EQ(payload[0], 0x7C);
  EXPECT_EQ(payload[1], 0xE8);
  EXPECT_EQ(payload[2], 0x00);
  EXPECT_EQ(payload[32], 0x78);
}

TEST(Quantizer, MisalignedBoxIsRefused) {
  const TensorInfo w = weight({256, 256}, QuantFormat::Fp8Block, 128, 128);
  std::vector<unsigned char> payload(32 * 256), scales;
  EXPECT_THROW(q::quantize_box(w, box(0, 32, 0, 256), std::vector<float>(32 * 256, 1.0f), payload.data(), scales),
               reshard::exec::ExecError);
}

TEST(Quantizer, ReferenceAgreesWithTheShardQuantizerOnEveryByte) {
  // The reference quantises element by element from whole blocks of the source values; a shard
  // holding whole blocks, quantised as one, gives the same bytes. A 300 x 200 weight (partial
  // blocks at both ends), the shard [128, 300) x [128, 200).
  for (const auto f : {QuantFormat::Fp8Block, QuantFormat::Mxfp8}) {
    const bool mx = f == QuantFormat::Mxfp8;
    TensorInfo w = weight({300, 200}, f, mx ? 1 : 128, mx ? 32 : 128);
    const Box b = mx ? box(128, 300, 128, 200) : box(128, 300, 128, 200);
    std::vector<float> v;
    for (std::int64_t r = 128; r < 300; ++r)
      for (std::int64_t c = 128; c < 200; ++c)
        v.push_back(q::bf16_value(q::weight_bf16(q::pattern_word(w.id, r * 200 + c))));
    std::vector<unsigned char> payload(v.size()), scales;
    q::quantize_box(w, b, v, payload.data(), scales);
    q::ReferenceQuantizer ref(w);
    std::size_t k = 0;
    for (std::int64_t r = 128; r < 300; ++r)
      for (std::int64_t c = 128; c < 200; ++c, ++k) ASSERT_EQ(payload[k], ref.payload(r * 200 + c)) << r << " " << c;
    const Box sb = scale_box(b, w.quant);
    const std::int64_t scale_cols = mx ? 7 : 2, ss = mx ? 1 : 4;
    k = 0;
    for (std::int64_t i = sb.dims[0].lo; i < sb.dims[0].hi; ++i)
      for (std::int64_t j = sb.dims[1].lo; j < sb.dims[1].hi; ++j, ++k) {
        unsigned char want[4];
        ref.scale_bytes(i * scale_cols + j, want);
        EXPECT_EQ(std::memcmp(want, scales.data() + k * ss, static_cast<std::size_t>(ss)), 0) << i << " " << j;
      }
  }
}

// The amax floor of fp8_block (DeepGEMM's clamp(1e-4)) on a block that is not all zeros: amax 5e-5,
// below the floor. The floor makes the factor 448 / 1e-4 = 4.48e6 (FP32) and the scale 1e-4 / 448:
//   5e-5 x 4.48e6 = 224 = 1.75 x 2^7:   exponent 7 + 7 = 14, mantissa 6 -> 0x76
//   -2.5e-5 x 4.48e6 = -112 = -1.75 x 2^6: exponent 13, mantissa 6 -> 0x80 | 0x6E = 0xEE
// A floor applied only to an all-zero block (the plausible wrong rule, tried) gives factor
// 448 / 5e-5: 448 -> 0x7E and -224 -> 0xF6, and the scale 5e-5 / 448. Above the floor (amax 2e-4)
// nothing is clamped: 2e-4 -> 448 (0x7E), scale 2e-4 / 448.
TEST(Quantizer, Fp8BlockAmaxFloorOnANonZeroBlock) {
  const TensorInfo w = weight({1, 2}, QuantFormat::Fp8Block, 1, 2);
  std::vector<unsigned char> payload(2), scales;
  float s = 0;
  q::quantize_box(w, box(0, 1, 0, 2), {5e-5f, -2.5e-5f}, payload.data(), scales);
  std::memcpy(&s, scales.data(), 4);
  EXPECT_EQ(payload, (std::vector<unsigned char>{0x76, 0xEE}));
  EXPECT_EQ(s, 1e-4f / 448.0f);
  q::quantize_box(w, box(0, 1, 0, 2), {2e-4f, 1e-4f}, payload.data(), scales);
  std::memcpy(&s, scales.data(), 4);
  EXPECT_EQ(payload[0], 0x7E);
  EXPECT_EQ(s, 2e-4f / 448.0f);
  // MXFP8 has no floor: amax 5e-5 (2^-15 x 1.64) -> X = -15 - 8 = -23, byte 104; 5e-5 x 2^23 = 419.4
  // -> 416 = 1.625 x 2^8 (exponent 15, mantissa 5): 0x7D.
  const TensorInfo mx = weight({1, 32}, QuantFormat::Mxfp8, 1, 32);
  std::vector<float> v(32, 0.0f);
  v[0] = 5e-5f;
  std::vector<unsigned char> mp(32), ms;
  q::quantize_box(mx, box(0, 1, 0, 32), v, mp.data(), ms);
  EXPECT_EQ(ms, (std::vector<unsigned char>{104}));
  EXPECT_EQ(mp[0], 0x7D);
}

namespace {
// A quantiser written again from quantize.hpp's description, sharing no code with quantize.cpp (not
// block_scale, not e4m3): the E4M3 byte found by searching every finite byte for the nearest value,
// and each format's scale rule.
namespace independent {
double e4m3_value(int b) {
  const int e = (b >> 3) & 15, m = b & 7;
  return e == 0 ? m * std::ldexp(1.0, -9) : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
}
std::uint8_t e4m3(float x, bool ties_to_even) {
  if (std::isnan(x)) return 0x7F;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 448.0) return sign | 0x7E;
  int best = 0;
  double best_distance = a;
  for (int b = 1; b <= 0x7E; ++b) {
    const double d = std::fabs(e4m3_value(b) - a);
    // A tie between b - 1 and b: to the even byte (the even mantissa), or away from zero (b).
    if (d < best_distance || (d == best_distance && (!ties_to_even || b % 2 == 0))) {
      best = b;
      best_distance = d;
    }
  }
  return static_cast<std::uint8_t>(sign | best);
}
// Quantises one block in place of the bytes `payload` (same order as values) and returns its scale
// bytes (4 FP32 or 1 E8M0).
std::vector<unsigned char> block(QuantFormat f, const std::vector<float>& values, std::vector<unsigned char>& payload) {
  float amax = 0;
  for (float x : values) amax = std::max(amax, std::fabs(x));
  float factor = 1;
  std::vector<unsigned char> scale;
  if (f == QuantFormat::Fp8Block) {
    const float a = amax < 1e-4f ? 1e-4f : amax;
    factor = 448.0f / a;
    const float s = a / 448.0f;
    scale.resize(4);
    std::memcpy(scale.data(), &s, 4);
  } else {
    const int x = amax == 0 ? -127 : std::clamp(std::ilogb(amax) - 8, -127, 127);
    factor = std::ldexp(1.0f, -x);
    scale.push_back(static_cast<unsigned char>(x + 127));
  }
  payload.clear();
  for (float x : values) payload.push_back(e4m3(x * factor, f == QuantFormat::Fp8Block));
  return scale;
}
}  // namespace independent

// Random blocks across the magnitudes a weight can have, from 2^-40 to 2^12: below the fp8_block
// floor, around it, subnormal after scaling, zeros and negative zeros. Half the blocks hold amax =
// 2^e exactly, so that the fp8_block factor 448 / 2^e is exact and values land on E4M3 ties once
// scaled: 3 x 2^(e + E - 10) x 448 / 2^e = 1.3125 x 2^E, halfway between 1.25 and 1.375 x 2^E, and
// 2^(e - 16) x 448 / 2^e = 3.5 x 2^-9, halfway between two subnormals (a factor one ulp off, as
// 1 / (amax / 448) is, rounds these the other way).
std::vector<float> random_block(std::mt19937& rng, std::size_t n) {
  const int exponent = static_cast<int>(rng() % 53) - 40;
  const bool power_of_two = rng() % 2 == 0;
  std::vector<float> v(n);
  for (auto& x : v) {
    switch (rng() % 8) {
      case 0: x = 0.0f; break;
      case 1: x = -0.0f; break;
      case 2: x = std::ldexp(3.0f, exponent + static_cast<int>(rng() % 14) - 16); break;  // 1.3125 x 2^E after scaling
      case 3: x = std::ldexp(1.0f, exponent - 16); break;                                 // 3.5 x 2^-9 after scaling
      default:
        x = power_of_two ? std::ldexp(static_cast<float>(rng() % 65536), exponent - 16)
                         : std::ldexp(static_cast<float>(rng() % 65536) / 65536.0f, exponent + static_cast<int>(rng() % 4));
    }
    if (rng() % 2) x = -x;
  }
  if (power_of_two) v[0] = std::ldexp(rng() % 2 ? 1.0f : -1.0f, exponent);  // amax, every other |x| below it
  return v;
}
}  // namespace

// The shard quantiser and the check's reference against the independent quantiser above, byte for
// byte, payload and scales: a wrong scale rule shared by quantize_box and ReferenceQuantizer
// (block_scale: the floor applied only to zero blocks, factor 1 / (amax / 448), an MX exponent one
// too high, each tried) passes ReferenceAgreesWithTheShardQuantizerOnEveryByte and fails here.
TEST(Quantizer, AgreesWithAnIndependentQuantizerOnRandomBlocks) {
  std::mt19937 rng(51);
  for (const auto f : {QuantFormat::Fp8Block, QuantFormat::Mxfp8}) {
    const bool mx = f == QuantFormat::Mxfp8;
    const std::int64_t br = mx ? 1 : 2, bc = mx ? 32 : 4;
    const TensorInfo w = weight({br, bc}, f, br, bc);
    for (int trial = 0; trial < 4000; ++trial) {
      const auto v = random_block(rng, static_cast<std::size_t>(br * bc));
      std::vector<unsigned char> got(v.size()), got_scale, want;
      q::quantize_box(w, box(0, br, 0, bc), v, got.data(), got_scale);
      const auto want_scale = independent::block(f, v, want);
      ASSERT_EQ(got, want) << (mx ? "mxfp8" : "fp8_block") << " trial " << trial << " first value " << v[0];
      ASSERT_EQ(got_scale, want_scale) << (mx ? "mxfp8" : "fp8_block") << " trial " << trial;
    }
  }
  // The check's reference on a weight of the pattern's values (partial blocks at the edges).
  for (const auto f : {QuantFormat::Fp8Block, QuantFormat::Mxfp8}) {
    const bool mx = f == QuantFormat::Mxfp8;
    const std::int64_t rows = 130, cols = 200, br = mx ? 1 : 128, bc = mx ? 32 : 128;
    const TensorInfo w = weight({rows, cols}, f, br, bc);
    q::ReferenceQuantizer ref(w);
    const std::int64_t scale_cols = (cols + bc - 1) / bc;
    for (std::int64_t bi = 0; bi < (rows + br - 1) / br; ++bi)
      for (std::int64_t bj = 0; bj < scale_cols; ++bj) {
        std::vector<float> v;
        std::vector<std::int64_t> index;
        for (std::int64_t r = bi * br; r < std::min(rows, (bi + 1) * br); ++r)
          for (std::int64_t c = bj * bc; c < std::min(cols, (bj + 1) * bc); ++c) {
            index.push_back(r * cols + c);
            v.push_back(q::bf16_value(q::weight_bf16(q::pattern_word(w.id, r * cols + c))));
          }
        std::vector<unsigned char> want;
        const auto want_scale = independent::block(f, v, want);
        std::vector<unsigned char> got_scale(want_scale.size());
        ref.scale_bytes(bi * scale_cols + bj, got_scale.data());
        ASSERT_EQ(got_scale, want_scale) << bi << " " << bj;
        for (std::size_t k = 0; k < index.size(); ++k) ASSERT_EQ(ref.payload(index[k]), want[k]) << index[k];
      }
  }
}

// ---- MXFP4: gpt-oss's experts served as released (two E2M1 values a byte, an E8M0 scale per 32) --

namespace {
const std::filesystem::path kGptOss = std::filesystem::path(RESHARD_SOURCE_DIR) / "scenarios/small-gpt-oss.yaml";
std::vector<Override> mxfp4_experts(const std::string& site = "source") {
  return {set("destination.precision.format", "mxfp4"), set("destination.precision.classes", "[expert_ffn]"),
          set("destination.precision.quantize_at", site)};
}
}  // namespace

TEST(Precision, Mxfp4PacksTwoValuesAByteWithAScalePerThirtyTwo) {
  // tiny-gpt-oss: 2 layers x 8 experts (H 256, I 256). Megatron EP4 x ETP1 holds experts whole, so
  // each is quantised at the source. Per expert (elements -> wire bytes):
  //   gate_up [512, 256] 131 072 -> 65 536 B of FP4 pairs + scales [512, 8] 4 096 B
  //   down    [256, 256]  65 536 -> 32 768 B + scales [256, 8] 2 048 B
  //   gate_up_proj_bias [512] and down_proj_bias [256] stay BF16 (one dimension): 1 536 B
  // = 105 984 B against 394 752 B in BF16.
  const auto bf16 = load_scenario(kGptOss);
  const auto sc = load_scenario(kGptOss, mxfp4_experts());
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  EXPECT_EQ(ts.logical_bytes.value, bf16.inventory.bytes().value - 16 * (394'752 - 105'984));
  const TensorInfo* gu = sc.inventory.find("model.layers.1.mlp.experts.5.gate_up_proj");
  const TensorInfo* scale = sc.inventory.find("model.layers.1.mlp.experts.5.gate_up_proj_scale");
  ASSERT_TRUE(gu && scale);
  EXPECT_EQ(gu->dtype, DType::FP4x2);
  EXPECT_EQ(gu->shape, (std::vector<std::int64_t>{512, 128}));  // bytes: the row halved
  EXPECT_EQ(gu->quant.packed, 2);
  EXPECT_EQ(gu->quant.site, QuantSite::Source);
  EXPECT_EQ(scale->dtype, DType::E8M0);
  EXPECT_EQ(scale->shape, (std::vector<std::int64_t>{512, 8}));
  EXPECT_EQ(sc.inventory.find("model.layers.1.mlp.experts.5.down_proj_bias")->dtype, DType::BF16);
  EXPECT_EQ(sc.inventory.find("model.layers.1.self_attn.q_proj.weight")->dtype, DType::BF16);
  // The model is unchanged: its parameters, and its bytes in the model dtype.
  EXPECT_EQ(sc.inventory.parameters(), bf16.inventory.parameters());
  EXPECT_EQ(summarize_precision(sc.inventory).model_bytes, bf16.inventory.bytes());
  // vLLM TP4: MoE TP rank f holds intermediate [64f, 64f + 64): down's columns [32f, 32f + 32) bytes,
  // its scale's columns [2f, 2f + 2).
  const TensorInfo* down = sc.inventory.find("model.layers.0.mlp.experts.0.down_proj");
  const TensorInfo* down_scale = sc.inventory.find("model.layers.0.mlp.experts.0.down_proj_scale");
  ASSERT_EQ(sc.destination.shards(down->id).size(), 4u);
  EXPECT_EQ(to_string(sc.destination.shards(down->id)[1].box), "[0:256, 32:64]");
  EXPECT_EQ(to_string(sc.destination.shards(down_scale->id)[1].box), "[0:256, 2:4]");
  // Source conversion: per expert 196 608 elements read in BF16 (2 B) and written as 98 304 B of FP4
  // with 6 144 E8M0 scales -> 497 664 B. Megatron's 8 GPUs are EP4 x EDP2: each holds 2 experts of
  // each of the 2 layers, and converts those 4.
  const ConversionWork w = conversion_work(sc.inventory, sc.source, sc.destination);
  EXPECT_EQ(w.source_tensors, 2 * 8 * 2);
  EXPECT_EQ(w.destination_tensors, 0);
  ASSERT_EQ(w.source.size(), 8u);
  EXPECT_EQ(w.source.front().second.value, 4 * 497'664);
  EXPECT_EQ(w.source_bytes.value, 8 * 4 * 497'664);
}

TEST(Precision, Mxfp4ExpertsSplitInWholeBlocksOnVllm) {
  // vLLM with TP2 x DP3 data parallel: MoE TP over 6 ranks. Served in MXFP4, the gpt-oss loader
  // cuts the intermediate (8 blocks of 32) in chunks of ceil(8 / 6) = 2 blocks: ranks 0-3 hold 64
  // rows each, ranks 4 and 5 none. In BF16 the chunk is ceil(256 / 6) = 43 rows, which would cut a
  // block: without the block rule the precision change would be refused.
  auto sets = mxfp4_experts();
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"destination.tp", "2"}, {"destination.dp", "3"}, {"destination.dp_mode", "data_parallel"},
           {"destination.gpus", "8-13"}})
    sets.push_back(set(k, v));
  const auto sc = load_scenario(kGptOss, sets);
  const TensorInfo* down = sc.inventory.find("model.layers.0.mlp.experts.3.down_proj");
  const auto& shards = sc.destination.shards(down->id);
  ASSERT_EQ(shards.size(), 4u);
  for (std::size_t f = 0; f < 4; ++f)
    EXPECT_EQ(shards[f].box.dims[1].lo, static_cast<std::int64_t>(32 * f)) << f;  // bytes: 64 elements each
  const TensorInfo* gu = sc.inventory.find("model.layers.0.mlp.experts.3.gate_up_proj");
  EXPECT_EQ(to_string(sc.destination.shards(gu->id)[3].box), "[384:512, 0:128]");
  // The same deployment in BF16 keeps the 43-row chunks (ranks 0-4 43 rows, rank 5 41).
  std::vector<Override> bf16(sets.begin() + 3, sets.end());
  const auto plain = load_scenario(kGptOss, bf16);
  const TensorInfo* d = plain.inventory.find("model.layers.0.mlp.experts.3.down_proj");
  ASSERT_EQ(plain.destination.shards(d->id).size(), 6u);
  EXPECT_EQ(to_string(plain.destination.shards(d->id)[5].box), "[0:256, 215:256]");
}

TEST(Precision, Mxfp4AtTheDestinationMovesBf16AndConvertsThere) {
  // Every expert weight travels in BF16; the destination writes FP4 pairs and E8M0 scales: per
  // expert 196 608 elements x 2 B + 98 304 B + 6 144 B = 497 664 B, held by vLLM's 8 GPUs in 8
  // MoE TP4 quarters over 2 engines: each GPU 1/4 of 16 experts' weights.
  const auto bf16 = load_scenario(kGptOss);
  const auto sc = load_scenario(kGptOss, mxfp4_experts("destination"));
  EXPECT_EQ(plan(sc.inventory, sc.source, sc.destination).logical_bytes, bf16.inventory.bytes());
  const ConversionWork w = conversion_work(sc.inventory, sc.source, sc.destination);
  EXPECT_EQ(w.destination_tensors, 32);
  EXPECT_EQ(w.destination_bytes.value, 2 * 16 * (196'608 * 2 + 98'304 + 6'144));
  EXPECT_EQ(w.destination.size(), 8u);
}

TEST(Precision, Mxfp4AtTheSourceIsNotExecuted) {
  // The runners' quantiser writes FP8: a weight quantised to MXFP4 at the source is refused before
  // anything moves, naming the way that runs (quantize_at: destination).
  const auto sc = load_scenario(kGptOss, mxfp4_experts());
  const TransferSet ts = plan(sc.inventory, sc.source, sc.destination);
  StrategyParams p;
  p.strategy = strategy_named("direct");
  const Schedule s = build_schedule(ts, sc.inventory, sc.source, sc.destination, sc.topology, p);
  const auto rp = reshard::exec::make_run_plan(sc, ts, s);
  try {
    (void)reshard::exec::execute(rp, {});
    ADD_FAILURE();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("does not quantise to MXFP4"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)load_scenario(kGptOss, {set("destination.precision.format", "mxfp4"),
                                            set("destination.precision.classes", "[expert_ffn]"),
                                            set("destination.precision.weight_block_size", "[1, 32]")}),
               ConfigError);
}
