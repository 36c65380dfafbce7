// The host backend: MPI processes, host memory, MPI_Isend/MPI_Irecv.
//
// Each GPU runs the operations step by step (RunPlan::step_of): it starts those of step k once its
// own of the steps before are finished, so its staging memory is what model/memory.hpp predicts
// (the regions of one step, and the receives a later step forwards from). Within its step, receives
// are posted in operation-id order within a byte window; sends are posted as soon as the
// operations they depend on *here* are done (a receive into this GPU that they forward, or an
// earlier send of this GPU); dependencies between operations of other GPUs carry no data and are
// not waited for across processes. The staging bytes each GPU holds are counted as they are
// allocated and released; the high-water mark goes into the Measurement. A chain op moves chunk by
// chunk: each GPU of the tree receives chunk k into its region of the whole part and forwards it
// from there to its children as soon as it has arrived, at most kChainSlots chunks in flight per
// hop in each direction. Progress is
// polled with MPI_Testsome against a deadline, so a peer that never answers ends the run with an
// ExecError instead of a hang.
#include "backend_impl.hpp"

#ifdef RESHARD_HAVE_MPI
#include <mpi.h>

#include <chrono>
#include <climits>
#include <csignal>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <unistd.h>

#include "host_memory.hpp"
#include "mpi_common.hpp"
#endif

namespace reshard::exec::detail {

#ifndef RESHARD_HAVE_MPI
RunResult run_host(const RunPlan&, const ExecOptions&) {
  throw ExecError("the host backend is not built: MPI was not found at configure time", -1, -1);
}
#else

using namespace reshard::model;

namespace {

// The receive regions a transfer's copies read, each once.
std::vector<std::int32_t> regions_read(const Transfer& t) {
  std::vector<std::int32_t> from;
  for (const CopyRun& c : t.copies) from.push_back(c.src);
  std::sort(from.begin(), from.end());
  from.erase(std::unique(from.begin(), from.end()), from.end());
  return from;
}

// One job per send or receive of a local GPU: a plain send or receive, a chain root, or a GPU
// inside a chain (receiving, and forwarding to its children).
struct Job {
  std::size_t prog = 0;
  const Transfer* t = nullptr;
  const Op* op = nullptr;
  bool send = false;           // a plain send or a chain root
  std::int64_t bytes = 0;      // the staging region
  std::int32_t step = 0;       // its op's step
  bool started = false, received = false, finished = false;
  // Chain ops.
  std::int64_t chunks = 0;
  std::int64_t in_hop = 0;                // the hop into this GPU (receivers)
  std::vector<std::int64_t> out_hop;      // per child: its hop
  std::int64_t next_receive = 0, receiving = 0, arrived = 0;
  std::vector<char> got;                  // per chunk: arrived here
  std::vector<std::int64_t> have;         // chunks held here, in arrival order (the root: all)
  std::vector<std::int64_t> next_out, in_flight;  // per child: index into `have`, chunk sends in flight
  std::int64_t sends_left = 0;            // chunk sends not completed
};

// The run on this process, in phases: number the messages (tags), build the programs and memory
// of its GPUs, make a job per send and receive, then the event loop (post receives within the
// byte window, post the sends that are ready, take completions) until every job is finished or a
// peer stays silent past the timeout.
class HostRun {
 public:
  HostRun(const RunPlan& plan, const ExecOptions& options, MpiWorld& w)
      : plan_(plan), options_(options), w_(w), s_(*plan.schedule), inv_(plan.scenario->inventory) {}

