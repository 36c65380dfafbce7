// The bottleneck-group engine: the max-min allocation kept as one rate per bottleneck link.
//
// Why. In a max-min allocation every active class of flows has a bottleneck link, and all classes
// bottlenecked at one link get the same rate: the link's level. When a flow starts or finishes,
// the levels of many links move (in a burst of random transfers, a finish frees capacity on two
// NICs that max-min hands on through every NIC those flows share: thousands of classes change
// rate per finish at 30 000 transfers), but the classes almost never change their bottleneck
// (about 2 of the 3 800 that change rate per finish on that burst). The class engine (maxmin.hpp)
// pays for every class whose rate changes; this one pays per bottleneck group.
//
// State. Link g, as a group, holds the classes bottlenecked at it (every one crosses g) and their
// column: per link k, the weight the group puts on k (sum over its classes of flows x weight).
// The rate of a class is its group's level. Bytes: a group keeps the bytes served per flow at
// its level since some origin (`served`, brought up to date whenever its level moves); a class
// keeps `base`, its own bytes served per flow minus its group's, so a level change costs nothing
// per class. A class's next finish is at the group's served = its next flow's level - base (the
// class's key); each group keeps its classes' keys in a min-heap, and the finish queue holds one
// entry per group.
//
// The refill is progressive filling over groups (flow_sim.hpp has the filling and its proof):
// every loaded link starts with its capacity and its whole active weight unfixed; the link with
// the smallest share saturates first and fixes, at that share, (1) its own group: one pass over
// the group's column, not over its classes, and (2) every class of another group still unfixed
// that crosses it: that class is now bottlenecked here and moves into this group (a split, the
// rare event, paid per class). Each step fixes exactly the classes the per-class filling fixes at
// the same step (those unfixed crossing the saturated link: by induction every unfixed class of a
// group is unfixed in both), so the levels are the max-min allocation, to the rounding of sums
// taken per group instead of per class. The cost per refill is the columns of all loaded groups
// and a queue of the loaded links (ShareQueue), whatever the number of classes whose rate moved.
#include "event_loop.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <unordered_map>

namespace reshard::sim {
namespace {

// The filling's links by share: a radix heap, for a monotone queue (no key pushed is below the
// last one popped: the filling's shares only grow). A non-negative double's bits, read as an
// unsigned integer, order as the double does; an entry sits in bucket b, the position of the
// highest bit in which its key differs from the last key popped (0: equal). A pop takes bucket 0,
// or else empties the first non-empty bucket into lower ones around its smallest key; an entry
// moves down at most 64 times, so a pop costs O(1) amortized against the heap's log2(links)
// sifts (which took most of a refill on the bursts). Equal keys come out in a fixed order.
class ShareQueue {
 public:
  void clear() {
    for (auto& b : buckets_) b.clear();
    size_ = 0;
    last_ = 0;
  }
  bool empty() const { return size_ == 0; }
  void push(double share, std::int32_t link) {
    const std::uint64_t k = bits(share);
    buckets_[bucket(k)].push_back({k, link});
    ++size_;
  }
  // The smallest share and its link.
  std::pair<double, std::int32_t> pop() {
    if (buckets_[0].empty()) {
      std::size_t i = 1;
      while (buckets_[i].empty()) ++i;
      auto& from = buckets_[i];
      last_ = std::min_element(from.begin(), from.end(), [](const Entry& a, const Entry& b) { return a.key < b.key; })->key;
      for (const Entry& e : from) buckets_[bucket(e.key)].push_back(e);
      from.clear();
    }
    const Entry e = buckets_[0].back();
    buckets_[0].pop_back();
    --size_;
    double share;
    std::memcpy(&share, &e.key, sizeof share);
    return {share, e.link};
  }

