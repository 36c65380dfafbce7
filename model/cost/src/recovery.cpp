#include "reshard/model/recovery.hpp"

#include <algorithm>
#include <cmath>

namespace reshard::model {

Seconds RecoveryTerms::init(std::int64_t ranks) const { return init_fixed + init_per_rank * static_cast<double>(ranks); }

Seconds RecoveryTerms::shrink(std::int64_t ranks) const {
  return shrink_fixed + shrink_per_doubling * std::log2(static_cast<double>(std::max<std::int64_t>(ranks, 1)));
}

FailureCost price_failure(const FailureInputs& in, const RecoveryTerms& terms) {
  const double left = 1 - std::clamp(in.done, 0.0, 1.0);
  FailureCost c;
  c.rebuild = {in.fail_at, terms.detect, terms.init(in.survivor_ranks), in.survivors_refit, in.survivors_bytes};
  c.resume = {in.fail_at, terms.detect, terms.shrink(in.ranks), in.survivors_refit * left,
              Bytes{static_cast<std::int64_t>(std::llround(in.survivors_bytes.as_double() * left))}};
  return c;
}

}  // namespace reshard::model