  RunResult run() {
    // The operations' messages travel on their own communicator: no tag of theirs can meet the
    // messages of the finish (mpi_common.cpp).
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    number_messages();
    prepare_programs();
    count_readers();
    make_jobs();
    out_.start.assign(s_.ops.size(), -1);
    out_.end.assign(s_.ops.size(), -1);
    out_.staging.assign(plan_.gpus.size(), -1);

    MPI_Barrier(MPI_COMM_WORLD);
    setup_done(w_);
    t0_ = MPI_Wtime();
    if (has_fault(options_.faults, Fault::Kind::Kill, w_.rank)) std::raise(SIGKILL);  // test-only: a rank killed before its sends
    if (has_fault(options_.faults, Fault::Kind::Die, w_.rank)) go_silent(w_, options_.timeout_s);  // test-only: a silent peer
    double deadline = t0_ + options_.timeout_s;  // moves on with every completion: the limit is on silence
    while (finished_jobs_ < jobs_.size()) {
      bool progress = post_receives();
      progress = post_sends() || progress;
      progress = take_completions() || progress;
      if (progress) {
        deadline = MPI_Wtime() + options_.timeout_s;
        continue;
      }
      if (MPI_Wtime() > deadline) throw stall_error();
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    out_.elapsed = MPI_Wtime() - t0_;
    MPI_Comm_free(&comm_);
    for (std::size_t i = 0; i < progs_.size(); ++i)
      out_.staging[static_cast<std::size_t>(plan_.gpu_index(progs_[i].gpu))] = staging_peak_[i];
    for (std::size_t i = 0; i < progs_.size(); ++i) {
      std::string err = check_destinations(progs_[i], inv_, mems_[i], w_.rank, out_.bytes_verified);
      if (!err.empty() && out_.error.empty()) out_.error = err;
    }
    return mpi_finish(plan_, options_, w_, out_);
  }

 private:
  int proc_of(GpuId g) const { return process_of(plan_, g, w_.world); }

  // A message is one plain operation, or one chunk on one hop of a chain op. MPI matches a
  // message by its source and tag, so tags need only tell apart the messages between one pair of
  // processes: those are numbered in (operation, hop, chunk) order, and the number modulo
  // MPI_TAG_UB + 1 (at least 32768; 2^31 with OpenMPI) is the tag. first_tag_[op][hop]: the
  // number of the op's first message on that hop (a plain op: hop 0), for the hops from or to
  // this process.
  void number_messages() {
    void* attr = nullptr;
    int has_attr = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attr, &has_attr);
    tag_ub_ = has_attr ? *static_cast<int*>(attr) : 32767;
    first_tag_.assign(s_.ops.size(), {});
    std::unordered_map<std::int64_t, std::int64_t> sent;  // (from process, to process) -> messages so far
    auto number = [&](GpuId from, GpuId to, std::int64_t messages) -> std::int64_t {
      const int a = proc_of(from), b = proc_of(to);
      if (a != w_.rank && b != w_.rank) return -1;
      std::int64_t& n = sent[static_cast<std::int64_t>(a) * w_.world + b];
      n += messages;
      return n - messages;
    };
    for (std::size_t i = 0; i < s_.ops.size(); ++i) {
      const Op& op = s_.ops[i];
      if (op.chain < 0) {
        first_tag_[i].push_back(number(op.src, op.dst, 1));
        continue;
      }
      const Chain& c = s_.chains[static_cast<std::size_t>(op.chain)];
      const std::int64_t chunks = chain_chunks(op.bytes.value, c.chunk.value);
      for (const ChainHop& h : c.hops) first_tag_[i].push_back(number(h.from, h.to, chunks));
    }
  }
  int tag_of(std::int64_t op, std::int64_t hop = 0, std::int64_t chunk = 0) const {
    return static_cast<int>((first_tag_[static_cast<std::size_t>(op)][static_cast<std::size_t>(hop)] + chunk) %
                            (tag_ub_ + 1));
  }

  // Programs and memory for the GPUs this process runs; their shards filled, local copies done.
  void prepare_programs() {
    const auto mine = gpus_of_process(plan_, w_.rank, w_.world);
    mems_.resize(mine.size());
    for (GpuId g : mine) progs_.push_back(build_program(plan_, g));
    check_host_memory();
    for (std::size_t i = 0; i < mine.size(); ++i) {
      allocate(progs_[i], mems_[i], false);  // staging regions are allocated when used
      for (const auto* list : {&progs_[i].sends, &progs_[i].receives})
        for (const Transfer& t : *list) {
          const std::int64_t bytes = progs_[i].regions[static_cast<std::size_t>(t.region)].bytes;
          if ((t.is_chain() ? std::min(bytes, t.chunk) : bytes) > INT_MAX)
            throw ExecError("operation " + std::to_string(t.op) +
                                " moves more than 2 GiB in one message; the host backend sends at most 2 GiB per message",
                            w_.rank, -1, true);
        }
      fill_sources(progs_[i], inv_, mems_[i]);
      run_copies(progs_[i].local, mems_[i]);
    }
  }