 private:
  struct Entry {
    std::uint64_t key;
    std::int32_t link;
  };
  static std::uint64_t bits(double share) {  // share >= 0 and finite
    std::uint64_t k;
    std::memcpy(&k, &share, sizeof k);
    return k;
  }
  std::size_t bucket(std::uint64_t k) const { return k == last_ ? 0 : 64 - static_cast<std::size_t>(__builtin_clzll(k ^ last_)); }
  std::array<std::vector<Entry>, 65> buckets_;
  std::uint64_t last_ = 0;
  std::size_t size_ = 0;
};

class GroupEngine : public EventLoop {
 public:
  GroupEngine(const FlowNetwork& net, const FlowTable& flows, FlowGraph graph, const SimOptions& opt,
              const QuotientWeights* weights, FlowClasses classes, FlowClasses binding)
      : EventLoop(net, flows, std::move(graph), opt, weights, std::move(classes)), binding_(std::move(binding)) {}

 private:
  struct Class {
    std::int64_t flows = 0;        // active
    std::int32_t group = -1;       // the link it is bottlenecked at; -1 until the refill places it
    std::int32_t member_pos = -1;  // index in the group's members
    std::uint32_t version = 0;     // its entries in group key heaps other than the latest are stale
    // Bytes served per flow minus the group's served; while it is in no group (between its start
    // and the refill, no time passes), its bytes served per flow (0).
    double base = 0;
    std::vector<std::pair<double, std::int32_t>> finish_heap;  // (bytes served per flow at its finish, flow)
  };
  struct ColumnEntry {
    std::int32_t link;
    std::int32_t row_pos;  // index of this entry in the link's row
    std::int64_t weight;   // sum over the group's classes crossing the link of flows x weight
  };
  struct RowEntry {
    std::int32_t group;
    std::int32_t column_pos;
  };
  struct KeyEntry {
    double key;
    std::int32_t cls;
    std::uint32_t version;
    bool operator>(const KeyEntry& o) const { return key > o.key || (key == o.key && cls > o.cls); }
  };
  struct Link {
    double capacity = 0;
    std::int64_t weight = 0;  // active weight crossing it: sum over classes of flows x weight
    std::int32_t loaded_pos = -1;
    // As a group: its classes, their column, their keys, and its level and bytes served per flow.
    double level = 0, new_level = 0;
    double served = 0, updated = 0;
    std::vector<std::int32_t> members;
    std::vector<ColumnEntry> column;
    std::vector<RowEntry> row;  // the groups with classes crossing this link
    std::vector<KeyEntry> keys;  // min-heap
    bool dirty = false;          // its next finish must be computed again at the refill
    // The filling.
    double remaining = 0;
    std::int64_t unfixed = 0;
    std::uint32_t fixed = 0;  // fill stamp: its group's level is set
  };

  void prepare() override;
  void start_active(std::int32_t f, double t) override;
  void finish_event(std::int32_t g, double t) override;
  bool pending() const override { return pending_; }
  void refill(double t) override;

  // Class c's links that can saturate (binding_classes), and its weights there.
  std::span<const std::int32_t> class_links(std::int32_t c) const {
    return {binding_.links.data() + binding_.begin[c], binding_.links.data() + binding_.begin[c + 1]};
  }
  std::span<const std::int32_t> class_weights(std::int32_t c) const {
    return {binding_.weight.data() + binding_.begin[c], binding_.weight.data() + binding_.begin[c + 1]};
  }
  void advance(Link& g, double t) {
    g.served += g.level * (t - g.updated);
    g.updated = t;
  }
  void column_add(std::int32_t g, std::int32_t link, std::int64_t w);
  void column_sub(std::int32_t g, std::int32_t link, std::int64_t w);
  void attach(std::int32_t c, std::int32_t g, double t);
  void detach(std::int32_t c);
  void move(std::int32_t c, std::int32_t to, double t);
  void add_flow(std::int32_t c, double t);
  void remove_flow(std::int32_t c, double t);
  void push_key(std::int32_t c);
  void mark_dirty(std::int32_t g) {
    if (!links_[g].dirty) {
      links_[g].dirty = true;
      dirty_.push_back(g);
    }
  }
  void fill(double t);
  void fix_at(std::int32_t l, double share, std::size_t& to_fix, double t);
  void schedule(std::int32_t g);

