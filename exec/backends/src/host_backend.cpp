// The host backend: MPI processes, host memory, MPI_Isend/MPI_Irecv.
//
// Each GPU runs the operations step by step (RunPlan::step_of): it opens step k, taking the staging
// regions of all its operations of that step, once its own of the steps before are finished, so its
// staging memory is what model/memory.hpp predicts and at most its budget. Every operation is a stream (exec/program.hpp): the sender packs chunk k into
// slot k mod S of its ring once chunk k - S has left for every child, and sends it to each child;
// a receiver posts the receive of chunk k into its slot once chunk k - S is forwarded and unpacked,
// and on arrival unpacks it and forwards it to its children. A kept receive holds the whole part
// and keeps at most kChainSlots chunk receives in flight. Receives are started when their step is
// open (in op-id order, the previous op on the chain finished here); a send when the operations it
// depends on *here* are done (a receive into this GPU that it forwards, or an earlier send of this
// GPU) -- dependencies between operations of other GPUs carry no data and are not waited for
// across processes. The staging bytes each GPU holds are counted as they are allocated and
// released; the high-water mark goes into the Measurement. Progress is polled with MPI_Testsome
// against a deadline, so a peer that never answers ends the run with an ExecError instead of a hang.
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
std::shared_ptr<BackendSession> open_host_session() { return nullptr; }
#else

using namespace reshard::model;

namespace {

// The host backend's state across the runs of one Refit: MPI held initialised, and the
// operations' communicator, duplicated by the first run.
struct HostSession : BackendSession {
  MpiHold mpi;  // declared first: finalised after the communicator is freed
  MPI_Comm comm = MPI_COMM_NULL;
  ~HostSession() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
};

// The kept receive regions a send's copies read, each once.
std::vector<std::int32_t> regions_read(const OpStream& t) {
  std::vector<std::int32_t> from;
  for (const CopyRun& c : t.copies) from.push_back(c.src);
  std::sort(from.begin(), from.end());
  from.erase(std::unique(from.begin(), from.end()), from.end());
  return from;
}

// One job per stream role of a local GPU: a sender, or a receiver (forwarding to its children).
struct Job {
  std::size_t prog = 0;
  const OpStream* t = nullptr;
  const Op* op = nullptr;
  bool send = false;
  std::int64_t region_bytes = 0;  // its staging region: the ring, or the whole part when kept
  std::int32_t step = 0;          // its op's step
  bool started = false, received = false, finished = false;
  std::int64_t chunks = 0;
  std::int64_t next = 0;          // the next chunk to pack (sender) or to post a receive for (receiver)
  std::int64_t receiving = 0;     // chunk receives in flight
  std::int64_t arrived = 0;
  std::vector<std::int32_t> pending;  // per chunk: child sends in flight (-1: not yet here)
  std::int64_t done = 0;          // chunks 0 .. done - 1 are forwarded and unpacked: their slots are free
  std::int64_t sends_left = 0;    // chunk sends not completed
  std::int64_t corrupt_at = -1;   // corrupt:OP at dst: the stream byte to flip on arrival
};

// The run on this process, in phases: number the messages (tags), build the programs and memory
// of its GPUs, make a job per stream role, then the event loop (start the jobs that may start,
// pack and post what their rings allow, take completions) until every job is finished or a peer
// stays silent past the timeout.
class HostRun {
 public:
  HostRun(const RunPlan& plan, const ExecOptions& options, MpiWorld& w)
      : plan_(plan), options_(options), w_(w), s_(*plan.schedule), inv_(plan.scenario->inventory) {}

  RunResult run() {
    // The operations' messages travel on their own communicator: no tag of theirs can meet the
    // messages of the finish (mpi_common.cpp). A session's is duplicated once, for all its runs.
    auto* session = dynamic_cast<HostSession*>(options_.session.get());
    if (session && session->comm == MPI_COMM_NULL) MPI_Comm_dup(MPI_COMM_WORLD, &session->comm);
    if (session) comm_ = session->comm;
    else MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
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
      bool progress = start_receives();
      progress = start_sends() || progress;
      progress = take_completions() || progress;
      if (progress) {
        deadline = MPI_Wtime() + options_.timeout_s;
        continue;
      }
      if (MPI_Wtime() > deadline) throw stall_error();
      std::this_thread::sleep_for(kIdleSleep);
    }
    out_.elapsed = MPI_Wtime() - t0_;
    if (!session) MPI_Comm_free(&comm_);
    for (std::size_t i = 0; i < progs_.size(); ++i)
      out_.staging[static_cast<std::size_t>(plan_.gpu_index(progs_[i].gpu))] = staging_peak_[i];
    verify();
    return mpi_finish(plan_, options_, w_, out_);
  }