  // Shards stay resident for the whole run; refuse a run that cannot fit rather than swap or die.
  // Summed over the processes of this machine; the first of them reports (and aborts the run).
  void check_host_memory() const {
    std::int64_t resident = 0;
    for (const auto& p : progs_)
      for (const auto& r : p.regions)
        if (r.kind == Region::Kind::Source || r.kind == Region::Kind::Destination) resident += r.bytes;
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w_.rank, MPI_INFO_NULL, &node);
    long long mine_bytes = resident, node_bytes = 0;
    int node_rank = 0, node_size = 1;
    MPI_Allreduce(&mine_bytes, &node_bytes, 1, MPI_LONG_LONG, MPI_SUM, node);
    MPI_Comm_rank(node, &node_rank);
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
    const std::int64_t physical = static_cast<std::int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
    if (physical > 0 && node_bytes > physical && node_rank == 0)
      throw ExecError("the " + std::to_string(node_size) + " processes on rank " + std::to_string(w_.rank) +
                          "'s machine need " + format(Bytes{static_cast<std::int64_t>(node_bytes)}) +
                          " of host memory for their shards; the machine has " + format(Bytes{physical}),
                      w_.rank, -1, true);
  }

  // Staging memory is released as soon as nothing needs it: a send region when its sends complete,
  // a receive region once it is unpacked, its chunks forwarded, and every send that forwards from
  // it has been packed. readers_: per region, the sends still to pack from it.
  void count_readers() {
    readers_.resize(progs_.size());
    busy_.resize(progs_.size());
    staging_now_.assign(progs_.size(), 0);
    staging_peak_.assign(progs_.size(), 0);
    for (std::size_t i = 0; i < progs_.size(); ++i) {
      readers_[i].assign(progs_[i].regions.size(), 0);
      busy_[i].assign(progs_[i].regions.size(), 0);
      for (const Transfer& t : progs_[i].sends)
        for (auto r : regions_read(t)) ++readers_[i][static_cast<std::size_t>(r)];
    }
  }
  void release(std::size_t prog, std::int32_t region) {
    const auto r = static_cast<std::size_t>(region);
    if (progs_[prog].regions[r].kind == Region::Kind::Receive && readers_[prog][r] == 0 && !busy_[prog][r])
      unstage(prog, region);
  }
  // Staging memory in and out, counted per GPU (program).
  void stage(const Job& j) {
    region_of(j).assign(static_cast<std::size_t>(j.bytes), 0);
    staging_now_[j.prog] += j.bytes;
    staging_peak_[j.prog] = std::max(staging_peak_[j.prog], staging_now_[j.prog]);
  }
  void unstage(std::size_t prog, std::int32_t region) {
    auto& m = mems_[prog].regions[static_cast<std::size_t>(region)];
    staging_now_[prog] -= static_cast<std::int64_t>(m.size());
    std::vector<unsigned char>().swap(m);
  }
  // Whether job j's step is open on its GPU: every job of that GPU in an earlier step is finished.
  bool step_open(const Job& j) const { return j.step <= open_step_[j.prog]; }
  std::vector<unsigned char>& region_of(const Job& j) {
    return mems_[j.prog].regions[static_cast<std::size_t>(j.t->region)];
  }