  static std::uint64_t column_key(std::int32_t g, std::int32_t link) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(g)) << 32) | static_cast<std::uint32_t>(link);
  }

  FlowClasses binding_;  // binding_classes(classes_of_flows_)
  std::vector<Class> classes_;
  std::vector<Link> links_;
  std::vector<std::int64_t> busy_weight_;  // per link, dominated or not: active weight crossing it
  std::vector<std::int32_t> loaded_;  // links that are not dominated, with active weight
  std::unordered_map<std::uint64_t, std::int32_t> column_pos_;  // (group, link) -> index in the group's column
  std::vector<std::int32_t> joined_;  // classes that started with no group, placed at the refill
  std::vector<std::int32_t> dirty_;
  ShareQueue shares_;
  std::vector<std::int32_t> split_groups_;
  std::size_t active_classes_ = 0;
  std::uint32_t stamp_ = 0;
  bool pending_ = false;
};

void GroupEngine::prepare() {
  result_.solver = RateSolver::Groups;
  const std::size_t links = net_.capacity.size();
  classes_.resize(classes_of_flows_.size());
  links_.resize(links);
  for (std::size_t l = 0; l < links; ++l) links_[l].capacity = net_.capacity[l].value;
  finishes_.resize(links);
  busy_weight_.assign(links, 0);
}

void GroupEngine::column_add(std::int32_t g, std::int32_t link, std::int64_t w) {
  Link& group = links_[g];
  auto [it, fresh] = column_pos_.try_emplace(column_key(g, link), static_cast<std::int32_t>(group.column.size()));
  if (!fresh) {
    group.column[it->second].weight += w;
    return;
  }
  Link& l = links_[link];
  group.column.push_back({link, static_cast<std::int32_t>(l.row.size()), w});
  l.row.push_back({g, it->second});
}

void GroupEngine::column_sub(std::int32_t g, std::int32_t link, std::int64_t w) {
  Link& group = links_[g];
  const auto it = column_pos_.find(column_key(g, link));
  const std::int32_t pos = it->second;
  if ((group.column[pos].weight -= w) != 0) return;
  // Drop the entry: from the link's row, then from the group's column (each swapped with the last).
  Link& l = links_[link];
  const std::int32_t rp = group.column[pos].row_pos;
  l.row[rp] = l.row.back();
  l.row.pop_back();
  if (rp < static_cast<std::int32_t>(l.row.size())) links_[l.row[rp].group].column[l.row[rp].column_pos].row_pos = rp;
  column_pos_.erase(it);
  group.column[pos] = group.column.back();
  group.column.pop_back();
  if (pos < static_cast<std::int32_t>(group.column.size())) {
    const ColumnEntry& moved = group.column[pos];
    column_pos_[column_key(g, moved.link)] = pos;
    links_[moved.link].row[moved.row_pos].column_pos = pos;
  }
}

void GroupEngine::attach(std::int32_t c, std::int32_t g, double t) {
  Class& rc = classes_[c];
  Link& group = links_[g];
  if (group.members.empty()) group.updated = t;  // its served restarts from where it stood
  rc.group = g;
  rc.member_pos = static_cast<std::int32_t>(group.members.size());
  group.members.push_back(c);
  const auto links = class_links(c);
  const auto weights = class_weights(c);
  if (rc.flows > 0)
    for (std::size_t k = 0; k < links.size(); ++k) column_add(g, links[k], rc.flows * weights[k]);
  mark_dirty(g);
}

void GroupEngine::detach(std::int32_t c) {
  Class& rc = classes_[c];
  const std::int32_t g = rc.group;
  Link& group = links_[g];
  const auto links = class_links(c);
  const auto weights = class_weights(c);
  if (rc.flows > 0)  // else remove_flow took its last weight off the column already
    for (std::size_t k = 0; k < links.size(); ++k) column_sub(g, links[k], rc.flows * weights[k]);
  const std::int32_t last = group.members.back();
  group.members[rc.member_pos] = last;
  classes_[last].member_pos = rc.member_pos;
  group.members.pop_back();
  rc.group = -1;
  rc.member_pos = -1;
  ++rc.version;
  mark_dirty(g);
}

// Class c leaves its group for `to` at t (both brought up to t), keeping its bytes served.
void GroupEngine::move(std::int32_t c, std::int32_t to, double t) {
  Class& rc = classes_[c];
  const double served = rc.base + links_[rc.group].served;
  detach(c);
  attach(c, to, t);
  rc.base = served - links_[to].served;
  push_key(c);
}

