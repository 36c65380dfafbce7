// Internal to the simulator: the pieces of colour refinement that the symmetry quotients share
// (flow_quotient.hpp on flows, op_quotient.hpp on the operations of a schedule).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "reshard/sim/flow_sim.hpp"
#include "tolerances.hpp"

namespace reshard::sim::refinement {

// Once more than 1/kRecomputeAllDivisor of the items (ops, flows) have moved, every predecessor
// sum is recomputed in order: cheaper then than scattered updates through the successors.
inline constexpr std::size_t kRecomputeAllDivisor = 4;

// Salts of the two quotients' hashes (flow_quotient.cpp, op_quotient.cpp) shared by both: a link's
// colour and a predecessor's.
inline constexpr std::uint64_t kLinkSalt = 0x13198a2e03707344ull, kPredSalt = 0xa4093822299f31d0ull;

inline std::uint64_t mix64(std::uint64_t x) {  // splitmix64's finalizer: a bijection that scatters bits
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline std::uint64_t bits(double x) {
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// The bits of a non-negative finite x rounded to tolerance::kAlikeSignificantBits significant bits:
// equal for amounts the quotient takes as alike (tolerances.hpp).
inline std::uint64_t alike_bits(double x) {
  constexpr int kDropped = 52 - tolerance::kAlikeSignificantBits;
  const std::uint64_t u = bits(x) + (std::uint64_t{1} << (kDropped - 1));
  return u & ~((std::uint64_t{1} << kDropped) - 1);
}

// Dense numbers 0, 1, ... for distinct keys (previous colour, h1, h2), in order of first appearance:
// open addressing with linear probing, doubled when half full.
class Numbering {
 public:
  void reset(std::size_t expected) {
    std::size_t capacity = 1024;
    while (capacity < 2 * expected) capacity *= 2;
    slots_.assign(capacity, Slot{});
    count_ = 0;
  }
  static std::uint64_t hash(std::uint32_t colour, std::uint64_t h1, std::uint64_t h2) {
    return mix64(h1 ^ mix64(h2 + colour));
  }
  std::int32_t number(std::uint32_t colour, std::uint64_t h1, std::uint64_t h2) {
    return number(colour, h1, h2, hash(colour, h1, h2));
  }
  // With the key's hash computed beforehand (see prefetch).
  std::int32_t number(std::uint32_t colour, std::uint64_t h1, std::uint64_t h2, std::uint64_t key_hash) {
    if (2 * (static_cast<std::size_t>(count_) + 1) > slots_.size()) grow();
    const std::int32_t n = insert(Slot{h1, h2, colour, count_}, key_hash);
    if (n == count_) ++count_;
    return n;
  }
  // Brings the first slot of a key into the cache ahead of numbering it: a table of hundreds of
  // thousands of keys is a cache miss per lookup, and a batch in flight hides most of them.
  void prefetch(std::uint64_t key_hash) const { __builtin_prefetch(&slots_[key_hash & (slots_.size() - 1)]); }
  std::int32_t count() const { return count_; }

 private:
  struct Slot {
    std::uint64_t h1 = 0, h2 = 0;
    std::uint32_t colour = 0;
    std::int32_t number = -1;  // -1: empty
  };
  std::int32_t insert(const Slot& s, std::uint64_t key_hash) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = key_hash & mask;; i = (i + 1) & mask) {
      Slot& at = slots_[i];
      if (at.number < 0) {
        at = s;
        return s.number;
      }
      if (at.h1 == s.h1 && at.h2 == s.h2 && at.colour == s.colour) return at.number;
    }
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old)
      if (s.number >= 0) insert(s, hash(s.colour, s.h1, s.h2));
  }
  std::vector<Slot> slots_;
  std::int32_t count_ = 0;
};