  // A job per send and receive; receives and sends each in op id order.
  void make_jobs() {
    send_job_.resize(progs_.size());
    receive_job_.resize(progs_.size());
    auto hop_into = [](const Chain& c, GpuId g) {
      for (std::size_t h = 0; h < c.hops.size(); ++h)
        if (c.hops[h].to == g) return static_cast<std::int64_t>(h);
      return std::int64_t{-1};
    };
    for (std::size_t i = 0; i < progs_.size(); ++i)
      for (bool send : {true, false})
        for (const Transfer& t : send ? progs_[i].sends : progs_[i].receives) {
          Job j;
          j.prog = i;
          j.t = &t;
          j.op = &s_.ops[static_cast<std::size_t>(t.op)];
          j.send = send;
          j.bytes = progs_[i].regions[static_cast<std::size_t>(t.region)].bytes;
          j.step = plan_.step_of[static_cast<std::size_t>(t.op)];
          if (t.is_chain()) {
            const Chain& c = s_.chains[static_cast<std::size_t>(t.chain)];
            j.chunks = chain_chunks(j.bytes, t.chunk);
            if (!send) j.in_hop = hop_into(c, progs_[i].gpu);
            for (GpuId child : t.children) j.out_hop.push_back(hop_into(c, child));
            j.got.assign(static_cast<std::size_t>(j.chunks), 0);
            j.next_out.assign(t.children.size(), 0);
            j.in_flight.assign(t.children.size(), 0);
            j.sends_left = j.chunks * static_cast<std::int64_t>(t.children.size());
          }
          (send ? send_job_ : receive_job_)[i][t.op] = jobs_.size();
          jobs_.push_back(std::move(j));
        }
    for (std::size_t k = 0; k < jobs_.size(); ++k) (jobs_[k].send ? sends_ : receives_).push_back(k);
    unfinished_.assign(progs_.size(), std::vector<std::int64_t>(static_cast<std::size_t>(plan_.steps) + 1, 0));
    for (const Job& j : jobs_) ++unfinished_[j.prog][static_cast<std::size_t>(j.step)];
    open_step_.assign(progs_.size(), 0);
    for (std::size_t i = 0; i < progs_.size(); ++i) advance_step(i);
    auto by_op = [&](std::size_t a, std::size_t b) { return jobs_[a].t->op < jobs_[b].t->op; };
    std::stable_sort(receives_.begin(), receives_.end(), by_op);
    std::stable_sort(sends_.begin(), sends_.end(), by_op);
  }

  // Whether the previous op on this job's chain is done on this GPU (chain ops on one chain run in
  // order on every GPU of the chain; every op of a chain has the same tree, so the same roles).
  bool chain_turn(const Job& j) const {
    const std::int64_t prev = plan_.chain_prev[static_cast<std::size_t>(j.t->op)];
    if (prev < 0) return true;
    const auto& index = j.send ? send_job_[j.prog] : receive_job_[j.prog];
    auto it = index.find(prev);
    return it == index.end() || jobs_[it->second].finished;
  }