void GroupEngine::add_flow(std::int32_t c, double t) {
  Class& rc = classes_[c];
  if (rc.flows++ == 0) ++active_classes_;
  const FlowClasses& fc = classes_of_flows_;
  for (auto k = fc.begin[c]; k < fc.begin[c + 1]; ++k)
    if ((busy_weight_[fc.links[k]] += fc.weight[k]) == fc.weight[k]) became_busy(fc.links[k], t);
  const auto links = class_links(c);
  const auto weights = class_weights(c);
  for (std::size_t k = 0; k < links.size(); ++k) {
    Link& l = links_[links[k]];
    if (l.weight == 0) {
      l.loaded_pos = static_cast<std::int32_t>(loaded_.size());
      loaded_.push_back(links[k]);
    }
    l.weight += weights[k];
    if (rc.group >= 0) column_add(rc.group, links[k], weights[k]);
  }
}

void GroupEngine::remove_flow(std::int32_t c, double t) {
  Class& rc = classes_[c];
  const auto links = class_links(c);
  const auto weights = class_weights(c);
  for (std::size_t k = 0; k < links.size(); ++k) {
    Link& l = links_[links[k]];
    if (rc.group >= 0) column_sub(rc.group, links[k], weights[k]);
    if ((l.weight -= weights[k]) == 0) {
      const std::int32_t last = loaded_.back();
      loaded_[l.loaded_pos] = last;
      links_[last].loaded_pos = l.loaded_pos;
      loaded_.pop_back();
      l.loaded_pos = -1;
    }
  }
  const FlowClasses& fc = classes_of_flows_;
  for (auto k = fc.begin[c]; k < fc.begin[c + 1]; ++k)
    if ((busy_weight_[fc.links[k]] -= fc.weight[k]) == 0) became_idle(fc.links[k], t);
  if (--rc.flows == 0) --active_classes_;
}

void GroupEngine::push_key(std::int32_t c) {
  Class& rc = classes_[c];
  Link& group = links_[rc.group];
  group.keys.push_back({rc.finish_heap.front().first - rc.base, c, ++rc.version});
  std::push_heap(group.keys.begin(), group.keys.end(), std::greater<>());
  mark_dirty(rc.group);
}

void GroupEngine::start_active(std::int32_t f, double t) {
  const std::int32_t c = classes_of_flows_.class_of[f];
  Class& rc = classes_[c];
  double served = rc.base;
  if (rc.group >= 0) {
    advance(links_[rc.group], t);
    served += links_[rc.group].served;
  } else if (rc.flows == 0) {
    rc.base = served = 0;
    joined_.push_back(c);
  }
  rc.finish_heap.emplace_back(served + flows_.bytes[f].as_double(), f);
  std::push_heap(rc.finish_heap.begin(), rc.finish_heap.end(), std::greater<>());
  add_flow(c, t);
  if (rc.group >= 0) push_key(c);
  pending_ = true;
}

// Group g's earliest key is due: its classes whose next flow is within the finish slack finish them.
void GroupEngine::finish_event(std::int32_t g, double t) {
  Link& group = links_[g];
  advance(group, t);
  while (!group.keys.empty()) {
    const KeyEntry top = group.keys.front();
    Class& rc = classes_[top.cls];
    if (top.version != rc.version || rc.group != g) {  // stale
      std::pop_heap(group.keys.begin(), group.keys.end(), std::greater<>());
      group.keys.pop_back();
      continue;
    }
    double served = rc.base + group.served;
    const auto [first_level, first_flow] = rc.finish_heap.front();
    if (first_level > served + finish_slack(first_flow, group.level)) break;
    std::pop_heap(group.keys.begin(), group.keys.end(), std::greater<>());
    group.keys.pop_back();
    while (!rc.finish_heap.empty()) {
      const auto [level, f] = rc.finish_heap.front();
      if (level > served + finish_slack(f, group.level)) break;
      std::pop_heap(rc.finish_heap.begin(), rc.finish_heap.end(), std::greater<>());
      rc.finish_heap.pop_back();
      if (level > served) {
        served = level;
        rc.base = served - group.served;
      }
      result_.timing[f].bottleneck = g;  // the link that set its last rate
      remove_flow(top.cls, t);
      finish(f, t);
    }
    if (rc.flows == 0) detach(top.cls);
    else push_key(top.cls);
  }
  mark_dirty(g);
  pending_ = true;
}