 private:
  int proc_of(GpuId g) const { return process_of(plan_, g, w_.world); }

  // What verification checks here (exec/verify.hpp): the pattern of every destination byte, or
  // the digest of every piece held or needed (compared across processes by mpi_finish).
  void verify() {
    for (std::size_t i = 0; i < progs_.size(); ++i) {
      if (options_.verification == Verification::Pattern) {
        std::string err = check_destinations(progs_[i], inv_, mems_[i], w_.rank, out_.bytes_verified);
        if (!err.empty() && out_.error.empty()) out_.error = err;
      } else if (options_.verification == Verification::Digest) {
        piece_digests(progs_[i], *plan_.transfers, inv_, mems_[i], out_.digests);
      }
    }
  }

  // A message is one chunk on one hop of a stream (a plain transfer: hop 0). MPI matches a message
  // by its source and tag, so tags need only tell apart the messages between one pair of
  // processes: those are numbered in (operation, hop, chunk) order, and the number modulo
  // MPI_TAG_UB + 1 (at least 32768; 2^31 with OpenMPI) is the tag. first_tag_[op][hop]: the
  // number of the op's first message on that hop, for the hops from or to this process.
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
      const std::int64_t chunks = chain_chunks(op.bytes.value, std::max<std::int64_t>(stream_chunk(s_, op).value, 1));
      if (op.chain < 0) {
        first_tag_[i].push_back(number(op.src, op.dst, chunks));
        continue;
      }
      for (const ChainHop& h : s_.chains[static_cast<std::size_t>(op.chain)].hops) first_tag_[i].push_back(number(h.from, h.to, chunks));
    }
  }
  int tag_of(std::int64_t op, std::int64_t hop, std::int64_t chunk) const {
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
      allocate(progs_[i], inv_, mems_[i], false, options_.binding, w_.rank);  // staging regions are allocated when used
      for (const auto* list : {&progs_[i].sends, &progs_[i].receives})
        for (const OpStream& t : *list)
          if (std::min(t.bytes, t.chunk) > INT_MAX)
            throw ExecError("operation " + std::to_string(t.op) +
                                " moves chunks of more than 2 GiB; the host backend sends at most 2 GiB per message",
                            w_.rank, -1, true);
      if (options_.verification == Verification::Pattern) fill_sources(progs_[i], inv_, mems_[i]);
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

  // Staging memory is released as soon as nothing needs it: a stream's region when its job is
  // finished, a kept receive's once it is all here and every send that forwards from it has packed
  // its last chunk. readers_: per region, the sends still to pack from it.
  void count_readers() {
    readers_.resize(progs_.size());
    staging_now_.assign(progs_.size(), 0);
    staging_peak_.assign(progs_.size(), 0);
    for (std::size_t i = 0; i < progs_.size(); ++i) {
      readers_[i].assign(progs_[i].regions.size(), 0);
      for (const OpStream& t : progs_[i].sends)
        for (auto r : regions_read(t))
          if (progs_[i].regions[static_cast<std::size_t>(r)].kind == Region::Kind::Receive) ++readers_[i][static_cast<std::size_t>(r)];
    }
  }
  void stage(const Job& j) {
    mems_[j.prog].hold(j.t->region, j.region_bytes);
    staging_now_[j.prog] += j.region_bytes;
    staging_peak_[j.prog] = std::max(staging_peak_[j.prog], staging_now_[j.prog]);
  }
  void unstage(std::size_t prog, std::int32_t region) {
    staging_now_[prog] -= mems_[prog].size[static_cast<std::size_t>(region)];
    mems_[prog].release(region);
  }
  // A finished receive's region: released unless a send here still packs from it.
  void release_receive(std::size_t prog, std::int32_t region) {
    if (readers_[prog][static_cast<std::size_t>(region)] == 0) unstage(prog, region);
  }
  // Whether job j's step is open on its GPU: every job of that GPU in an earlier step is finished.
  bool step_open(const Job& j) const { return j.step <= open_step_[j.prog]; }
  unsigned char* region_of(const Job& j) { return mems_[j.prog].at(j.t->region); }

  // A job per stream role; receives and sends each in op id order.
  void make_jobs() {
    send_job_.resize(progs_.size());
    receive_job_.resize(progs_.size());
    for (std::size_t i = 0; i < progs_.size(); ++i)
      for (bool send : {true, false})
        for (const OpStream& t : send ? progs_[i].sends : progs_[i].receives) {
          Job j;
          j.prog = i;
          j.t = &t;
          j.op = &s_.ops[static_cast<std::size_t>(t.op)];
          j.send = send;
          j.region_bytes = progs_[i].regions[static_cast<std::size_t>(t.region)].bytes;
          j.step = plan_.step_of[static_cast<std::size_t>(t.op)];
          j.chunks = t.chunks();
          j.pending.assign(static_cast<std::size_t>(j.chunks), -1);
          j.sends_left = j.chunks * static_cast<std::int64_t>(t.children.size());
          if (!send && j.op->dst == progs_[i].gpu && j.chunks > 0) j.corrupt_at = corrupt_offset(options_.faults, t);
          (send ? send_job_ : receive_job_)[i][t.op] = jobs_.size();
          jobs_.push_back(std::move(j));
        }
    for (std::size_t k = 0; k < jobs_.size(); ++k) (jobs_[k].send ? sends_ : receives_).push_back(k);
    unfinished_.assign(progs_.size(), std::vector<std::int64_t>(static_cast<std::size_t>(plan_.steps) + 1, 0));
    step_jobs_.assign(progs_.size(), std::vector<std::vector<std::size_t>>(static_cast<std::size_t>(plan_.steps) + 1));
    for (std::size_t k = 0; k < jobs_.size(); ++k) {
      ++unfinished_[jobs_[k].prog][static_cast<std::size_t>(jobs_[k].step)];
      step_jobs_[jobs_[k].prog][static_cast<std::size_t>(jobs_[k].step)].push_back(k);
    }
    open_step_.assign(progs_.size(), -1);
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

  enum class Msg : std::uint8_t { Receive, Send };
  struct Pending {
    Msg kind;
    std::size_t job;
    std::int64_t chunk = 0;
  };
  void post(Msg kind, std::size_t job, std::int64_t chunk, unsigned char* data, std::int64_t bytes, GpuId peer, int tag) {
    requests_.emplace_back();
    pending_.push_back({kind, job, chunk});
    if (kind == Msg::Receive)
      MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, proc_of(peer), tag, comm_, &requests_.back());
    else
      MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, proc_of(peer), tag, comm_, &requests_.back());
  }

  // Whether chunk k may take its slot: the ring's chunk k - S is forwarded and unpacked (a kept
  // receive: at most kChainSlots receives in flight).
  bool slot_free(const Job& j, std::int64_t k) const {
    if (j.t->kept()) return j.receiving < kChainSlots;
    return k < j.done + j.t->slots;
  }
  // Chunk k has been forwarded and unpacked here: its slot frees once every chunk before it has.
  void chunk_done(Job& j, std::int64_t k) {
    j.pending[static_cast<std::size_t>(k)] = -2;
    while (j.done < j.chunks && j.pending[static_cast<std::size_t>(j.done)] == -2) ++j.done;
  }
  // Sends chunk k (in its slot) to every child.
  void forward(std::size_t job, std::int64_t k) {
    Job& j = jobs_[job];
    const ChunkRange c = chain_chunk(j.t->bytes, j.t->chunk, k);
    unsigned char* data = region_of(j) + j.t->slot_offset(c.begin);
    j.pending[static_cast<std::size_t>(k)] = static_cast<std::int32_t>(j.t->children.size());
    for (std::size_t ch = 0; ch < j.t->children.size(); ++ch)
      post(Msg::Send, job, k, data, c.bytes, j.t->children[ch], tag_of(j.t->op, j.t->child_hops[ch], k));
    if (j.t->children.empty()) chunk_done(j, k);
  }

  // Posts what job `job` may post now: a sender packs and sends the chunks its ring has room for;
  // a receiver posts the receives its ring has room for.
  void pump(std::size_t job) {
    Job& j = jobs_[job];
    if (j.send) {
      while (j.next < j.chunks && slot_free(j, j.next)) {
        const std::int64_t k = j.next++;
        for_each_chunk_copy(*j.t, true, k, [&](const CopyRun& c) { run_copy(c, mems_[j.prog]); });
        if (j.next == j.chunks) packed(j);
        forward(job, k);
      }
      return;
    }
    while (j.next < j.chunks && slot_free(j, j.next)) {
      const std::int64_t k = j.next++;
      const ChunkRange c = chain_chunk(j.t->bytes, j.t->chunk, k);
      post(Msg::Receive, job, k, region_of(j) + j.t->slot_offset(c.begin), c.bytes, j.t->peer, tag_of(j.t->op, j.t->hop, k));
      ++j.receiving;
    }
  }
  // A sender has packed its last chunk: the kept receives it read are free of it.
  void packed(const Job& j) {
    for (auto r : regions_read(*j.t))
      if (progs_[j.prog].regions[static_cast<std::size_t>(r)].kind == Region::Kind::Receive &&
          --readers_[j.prog][static_cast<std::size_t>(r)] == 0 && mems_[j.prog].at(r) &&
          jobs_[receive_job_[j.prog].at(progs_[j.prog].regions[static_cast<std::size_t>(r)].op)].finished)
        unstage(j.prog, r);
  }

  // A finished job gives its region back before the GPU's next step takes its own (a step's
  // regions never overlap the previous step's, model/memory.hpp).
  void set_finished(Job& j) {
    j.finished = true;
    ++finished_jobs_;
    --unfinished_[j.prog][static_cast<std::size_t>(j.step)];
    if (j.send) unstage(j.prog, j.t->region);
    else if (j.t->kept()) release_receive(j.prog, j.t->region);
    else unstage(j.prog, j.t->region);
    advance_step(j.prog);
  }
  // Opens the GPU's next steps while the one open has nothing left: an opened step takes the
  // staging regions of all its jobs at once (model/memory.hpp: a step's regions are held together).
  void advance_step(std::size_t prog) {
    auto& open = open_step_[prog];
    while (open < plan_.steps && (open < 0 || unfinished_[prog][static_cast<std::size_t>(open)] == 0)) {
      ++open;
      if (open < plan_.steps)
        for (std::size_t k : step_jobs_[prog][static_cast<std::size_t>(open)]) stage(jobs_[k]);
    }
  }
  // A job is finished once everything arrived (a receiver), every chunk is forwarded and unpacked.
  void maybe_finish(Job& j) {
    if (j.finished || j.done < j.chunks || (j.send && j.next < j.chunks)) return;
    if (!j.send && !j.received) {
      j.received = true;
      const auto op = static_cast<std::size_t>(j.t->op);
      out_.end[op] = std::max(out_.end[op], MPI_Wtime() - t0_);
    }
    set_finished(j);
  }

  // Receives of open steps are started in op id order (a chain's once the previous op on it is
  // finished here).
  bool start_receives() {
    bool any = false;
    while (next_receive_ < receives_.size() && jobs_[receives_[next_receive_]].started) ++next_receive_;
    for (std::size_t q = next_receive_; q < receives_.size(); ++q) {
      const std::size_t k = receives_[q];
      Job& j = jobs_[k];
      if (j.started || !step_open(j)) continue;
      if (j.t->is_chain() && !chain_turn(j)) break;
      j.started = true;
      any = true;
      pump(k);
      maybe_finish(j);  // an empty part
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

  // Starts every send that is ready, in op id order.
  bool start_sends() {
    bool any = false;
    while (first_unposted_ < sends_.size() && jobs_[sends_[first_unposted_]].started) ++first_unposted_;
    for (std::size_t q = first_unposted_; q < sends_.size(); ++q) {
      const std::size_t k = sends_[q];
      Job& j = jobs_[k];
      if (j.started || !ready(j)) continue;
      j.started = true;
      any = true;
      out_.start[static_cast<std::size_t>(j.t->op)] = MPI_Wtime() - t0_;
      if (has_fault(options_.faults, Fault::Kind::Drop, j.t->op)) {  // test-only: no receiver ever gets it
        j.next = j.done = j.chunks;
        j.sends_left = 0;
        packed(j);
        set_finished(j);
        continue;
      }
      if (j.chunks == 0) packed(j);
      pump(k);
      maybe_finish(j);  // nothing to send (an empty part)
    }
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
      if (p.kind == Msg::Receive) {
        --j.receiving;
        ++j.arrived;
        const ChunkRange r = chain_chunk(j.t->bytes, j.t->chunk, p.chunk);
        if (j.corrupt_at >= r.begin && j.corrupt_at < r.begin + r.bytes)  // test-only: flipped on arrival, before forwarding
          region_of(j)[j.t->slot_offset(j.corrupt_at)] ^= 0x5a;
        for_each_chunk_copy(*j.t, false, p.chunk, [&](const CopyRun& cr) { run_copy(cr, mems_[j.prog]); });
        if (j.arrived == j.chunks) {
          j.received = true;
          const auto op = static_cast<std::size_t>(j.t->op);
          out_.end[op] = std::max(out_.end[op], MPI_Wtime() - t0_);
        }
        forward(p.job, p.chunk);
      } else {
        --j.sends_left;
        if (--j.pending[static_cast<std::size_t>(p.chunk)] == 0) chunk_done(j, p.chunk);
      }
      pump(p.job);
      maybe_finish(j);
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
    const char* kind = nullptr;
    for (std::size_t k : receives_) {
      const Job& j = jobs_[k];
      if (j.received) continue;
      const int peer = proc_of(j.t->peer);
      kind = j.t->is_chain() ? "chain receive" : "receive";
      os << " (GPU " << progs_[j.prog].gpu << ") waited for rank " << peer << " (GPU " << j.t->peer << "): operation "
         << j.t->op << " (" << kind << " of " << format(Bytes{j.t->bytes}) << ", chunk " << j.arrived << " of " << j.chunks
         << ") had no answer" << within;
      return ExecError(os.str(), w_.rank, peer, true);
    }
    for (const Job& j : jobs_) {
      if (j.finished || !j.started) continue;
      for (std::int64_t k = j.done; k < j.next; ++k) {
        if (j.pending[static_cast<std::size_t>(k)] <= 0) continue;
        const GpuId child = j.t->children.front();
        const int peer = proc_of(child);
        os << " (GPU " << progs_[j.prog].gpu << ") waited for rank " << peer << " (GPU " << child << "): operation " << j.t->op
           << " (" << (j.t->is_chain() ? "chain send" : "send") << " of " << format(Bytes{j.t->bytes}) << ", chunk " << k
           << " of " << j.chunks << " in flight) was not taken" << within;
        return ExecError(os.str(), w_.rank, peer, true);
      }
    }
    return ExecError(os.str() + ": timed out after " + format(Seconds{options_.timeout_s}), w_.rank, -1, true);
  }

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
  std::vector<std::int64_t> staging_now_, staging_peak_;   // per program: staging bytes held, high-water mark
  std::vector<std::vector<std::int64_t>> unfinished_;      // per program, per step: jobs not finished
  std::vector<std::int32_t> open_step_;                    // per program: its lowest step with unfinished jobs
  std::vector<std::vector<std::vector<std::size_t>>> step_jobs_;  // per program, per step: its jobs
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
  std::size_t finished_jobs_ = 0, next_receive_ = 0, first_unposted_ = 0;
};

}  // namespace

std::shared_ptr<BackendSession> open_host_session() { return std::make_shared<HostSession>(); }

RunResult run_host(const RunPlan& plan, const ExecOptions& options) {
  MpiWorld w = mpi_start(options);
  if (w.world > static_cast<int>(plan.gpus.size())) {
    // Every process sees this: process 0 reports it, the others leave quietly.
    if (w.initialized_here) MPI_Finalize();
    if (w.rank != 0) return RunResult{false, w.rank, w.world, {}};
    throw too_many_processes(plan, w.world, w.rank);
  }
  return HostRun(plan, options, w).run();
}

#endif

}  // namespace reshard::exec::detail