// A multiset of colours, summarized by two sums of salted colour hashes (kept up to date as
// members change colour).
struct Sum {
  std::uint64_t a = 0, b = 0;
  bool operator==(const Sum& o) const { return a == o.a && b == o.b; }
  static std::uint64_t ha(std::int32_t colour, std::uint64_t salt) { return mix64(static_cast<std::uint64_t>(colour) ^ salt); }
  static std::uint64_t hb(std::int32_t colour, std::uint64_t salt) {
    return mix64((static_cast<std::uint64_t>(colour) << 32) + salt);
  }
  // What a member of colour `colour` adds to a multiset under `salt`.
  static Sum of(std::int32_t colour, std::uint64_t salt) { return {ha(colour, salt), hb(colour, salt)}; }
  // What a member moving from colour `from` to `to` adds (mod 2^64); the same for every multiset
  // it is in under one salt, so it is computed once per move.
  static Sum change(std::int32_t from, std::int32_t to, std::uint64_t salt) {
    return {ha(to, salt) - ha(from, salt), hb(to, salt) - hb(from, salt)};
  }
  void add(const Sum& change) {
    a += change.a;
    b += change.b;
  }
};

// One side of the refinement (flows or links): the colour of each element, the size of each cell,
// and the signature its members had when the cell got them. An element whose signature may have
// changed is marked; split() regroups the marked elements of each cell by signature.
class Side {
 public:
  Side(std::vector<std::int32_t>& colour, std::int32_t cells) : colour_(colour) {
    size_.assign(static_cast<std::size_t>(cells), 0);
    signature_.assign(static_cast<std::size_t>(cells), Sum{});
    has_signature_.assign(static_cast<std::size_t>(cells), 0);
    for (auto c : colour_) ++size_[c];
    stamp_.assign(colour_.size(), 0);
    // The first round marks every element: room for all of them up front, not by doubling.
    marked_.reserve(colour_.size());
    group_of_.reserve(colour_.size());
    moved_.reserve(colour_.size());
  }
  std::size_t cells() const { return size_.size(); }
  // Records each cell's signature from its members, when they share it by construction (split()
  // needs it for cells whose members are not all marked).
  template <class SignatureOf>
  void set_signatures(SignatureOf&& signature_of) {
    for (std::size_t e = 0; e < colour_.size(); ++e) {
      signature_[colour_[e]] = signature_of(static_cast<std::int32_t>(e));
      has_signature_[colour_[e]] = 1;
    }
  }
  void mark(std::int32_t e) {
    if (stamp_[e] != round_) {
      stamp_[e] = round_;
      marked_.push_back(e);
    }
  }
  // Regroups the marked elements by (cell, signature). A group stays in its cell when its
  // signature is the cell's (the unmarked members have that one), or when every member of the cell
  // is marked, none has the cell's signature and it is the cell's largest group; any other group
  // becomes a new cell. So a new cell is always a real split. Returns the elements that changed
  // cell, each with its old cell.
  template <class SignatureOf>
  const std::vector<std::pair<std::int32_t, std::int32_t>>& split(SignatureOf&& signature_of) {
    moved_.clear();
    groups_.clear();
    group_of_.clear();
    numbering_.reset(std::min<std::size_t>(marked_.size(), 4096));  // grows with the groups, not the marked
    // The signatures and hashes of the next kAhead marked elements are in flight (their slots
    // prefetched) while one is numbered.
    constexpr std::size_t kAhead = 16;
    struct Pending {
      Sum signature;
      std::uint64_t hash;
    };
    Pending pending[kAhead];
    auto start = [&](std::size_t i) {
      const std::int32_t e = marked_[i];
      Pending& p = pending[i % kAhead];
      p.signature = signature_of(e);
      p.hash = Numbering::hash(static_cast<std::uint32_t>(colour_[e]), p.signature.a, p.signature.b);
      numbering_.prefetch(p.hash);
    };
    const std::size_t m = marked_.size();
    for (std::size_t i = 0; i < std::min(kAhead, m); ++i) start(i);
    for (std::size_t i = 0; i < m; ++i) {
      const std::int32_t e = marked_[i];
      const Pending p = pending[i % kAhead];
      if (i + kAhead < m) start(i + kAhead);
      const auto g = numbering_.number(static_cast<std::uint32_t>(colour_[e]), p.signature.a, p.signature.b, p.hash);
      if (g == static_cast<std::int32_t>(groups_.size())) groups_.push_back({colour_[e], p.signature, 0, -1});
      ++groups_[g].count;
      group_of_.push_back(g);
    }
    marked_in_cell_.resize(size_.size(), 0);
    largest_.resize(size_.size(), -1);
    matched_.resize(size_.size(), 0);
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      const Group& gr = groups_[g];
      marked_in_cell_[gr.cell] += gr.count;
      if (largest_[gr.cell] < 0 || groups_[largest_[gr.cell]].count < gr.count) largest_[gr.cell] = static_cast<std::int32_t>(g);
      if (has_signature_[gr.cell] && signature_[gr.cell] == gr.signature) matched_[gr.cell] = 1;
    }
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      Group& gr = groups_[g];
      const bool all_marked = marked_in_cell_[gr.cell] == size_[gr.cell];
      const bool keeps = (has_signature_[gr.cell] && signature_[gr.cell] == gr.signature) ||
                         (all_marked && !matched_[gr.cell] && largest_[gr.cell] == static_cast<std::int32_t>(g));
      gr.target = keeps ? gr.cell : static_cast<std::int32_t>(size_.size());
      if (!keeps) {
        size_.push_back(0);
        signature_.push_back(gr.signature);
        has_signature_.push_back(1);
      }
    }
    for (const Group& gr : groups_) {
      if (gr.target == gr.cell) {
        signature_[gr.cell] = gr.signature;
        has_signature_[gr.cell] = 1;
      }
      marked_in_cell_[gr.cell] = 0;
      largest_[gr.cell] = -1;
      matched_[gr.cell] = 0;
    }
    for (std::size_t i = 0; i < marked_.size(); ++i) {
      const std::int32_t e = marked_[i];
      const Group& gr = groups_[group_of_[i]];
      if (gr.target == gr.cell) continue;
      --size_[gr.cell];
      ++size_[gr.target];
      colour_[e] = gr.target;
      moved_.emplace_back(e, gr.cell);
    }
    marked_.clear();
    ++round_;
    return moved_;
  }

 private:
  struct Group {
    std::int32_t cell;
    Sum signature;
    std::int64_t count;
    std::int32_t target;
  };
  std::vector<std::int32_t>& colour_;
  std::vector<std::int64_t> size_;
  std::vector<Sum> signature_;
  std::vector<char> has_signature_;
  std::vector<std::uint32_t> stamp_;
  std::uint32_t round_ = 1;
  std::vector<std::int32_t> marked_;
  std::vector<Group> groups_;
  std::vector<std::int32_t> group_of_;
  Numbering numbering_;
  std::vector<std::int64_t> marked_in_cell_;
  std::vector<std::int32_t> largest_;
  std::vector<char> matched_;
  std::vector<std::pair<std::int32_t, std::int32_t>> moved_;
};


// The links' first colours, by (capacity, link group); returns how many there are.
inline std::int32_t first_link_colours(const FlowNetwork& net, const std::vector<std::int32_t>& link_group,
                                       std::vector<std::int32_t>& colour) {
  Numbering numbering;
  numbering.reset(1024);
  colour.resize(net.capacity.size());
  for (std::size_t l = 0; l < colour.size(); ++l)
    colour[l] = numbering.number(0, bits(net.capacity[l].value),
                                 link_group.empty() ? 0 : static_cast<std::uint64_t>(link_group[l]) + 1);
  return numbering.count();
}

// Renumbers colours densely in order of first appearance (cells that lost all their members to
// splits drop out); returns how many there are.
inline std::int32_t compact(std::vector<std::int32_t>& colour) {
  std::vector<std::int32_t> renumber;
  std::int32_t next = 0;
  for (auto& c : colour) {
    if (static_cast<std::size_t>(c) >= renumber.size()) renumber.resize(static_cast<std::size_t>(c) + 1, -1);
    if (renumber[c] < 0) renumber[c] = next++;
    c = renumber[c];
  }
  return next;
}

}  // namespace reshard::sim::refinement