// Group g's next finish: its smallest live key reached at its level.
void GroupEngine::schedule(std::int32_t g) {
  Link& group = links_[g];
  while (!group.keys.empty()) {
    const KeyEntry& top = group.keys.front();
    const Class& rc = classes_[top.cls];
    if (top.version == rc.version && rc.group == g) break;
    std::pop_heap(group.keys.begin(), group.keys.end(), std::greater<>());
    group.keys.pop_back();
  }
  if (group.keys.empty() || !(group.level > 0)) {
    finishes_.erase(g);
    return;
  }
  finishes_.set(g, group.updated + std::max(0.0, group.keys.front().key - group.served) / group.level);
}

void GroupEngine::refill(double t) {
  ++result_.rate_updates;
  for (auto l : loaded_)
    if (!links_[l].members.empty()) advance(links_[l], t);
  // A class that joined goes to the group of its link with the least capacity per active weight
  // (its likely bottleneck); the filling moves it where it belongs.
  for (auto c : joined_) {
    Class& rc = classes_[c];
    if (rc.flows == 0 || rc.group >= 0) continue;
    const auto links = class_links(c);
    std::int32_t best = links[0];
    for (auto l : links)
      if (links_[l].capacity / static_cast<double>(links_[l].weight) <
          links_[best].capacity / static_cast<double>(links_[best].weight))
        best = l;
    const double served = rc.base;
    attach(c, best, t);
    rc.base = served - links_[best].served;
    push_key(c);
  }
  joined_.clear();
  fill(t);
  for (auto l : loaded_) {
    Link& group = links_[l];
    if (group.members.empty() || group.new_level == group.level) continue;
    result_.rate_changes += static_cast<std::int64_t>(group.members.size());
    group.level = group.new_level;
    mark_dirty(l);
  }
  for (auto g : dirty_) {
    links_[g].dirty = false;
    schedule(g);
  }
  dirty_.clear();
  pending_ = false;
}

// Progressive filling over the groups (the header comment). The shares in `shares_` are lower
// bounds: a link's share only grows during the filling, so a popped link whose share has grown is
// pushed back (at its share, above the one popped: the queue stays monotone), and a popped share
// equal to the current one is the minimum.
void GroupEngine::fill(double t) {
  ++stamp_;
  shares_.clear();
  for (auto l : loaded_) {
    Link& link = links_[l];
    link.remaining = link.capacity;
    link.unfixed = link.weight;
    link.new_level = link.level;
    shares_.push(link.capacity / static_cast<double>(link.weight), l);
  }
  std::size_t to_fix = active_classes_;
  while (to_fix > 0 && !shares_.empty()) {
    const auto [key, l] = shares_.pop();
    const Link& link = links_[l];
    if (link.unfixed == 0) continue;
    const double share = std::max(0.0, link.remaining) / static_cast<double>(link.unfixed);
    if (share > key) {
      shares_.push(share, l);
      continue;
    }
    fix_at(l, share, to_fix, t);
  }
}

// Link l saturates at `share`: its group, then every unfixed class of another group crossing it.
void GroupEngine::fix_at(std::int32_t l, double share, std::size_t& to_fix, double t) {
  Link& link = links_[l];
  if (!link.members.empty()) {
    to_fix -= link.members.size();
    for (const ColumnEntry& e : link.column) {
      Link& other = links_[e.link];
      other.remaining -= static_cast<double>(e.weight) * share;
      other.unfixed -= e.weight;
    }
  }
  link.fixed = stamp_;
  link.new_level = share;
  if (link.unfixed == 0) return;
  split_groups_.clear();
  for (const RowEntry& r : link.row)
    if (links_[r.group].fixed != stamp_) split_groups_.push_back(r.group);
  for (auto g : split_groups_) {
    Link& group = links_[g];
    for (std::size_t i = 0; i < group.members.size();) {
      const std::int32_t c = group.members[i];
      const auto links = class_links(c);
      if (std::find(links.begin(), links.end(), l) == links.end()) {
        ++i;
        continue;
      }
      move(c, l, t);  // swaps the last member into position i
      const auto weights = class_weights(c);
      const std::int64_t flows = classes_[c].flows;
      for (std::size_t k = 0; k < links.size(); ++k) {
        Link& other = links_[links[k]];
        other.remaining -= static_cast<double>(flows * weights[k]) * share;
        other.unfixed -= flows * weights[k];
      }
      --to_fix;
    }
  }
}

}  // namespace