  enum class Msg : std::uint8_t { Receive, Send, ChunkReceive, ChunkSend };
  struct Pending {
    Msg kind;
    std::size_t job;
    std::int64_t chunk = 0;
    std::size_t child = 0;
  };
  void post_receive(const Pending& p, void* data, std::int64_t bytes, int from, int tag) {
    requests_.emplace_back();
    pending_.push_back(p);
    MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, from, tag, comm_, &requests_.back());
  }
  void post_send(const Pending& p, const void* data, std::int64_t bytes, int to, int tag) {
    requests_.emplace_back();
    pending_.push_back(p);
    MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, to, tag, comm_, &requests_.back());
  }

  // Posts what a chain job may post now: receives of the next chunks, and the chunks it holds to
  // its children, at most kChainSlots in flight on each hop.
  void pump(std::size_t k) {
    Job& j = jobs_[k];
    unsigned char* data = region_of(j).data();
    while (!j.send && j.receiving < kChainSlots && j.next_receive < j.chunks) {
      const ChunkRange c = chain_chunk(j.bytes, j.t->chunk, j.next_receive);
      post_receive({Msg::ChunkReceive, k, j.next_receive, 0}, data + c.begin, c.bytes, proc_of(j.t->peer),
                   tag_of(j.t->op, j.in_hop, j.next_receive));
      ++j.receiving;
      ++j.next_receive;
    }
    for (std::size_t ch = 0; ch < j.t->children.size(); ++ch)
      while (j.in_flight[ch] < kChainSlots && j.next_out[ch] < static_cast<std::int64_t>(j.have.size())) {
        const std::int64_t chunk = j.have[static_cast<std::size_t>(j.next_out[ch]++)];
        const ChunkRange c = chain_chunk(j.bytes, j.t->chunk, chunk);
        post_send({Msg::ChunkSend, k, chunk, ch}, data + c.begin, c.bytes, proc_of(j.t->children[ch]),
                  tag_of(j.t->op, j.out_hop[ch], chunk));
        ++j.in_flight[ch];
      }
  }

  void set_finished(Job& j) {
    j.finished = true;
    ++finished_jobs_;
    --unfinished_[j.prog][static_cast<std::size_t>(j.step)];
    advance_step(j.prog);
  }
  void advance_step(std::size_t prog) {
    while (open_step_[prog] < plan_.steps && unfinished_[prog][static_cast<std::size_t>(open_step_[prog])] == 0)
      ++open_step_[prog];
  }
  // A chain job is finished once everything arrived and every chunk it sends has been taken.
  void maybe_finish(Job& j) {
    if (j.finished || (!j.send && !j.received) || j.sends_left > 0) return;
    set_finished(j);
    if (j.send) {
      unstage(j.prog, j.t->region);
      return;
    }
    window_ -= j.bytes;
    busy_[j.prog][static_cast<std::size_t>(j.t->region)] = 0;
    release(j.prog, j.t->region);
  }
  // Everything arrived at a receiver: its time, the unpack.
  void all_arrived(Job& j) {
    j.received = true;
    const auto op = static_cast<std::size_t>(j.t->op);
    out_.end[op] = std::max(out_.end[op], MPI_Wtime() - t0_);
    run_copies(j.t->copies, mems_[j.prog]);
    if (!j.t->is_chain()) {
      set_finished(j);
      window_ -= j.bytes;
      release(j.prog, j.t->region);
    } else {
      maybe_finish(j);
    }
  }
  // The byte corrupt:OP flips at the op's receiver: one that lands in a destination shard there.
  std::int64_t corrupt_at(const Job& j) const {
    if (j.bytes == 0 || j.op->dst != progs_[j.prog].gpu) return -1;
    return corrupt_offset(options_.faults, *j.t);
  }

  // Receives of open steps are started in op id order while their bytes fit the window (one at least).
  bool post_receives() {
    bool any = false;
    while (next_receive_ < receives_.size() && jobs_[receives_[next_receive_]].started) ++next_receive_;
    for (std::size_t q = next_receive_; q < receives_.size(); ++q) {
      const std::size_t k = receives_[q];
      Job& j = jobs_[k];
      if (j.started || !step_open(j)) continue;
      if (j.t->is_chain() && !chain_turn(j)) break;
      if (window_ > 0 && window_ + j.bytes > kReceiveWindow) break;
      stage(j);
      j.started = true;
      window_ += j.bytes;
      any = true;
      if (!j.t->is_chain()) {
        post_receive({Msg::Receive, k}, region_of(j).data(), j.bytes, proc_of(j.t->peer), tag_of(j.t->op));
        continue;
      }
      busy_[j.prog][static_cast<std::size_t>(j.t->region)] = 1;
      if (j.chunks == 0) all_arrived(j);
      else pump(k);
    }
    return any;
  }

  // Whether a send's operation may go: what it forwards has arrived on its GPU, its GPU's earlier
  // sends it waits for are done, and (a chain root) the previous op on its chain has left it.
  bool ready(const Job& j) const {
    const GpuId g = progs_[j.prog].gpu;
    for (auto a : s_.after_of(*j.op)) {
      if (auto it = receive_job_[j.prog].find(a); it != receive_job_[j.prog].end() && !jobs_[it->second].received)
        return false;
      if (s_.ops[static_cast<std::size_t>(a)].src == g)
        if (auto it = send_job_[j.prog].find(a); it != send_job_[j.prog].end() && !jobs_[it->second].finished)
          return false;
    }
    return step_open(j) && (!j.t->is_chain() || chain_turn(j));
  }

  // Packs and posts every send that is ready, in op id order. The receive regions they were the last
  // to pack from are released after all of them are packed (a step's regions are held together).
  bool post_sends() {
    bool any = false;
    std::vector<std::pair<std::size_t, std::int32_t>> packed_from;
    while (first_unposted_ < sends_.size() && jobs_[sends_[first_unposted_]].started) ++first_unposted_;
    for (std::size_t q = first_unposted_; q < sends_.size(); ++q) {
      const std::size_t k = sends_[q];
      Job& j = jobs_[k];
      if (j.started || !ready(j)) continue;
      j.started = true;
      any = true;
      stage(j);
      auto& region = region_of(j);
      run_copies(j.t->copies, mems_[j.prog]);
      for (auto r : regions_read(*j.t))  // a receive region read here was received (the send waits for it)
        if (--readers_[j.prog][static_cast<std::size_t>(r)] == 0) packed_from.emplace_back(j.prog, r);
      out_.start[static_cast<std::size_t>(j.t->op)] = MPI_Wtime() - t0_;
      if (has_fault(options_.faults, Fault::Kind::Drop, j.t->op)) {  // test-only: no receiver ever gets it
        j.sends_left = 0;
        set_finished(j);
        unstage(j.prog, j.t->region);
        continue;
      }
      if (!j.t->is_chain()) {
        post_send({Msg::Send, k}, region.data(), j.bytes, proc_of(j.t->peer), tag_of(j.t->op));
        continue;
      }
      for (std::int64_t c = 0; c < j.chunks; ++c) j.have.push_back(c);
      j.received = true;
      pump(k);
      maybe_finish(j);  // nothing to send (an empty part)
    }
    for (const auto& [prog, r] : packed_from) release(prog, r);
    return any;
  }

  // Takes the completed requests and acts on each.
  bool take_completions() {
    int count = 0;
    indices_.resize(requests_.size());
    statuses_.resize(requests_.size());
    if (!requests_.empty())
      MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &count, indices_.data(), statuses_.data());
    if (count == MPI_UNDEFINED) count = 0;
    for (int c = 0; c < count; ++c) {
      const Pending p = pending_[static_cast<std::size_t>(indices_[static_cast<std::size_t>(c)])];
      Job& j = jobs_[p.job];
      ++completed_requests_;
      switch (p.kind) {
        case Msg::Send:
          unstage(j.prog, j.t->region);
          set_finished(j);
          break;
        case Msg::Receive: {
          if (const std::int64_t at = corrupt_at(j); at >= 0)  // test-only: flip a byte that lands in a destination shard
            region_of(j)[static_cast<std::size_t>(at)] ^= 0x5a;
          all_arrived(j);
          break;
        }
        case Msg::ChunkReceive: {
          --j.receiving;
          ++j.arrived;
          j.got[static_cast<std::size_t>(p.chunk)] = 1;
          if (const std::int64_t at = corrupt_at(j); at >= 0) {  // test-only: flipped on arrival, before forwarding
            const ChunkRange r = chain_chunk(j.bytes, j.t->chunk, p.chunk);
            if (at >= r.begin && at < r.begin + r.bytes) region_of(j)[static_cast<std::size_t>(at)] ^= 0x5a;
          }
          j.have.push_back(p.chunk);
          pump(p.job);
          if (j.arrived == j.chunks) all_arrived(j);
          break;
        }
        case Msg::ChunkSend:
          --j.in_flight[p.child];
          --j.sends_left;
          pump(p.job);
          maybe_finish(j);
          break;
      }
    }
    // Completed requests are MPI_REQUEST_NULL: drop them once they are most of the list.
    if (completed_requests_ > 64 && 2 * completed_requests_ > requests_.size()) {
      std::size_t kept = 0;
      for (std::size_t r = 0; r < requests_.size(); ++r)
        if (requests_[r] != MPI_REQUEST_NULL) {
          requests_[kept] = requests_[r];
          pending_[kept] = pending_[r];
          ++kept;
        }
      requests_.resize(kept);
      pending_.resize(kept);
      completed_requests_ = 0;
    }
    return count > 0;
  }

  // Nothing moved for the timeout: names the first operation this process still waits for, and
  // its peer.
  ExecError stall_error() const {
    std::ostringstream os;
    os << "rank " << w_.rank;
    const std::string within = " within " + format(Seconds{options_.timeout_s});
    for (std::size_t k : receives_) {
      const Job& j = jobs_[k];
      if (j.received) continue;
      const int peer = proc_of(j.t->peer);
      os << " (GPU " << progs_[j.prog].gpu << ") waited for rank " << peer << " (GPU " << j.t->peer
         << "): operation " << j.t->op;
      if (j.t->is_chain()) {
        std::int64_t missing = 0;
        while (missing < j.chunks && j.got[static_cast<std::size_t>(missing)]) ++missing;
        os << " (chain receive of " << format(Bytes{j.bytes}) << ", chunk " << missing << " of " << j.chunks << ")";
      } else {
        os << " (receive of " << format(Bytes{j.bytes}) << ")";
      }
      os << " had no answer" << within;
      return ExecError(os.str(), w_.rank, peer, true);
    }
    for (const Job& j : jobs_) {
      if (j.finished) continue;
      const GpuId g = progs_[j.prog].gpu;
      if (!j.t->is_chain()) {
        if (!j.send) continue;
        const int peer = proc_of(j.t->peer);
        os << " (GPU " << g << ") waited for rank " << peer << " (GPU " << j.t->peer << "): operation " << j.t->op
           << " (send of " << format(Bytes{j.bytes}) << ") was not taken" << within;
        return ExecError(os.str(), w_.rank, peer, true);
      }
      for (std::size_t ch = 0; ch < j.t->children.size(); ++ch) {
        if (j.in_flight[ch] == 0) continue;
        const GpuId child = j.t->children[ch];
        const int peer = proc_of(child);
        os << " (GPU " << g << ") waited for rank " << peer << " (GPU " << child << "): operation " << j.t->op
           << " (chain send of " << format(Bytes{j.bytes}) << ", " << j.in_flight[ch] << " chunk(s) of " << j.chunks
           << " in flight) was not taken" << within;
        return ExecError(os.str(), w_.rank, peer, true);
      }
    }
    return ExecError(os.str() + ": timed out after " + format(Seconds{options_.timeout_s}), w_.rank, -1, true);
  }

  static constexpr std::int64_t kReceiveWindow = 256LL << 20;  // bytes of started, unfinished receives

  const RunPlan& plan_;
  const ExecOptions& options_;
  MpiWorld& w_;
  const Schedule& s_;
  const Inventory& inv_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::int64_t tag_ub_ = 32767;
  std::vector<std::vector<std::int64_t>> first_tag_;
  std::vector<GpuProgram> progs_;
  std::vector<HostMemory> mems_;
  std::vector<std::vector<int>> readers_;
  std::vector<std::vector<char>> busy_;  // receive regions a chain op still forwards from
  std::vector<std::int64_t> staging_now_, staging_peak_;   // per program: staging bytes held, high-water mark
  std::vector<std::vector<std::int64_t>> unfinished_;      // per program, per step: jobs not finished
  std::vector<std::int32_t> open_step_;                    // per program: its lowest step with unfinished jobs
  std::vector<Job> jobs_;
  std::vector<std::unordered_map<std::int64_t, std::size_t>> send_job_, receive_job_;  // per program: op -> job
  std::vector<std::size_t> receives_, sends_;
  LocalOutcome out_;
  double t0_ = 0;
  std::vector<MPI_Request> requests_;
  std::vector<Pending> pending_;
  std::size_t completed_requests_ = 0;
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;
  std::int64_t window_ = 0;
  std::size_t finished_jobs_ = 0, next_receive_ = 0, first_unposted_ = 0;
};

}  // namespace

RunResult run_host(const RunPlan& plan, const ExecOptions& options) {
  MpiWorld w = mpi_start(options);
  if (w.world > static_cast<int>(plan.gpus.size())) {
    // Every process sees this: process 0 reports it, the others leave quietly.
    if (w.initialized_here) MPI_Finalize();
    if (w.rank != 0) return RunResult{false, w.rank, w.world, {}};
    throw ExecError("the schedule runs on " + std::to_string(plan.gpus.size()) +
                        " GPUs; start at most that many processes (mpirun -np " + std::to_string(plan.gpus.size()) +
                        "), not " + std::to_string(w.world),
                    w.rank, -1);
  }
  return HostRun(plan, options, w).run();
}

#endif

}  // namespace reshard::exec::detail