// Links that can never saturate are left out of the filling: link p is dominated by link n when
// every class crossing p crosses n and C_p > r C_n, r the largest w_cp / w_cn over those classes.
// Then at any feasible allocation load_p = sum m_c w_cp x_c <= r sum m_c w_cn x_c <= r C_n < C_p:
// p is never saturated, so it never fixes a class and its constraint changes no rate (a GPU's
// PCIe link to its NIC, faster than the NIC and crossed by the same flows). No two links dominate
// each other (C_p > r C_n and C_n > C_p / r cannot both hold), and a chain p < n < q leaves q.
FlowClasses binding_classes(const FlowClasses& fc, const FlowNetwork& net) {
  const std::size_t links = net.capacity.size();
  // Per link p: the links every class crossing p crosses too, each with the largest ratio r, in
  // common[begin[p] .. begin[p] + count[p]) (filled from the first class crossing p, then narrowed).
  std::vector<std::pair<std::int32_t, double>> common;
  std::vector<std::int64_t> begin(links, -1);
  std::vector<std::int32_t> count(links, 0);
  std::vector<std::int32_t> slot_of(links, -1);  // the slot of class c on each link, while c is scanned
  for (std::size_t c = 0; c < fc.size(); ++c) {
    for (auto k = fc.begin[c]; k < fc.begin[c + 1]; ++k) slot_of[fc.links[k]] = k;
    for (auto k = fc.begin[c]; k < fc.begin[c + 1]; ++k) {
      const std::int32_t p = fc.links[k];
      const double wp = fc.weight[k];
      if (begin[p] < 0) {
        begin[p] = static_cast<std::int64_t>(common.size());
        for (auto j = fc.begin[c]; j < fc.begin[c + 1]; ++j)
          if (j != k) common.emplace_back(fc.links[j], wp / fc.weight[j]);
        count[p] = fc.begin[c + 1] - fc.begin[c] - 1;
        continue;
      }
      auto* cand = common.data() + begin[p];
      std::int32_t kept = 0;
      for (std::int32_t i = 0; i < count[p]; ++i) {
        const auto [n, r] = cand[i];
        if (slot_of[n] >= 0) cand[kept++] = {n, std::max(r, wp / fc.weight[slot_of[n]])};
      }
      count[p] = kept;
    }
    for (auto k = fc.begin[c]; k < fc.begin[c + 1]; ++k) slot_of[fc.links[k]] = -1;
  }
  std::vector<char> dominated(links, 0);
  for (std::size_t p = 0; p < links; ++p)
    for (std::int32_t i = 0; i < count[p]; ++i) {
      const auto [n, r] = common[begin[p] + i];
      if (net.capacity[p].value > r * net.capacity[n].value) dominated[p] = 1;
    }
  FlowClasses binding;  // class_of stays empty: the engine reads the flows' classes from `fc`
  for (std::size_t c = 0; c < fc.size(); ++c) {
    for (auto k = fc.begin[c]; k < fc.begin[c + 1]; ++k)
      if (!dominated[fc.links[k]]) {
        binding.links.push_back(fc.links[k]);
        binding.weight.push_back(fc.weight[k]);
      }
    binding.begin.push_back(static_cast<std::int32_t>(binding.links.size()));
  }
  return binding;
}

FlowSimResult run_group_engine(const FlowNetwork& net, const FlowTable& flows, FlowGraph graph, const SimOptions& opt,
                               const QuotientWeights* weights, FlowClasses classes, FlowClasses binding) {
  return *GroupEngine(net, flows, std::move(graph), opt, weights, std::move(classes), std::move(binding)).run();
}

}  // namespace reshard::sim
