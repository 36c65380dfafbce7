// The host backend: MPI processes, host memory, MPI_Isend/MPI_Irecv.
//
// Receives are posted in operation-id order within a byte window; sends are posted as soon as the
// operations they depend on *here* are done (a receive into this GPU that they forward, or an
// earlier send of this GPU); dependencies between operations of other GPUs carry no data and are
// not waited for across processes. A chain op moves chunk by chunk: each GPU of the tree receives
// chunk k into its region of the whole part and forwards it from there to its children as soon as
// it has arrived, at most kChainSlots chunks in flight per hop in each direction. Progress is
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

bool has_fault(const ExecOptions& o, Fault::Kind k, std::int64_t target) {
  for (const auto& f : o.faults)
    if (f.kind == k && f.target == target) return true;
  return false;
}

}  // namespace

RunResult run_host(const RunPlan& plan, const ExecOptions& options) {
  MpiWorld w = mpi_start(options);
  const Schedule& s = *plan.schedule;
  const Inventory& inv = plan.scenario->inventory;
  if (w.world > static_cast<int>(plan.gpus.size())) {
    // Every process sees this: process 0 reports it, the others leave quietly.
    if (w.initialized_here) MPI_Finalize();
    if (w.rank != 0) return RunResult{false, w.rank, w.world, {}};
    throw ExecError("the schedule runs on " + std::to_string(plan.gpus.size()) +
                        " GPUs; start at most that many processes (mpirun -np " + std::to_string(plan.gpus.size()) +
                        "), not " + std::to_string(w.world),
                    w.rank, -1);
  }
  // The operations' messages travel on their own communicator: no tag of theirs can meet the
  // messages of the finish (mpi_common.cpp). A message is one plain operation, or one chunk on one
  // hop of a chain op. MPI matches a message by its source and tag, so tags need only tell apart
  // the messages between one pair of processes: those are numbered in (operation, hop, chunk)
  // order, and the number modulo MPI_TAG_UB + 1 (at least 32768; 2^31 with OpenMPI) is the tag.
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  void* attr = nullptr;
  int has_attr = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attr, &has_attr);
  const std::int64_t tag_ub = has_attr ? *static_cast<int*>(attr) : 32767;
  // first_tag[op][hop]: the number of the op's first message on that hop (a plain op: hop 0), for
  // the hops from or to this process.
  std::vector<std::vector<std::int64_t>> first_tag(s.ops.size());
  {
    std::unordered_map<std::int64_t, std::int64_t> sent;  // (from process, to process) -> messages so far
    auto number = [&](GpuId from, GpuId to, std::int64_t messages) -> std::int64_t {
      const int a = process_of(plan, from, w.world), b = process_of(plan, to, w.world);
      if (a != w.rank && b != w.rank) return -1;
      std::int64_t& n = sent[static_cast<std::int64_t>(a) * w.world + b];
      n += messages;
      return n - messages;
    };
    for (std::size_t i = 0; i < s.ops.size(); ++i) {
      const Op& op = s.ops[i];
      if (op.chain < 0) {
        first_tag[i].push_back(number(op.src, op.dst, 1));
        continue;
      }
      const Chain& c = s.chains[static_cast<std::size_t>(op.chain)];
      const std::int64_t chunks = chain_chunks(op.bytes.value, c.chunk.value);
      for (const ChainHop& h : c.hops) first_tag[i].push_back(number(h.from, h.to, chunks));
    }
  }
  auto tag_of = [&](std::int64_t op, std::int64_t hop = 0, std::int64_t chunk = 0) {
    return static_cast<int>((first_tag[static_cast<std::size_t>(op)][static_cast<std::size_t>(hop)] + chunk) % (tag_ub + 1));
  };

  // Programs and memory for the GPUs this process runs.
  const auto mine = gpus_of_process(plan, w.rank, w.world);
  std::vector<GpuProgram> progs;
  std::vector<HostMemory> mems(mine.size());
  for (GpuId g : mine) progs.push_back(build_program(plan, g));
  {
    // Shards stay resident for the whole run; refuse a run that cannot fit rather than swap or die.
    std::int64_t resident = 0;
    for (const auto& p : progs)
      for (const auto& r : p.regions)
        if (r.kind == Region::Kind::Source || r.kind == Region::Kind::Destination) resident += r.bytes;
    // Summed over the processes of this machine; the first of them reports (and aborts the run).
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &node);
    long long mine_bytes = resident, node_bytes = 0;
    int node_rank = 0, node_size = 1;
    MPI_Allreduce(&mine_bytes, &node_bytes, 1, MPI_LONG_LONG, MPI_SUM, node);
    MPI_Comm_rank(node, &node_rank);
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
    const std::int64_t physical = static_cast<std::int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
    if (physical > 0 && node_bytes > physical && node_rank == 0)
      throw ExecError("the " + std::to_string(node_size) + " processes on rank " + std::to_string(w.rank) +
                          "'s machine need " + format(Bytes{static_cast<std::int64_t>(node_bytes)}) +
                          " of host memory for their shards; the machine has " + format(Bytes{physical}),
                      w.rank, -1, true);
  }
  for (std::size_t i = 0; i < mine.size(); ++i) {
    allocate(progs[i], mems[i], false);  // staging regions are allocated when used
    for (const auto* list : {&progs[i].sends, &progs[i].receives})
      for (const Transfer& t : *list) {
        const std::int64_t bytes = progs[i].regions[static_cast<std::size_t>(t.region)].bytes;
        if ((t.is_chain() ? std::min(bytes, t.chunk) : bytes) > INT_MAX)
          throw ExecError("operation " + std::to_string(t.op) + " moves more than 2 GiB in one message; the host backend sends at most 2 GiB per message",
                          w.rank, -1, true);
      }
    fill_sources(progs[i], inv, mems[i]);
    run_copies(progs[i].local, mems[i]);
  }
  // Staging memory is released as soon as nothing needs it: a send region when its sends complete,
  // a receive region once it is unpacked, its chunks forwarded, and every send that forwards from
  // it has been packed.
  std::vector<std::vector<int>> readers(progs.size());
  std::vector<std::vector<char>> busy(progs.size());  // receive regions a chain op still forwards from
  for (std::size_t i = 0; i < progs.size(); ++i) {
    readers[i].assign(progs[i].regions.size(), 0);
    busy[i].assign(progs[i].regions.size(), 0);
    for (const Transfer& t : progs[i].sends) {
      std::vector<std::int32_t> from;
      for (const CopyRun& c : t.copies) from.push_back(c.src);
      std::sort(from.begin(), from.end());
      from.erase(std::unique(from.begin(), from.end()), from.end());
      for (auto r : from) ++readers[i][static_cast<std::size_t>(r)];
    }
  }
  auto release = [&](std::size_t prog, std::int32_t region) {
    const auto r = static_cast<std::size_t>(region);
    if (progs[prog].regions[r].kind == Region::Kind::Receive && readers[prog][r] == 0 && !busy[prog][r])
      std::vector<unsigned char>().swap(mems[prog].regions[r]);
  };

  // One job per send or receive of a local GPU: a plain send or receive, a chain root, or a GPU
  // inside a chain (receiving, and forwarding to its children).
  struct Job {
    std::size_t prog = 0;
    const Transfer* t = nullptr;
    const Op* op = nullptr;
    bool send = false;           // a plain send or a chain root
    std::int64_t bytes = 0;      // the staging region
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
  std::vector<Job> jobs;
  std::vector<std::unordered_map<std::int64_t, std::size_t>> send_job(progs.size()), receive_job(progs.size());
  auto hop_into = [&](const Chain& c, GpuId g) {
    for (std::size_t h = 0; h < c.hops.size(); ++h)
      if (c.hops[h].to == g) return static_cast<std::int64_t>(h);
    return std::int64_t{-1};
  };
  for (std::size_t i = 0; i < progs.size(); ++i)
    for (bool send : {true, false})
      for (const Transfer& t : send ? progs[i].sends : progs[i].receives) {
        Job j;
        j.prog = i;
        j.t = &t;
        j.op = &s.ops[static_cast<std::size_t>(t.op)];
        j.send = send;
        j.bytes = progs[i].regions[static_cast<std::size_t>(t.region)].bytes;
        if (t.is_chain()) {
          const Chain& c = s.chains[static_cast<std::size_t>(t.chain)];
          j.chunks = chain_chunks(j.bytes, t.chunk);
          if (!send) j.in_hop = hop_into(c, progs[i].gpu);
          for (GpuId child : t.children) j.out_hop.push_back(hop_into(c, child));
          j.got.assign(static_cast<std::size_t>(j.chunks), 0);
          j.next_out.assign(t.children.size(), 0);
          j.in_flight.assign(t.children.size(), 0);
          j.sends_left = j.chunks * static_cast<std::int64_t>(t.children.size());
        }
        (send ? send_job : receive_job)[i][t.op] = jobs.size();
        jobs.push_back(std::move(j));
      }
  // Receives of every local GPU, and sends, each in op id order.
  std::vector<std::size_t> receives, sends;
  for (std::size_t k = 0; k < jobs.size(); ++k) (jobs[k].send ? sends : receives).push_back(k);
  auto by_op = [&](std::size_t a, std::size_t b) { return jobs[a].t->op < jobs[b].t->op; };
  std::stable_sort(receives.begin(), receives.end(), by_op);
  std::stable_sort(sends.begin(), sends.end(), by_op);
  // Whether the previous op on this job's chain is done on this GPU (chain ops on one chain run in
  // order on every GPU of the chain; every op of a chain has the same tree, so the same roles).
  auto chain_turn = [&](const Job& j) {
    const std::int64_t prev = plan.chain_prev[static_cast<std::size_t>(j.t->op)];
    if (prev < 0) return true;
    const auto& index = j.send ? send_job[j.prog] : receive_job[j.prog];
    auto it = index.find(prev);
    return it == index.end() || jobs[it->second].finished;
  };

  const std::size_t n_ops = s.ops.size();
  LocalOutcome out;
  out.start.assign(n_ops, -1);
  out.end.assign(n_ops, -1);

  MPI_Barrier(MPI_COMM_WORLD);
  setup_done(w);
  const double t0 = MPI_Wtime();
  if (has_fault(options, Fault::Kind::Kill, w.rank)) std::raise(SIGKILL);  // test-only: a rank killed before its sends
  if (has_fault(options, Fault::Kind::Die, w.rank)) go_silent(w, options.timeout_s);  // test-only: a silent peer

  enum class Msg : std::uint8_t { Receive, Send, ChunkReceive, ChunkSend };
  struct Pending {
    Msg kind;
    std::size_t job;
    std::int64_t chunk = 0;
    std::size_t child = 0;
  };
  std::vector<MPI_Request> requests;
  std::vector<Pending> pending;
  std::size_t completed_requests = 0;
  auto proc_of = [&](GpuId g) { return process_of(plan, g, w.world); };
  auto region_data = [&](const Job& j) { return mems[j.prog].regions[static_cast<std::size_t>(j.t->region)].data(); };
  // Posts what a chain job may post now: receives of the next chunks, and the chunks it holds to
  // its children, at most kChainSlots in flight on each hop.
  auto pump = [&](std::size_t k) {
    Job& j = jobs[k];
    const int from = j.send ? -1 : proc_of(j.t->peer);
    while (!j.send && j.receiving < kChainSlots && j.next_receive < j.chunks) {
      const ChunkRange c = chain_chunk(j.bytes, j.t->chunk, j.next_receive);
      requests.emplace_back();
      pending.push_back({Msg::ChunkReceive, k, j.next_receive, 0});
      MPI_Irecv(region_data(j) + c.begin, static_cast<int>(c.bytes), MPI_BYTE, from, tag_of(j.t->op, j.in_hop, j.next_receive),
                comm, &requests.back());
      ++j.receiving;
      ++j.next_receive;
    }
    for (std::size_t ch = 0; ch < j.t->children.size(); ++ch)
      while (j.in_flight[ch] < kChainSlots && j.next_out[ch] < static_cast<std::int64_t>(j.have.size())) {
        const std::int64_t chunk = j.have[static_cast<std::size_t>(j.next_out[ch]++)];
        const ChunkRange c = chain_chunk(j.bytes, j.t->chunk, chunk);
        requests.emplace_back();
        pending.push_back({Msg::ChunkSend, k, chunk, ch});
        MPI_Isend(region_data(j) + c.begin, static_cast<int>(c.bytes), MPI_BYTE, proc_of(j.t->children[ch]),
                  tag_of(j.t->op, j.out_hop[ch], chunk), comm, &requests.back());
        ++j.in_flight[ch];
      }
  };
  constexpr std::int64_t kReceiveWindow = 256LL << 20;
  std::int64_t window = 0;  // bytes of started, unfinished receives
  std::size_t finished_jobs = 0;
  auto set_finished = [&](Job& j) {
    j.finished = true;
    ++finished_jobs;
  };
  // A chain job is finished once everything arrived and every chunk it sends has been taken.
  auto maybe_finish = [&](Job& j) {
    if (j.finished || (!j.send && !j.received) || j.sends_left > 0) return;
    set_finished(j);
    if (j.send) {
      std::vector<unsigned char>().swap(mems[j.prog].regions[static_cast<std::size_t>(j.t->region)]);
      return;
    }
    window -= j.bytes;
    busy[j.prog][static_cast<std::size_t>(j.t->region)] = 0;
    release(j.prog, j.t->region);
  };
  // Everything arrived at a receiver: its time, the injected flip (plain ops), the unpack.
  auto all_arrived = [&](Job& j) {
    j.received = true;
    const auto op = static_cast<std::size_t>(j.t->op);
    out.end[op] = std::max(out.end[op], MPI_Wtime() - t0);
    run_copies(j.t->copies, mems[j.prog]);
    if (!j.t->is_chain()) {
      set_finished(j);
      window -= j.bytes;
      release(j.prog, j.t->region);
    } else {
      maybe_finish(j);
    }
  };
  // The byte corrupt:OP flips at the op's receiver: one that lands in a destination shard there.
  auto corrupt_at = [&](const Job& j) -> std::int64_t {
    if (j.bytes == 0 || j.op->dst != progs[j.prog].gpu) return -1;
    return corrupt_offset(options.faults, *j.t);
  };
  std::size_t next_receive = 0;
  auto post_receives = [&] {
    bool any = false;
    while (next_receive < receives.size()) {
      const std::size_t k = receives[next_receive];
      Job& j = jobs[k];
      if (j.t->is_chain() && !chain_turn(j)) break;
      if (window > 0 && window + j.bytes > kReceiveWindow) break;
      mems[j.prog].regions[static_cast<std::size_t>(j.t->region)].assign(static_cast<std::size_t>(j.bytes), 0);
      j.started = true;
      window += j.bytes;
      ++next_receive;
      any = true;
      if (!j.t->is_chain()) {
        requests.emplace_back();
        pending.push_back({Msg::Receive, k});
        MPI_Irecv(region_data(j), static_cast<int>(j.bytes), MPI_BYTE, proc_of(j.t->peer), tag_of(j.t->op), comm,
                  &requests.back());
        continue;
      }
      busy[j.prog][static_cast<std::size_t>(j.t->region)] = 1;
      if (j.chunks == 0) all_arrived(j);
      else pump(k);
    }
    return any;
  };

  // Whether a send's operation may go: what it forwards has arrived on its GPU, its GPU's earlier
  // sends it waits for are done, and (a chain root) the previous op on its chain has left it.
  auto ready = [&](const Job& j) {
    const GpuId g = progs[j.prog].gpu;
    for (auto a : j.op->after) {
      if (auto it = receive_job[j.prog].find(a); it != receive_job[j.prog].end() && !jobs[it->second].received) return false;
      if (s.ops[static_cast<std::size_t>(a)].src == g)
        if (auto it = send_job[j.prog].find(a); it != send_job[j.prog].end() && !jobs[it->second].finished) return false;
    }
    return !j.t->is_chain() || chain_turn(j);
  };
  std::size_t first_unposted = 0;
  double deadline = t0 + options.timeout_s;  // moves on with every completion: the limit is on silence
  std::vector<int> indices;
  std::vector<MPI_Status> statuses;
  while (finished_jobs < jobs.size()) {
    bool progress = post_receives();
    while (first_unposted < sends.size() && jobs[sends[first_unposted]].started) ++first_unposted;
    for (std::size_t q = first_unposted; q < sends.size(); ++q) {
      const std::size_t k = sends[q];
      Job& j = jobs[k];
      if (j.started || !ready(j)) continue;
      j.started = true;
      progress = true;
      auto& region = mems[j.prog].regions[static_cast<std::size_t>(j.t->region)];
      region.resize(static_cast<std::size_t>(j.bytes));
      run_copies(j.t->copies, mems[j.prog]);
      {
        std::vector<std::int32_t> from;
        for (const CopyRun& c : j.t->copies) from.push_back(c.src);
        std::sort(from.begin(), from.end());
        from.erase(std::unique(from.begin(), from.end()), from.end());
        for (auto r : from)  // a receive region read here was received (the send waits for it)
          if (--readers[j.prog][static_cast<std::size_t>(r)] == 0) release(j.prog, r);
      }
      out.start[static_cast<std::size_t>(j.t->op)] = MPI_Wtime() - t0;
      if (has_fault(options, Fault::Kind::Drop, j.t->op)) {  // test-only: no receiver ever gets it
        j.sends_left = 0;
        set_finished(j);
        std::vector<unsigned char>().swap(region);
        continue;
      }
      if (!j.t->is_chain()) {
        requests.emplace_back();
        pending.push_back({Msg::Send, k});
        MPI_Isend(region.data(), static_cast<int>(j.bytes), MPI_BYTE, proc_of(j.t->peer), tag_of(j.t->op), comm,
                  &requests.back());
        continue;
      }
      for (std::int64_t c = 0; c < j.chunks; ++c) j.have.push_back(c);
      j.received = true;
      pump(k);
      maybe_finish(j);  // nothing to send (an empty part)
    }
    int count = 0;
    indices.resize(requests.size());
    statuses.resize(requests.size());
    if (!requests.empty())
      MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &count, indices.data(), statuses.data());
    if (count == MPI_UNDEFINED) count = 0;
    for (int c = 0; c < count; ++c) {
      const Pending p = pending[static_cast<std::size_t>(indices[static_cast<std::size_t>(c)])];
      Job& j = jobs[p.job];
      progress = true;
      ++completed_requests;
      switch (p.kind) {
        case Msg::Send:
          set_finished(j);
          std::vector<unsigned char>().swap(mems[j.prog].regions[static_cast<std::size_t>(j.t->region)]);
          break;
        case Msg::Receive: {
          if (const std::int64_t at = corrupt_at(j); at >= 0)  // test-only: flip a byte that lands in a destination shard
            mems[j.prog].regions[static_cast<std::size_t>(j.t->region)][static_cast<std::size_t>(at)] ^= 0x5a;
          all_arrived(j);
          break;
        }
        case Msg::ChunkReceive: {
          --j.receiving;
          ++j.arrived;
          j.got[static_cast<std::size_t>(p.chunk)] = 1;
          if (const std::int64_t at = corrupt_at(j); at >= 0) {  // test-only: flipped on arrival, before forwarding
            const ChunkRange r = chain_chunk(j.bytes, j.t->chunk, p.chunk);
            if (at >= r.begin && at < r.begin + r.bytes)
              mems[j.prog].regions[static_cast<std::size_t>(j.t->region)][static_cast<std::size_t>(at)] ^= 0x5a;
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
    if (completed_requests > 64 && 2 * completed_requests > requests.size()) {
      std::size_t kept = 0;
      for (std::size_t r = 0; r < requests.size(); ++r)
        if (requests[r] != MPI_REQUEST_NULL) {
          requests[kept] = requests[r];
          pending[kept] = pending[r];
          ++kept;
        }
      requests.resize(kept);
      pending.resize(kept);
      completed_requests = 0;
    }
    if (progress) {
      deadline = MPI_Wtime() + options.timeout_s;
      continue;
    }
    if (MPI_Wtime() > deadline) {
      // Name the first operation this process still waits for, and its peer.
      std::ostringstream os;
      os << "rank " << w.rank;
      const std::string within = " within " + format(Seconds{options.timeout_s});
      for (std::size_t k : receives) {
        const Job& j = jobs[k];
        if (j.received) continue;
        const int peer = proc_of(j.t->peer);
        os << " (GPU " << progs[j.prog].gpu << ") waited for rank " << peer << " (GPU " << j.t->peer << "): operation " << j.t->op;
        if (j.t->is_chain()) {
          std::int64_t missing = 0;
          while (missing < j.chunks && j.got[static_cast<std::size_t>(missing)]) ++missing;
          os << " (chain receive of " << format(Bytes{j.bytes}) << ", chunk " << missing << " of " << j.chunks << ")";
        } else {
          os << " (receive of " << format(Bytes{j.bytes}) << ")";
        }
        os << " had no answer" << within;
        throw ExecError(os.str(), w.rank, peer, true);
      }
      for (std::size_t k = 0; k < jobs.size(); ++k) {
        const Job& j = jobs[k];
        if (j.finished) continue;
        const GpuId g = progs[j.prog].gpu;
        if (!j.t->is_chain()) {
          if (!j.send) continue;
          const int peer = proc_of(j.t->peer);
          os << " (GPU " << g << ") waited for rank " << peer << " (GPU " << j.t->peer << "): operation " << j.t->op
             << " (send of " << format(Bytes{j.bytes}) << ") was not taken" << within;
          throw ExecError(os.str(), w.rank, peer, true);
        }
        for (std::size_t ch = 0; ch < j.t->children.size(); ++ch) {
          if (j.in_flight[ch] == 0) continue;
          const GpuId child = j.t->children[ch];
          const int peer = proc_of(child);
          os << " (GPU " << g << ") waited for rank " << peer << " (GPU " << child << "): operation " << j.t->op
             << " (chain send of " << format(Bytes{j.bytes}) << ", " << j.in_flight[ch] << " chunk(s) of " << j.chunks
             << " in flight) was not taken" << within;
          throw ExecError(os.str(), w.rank, peer, true);
        }
      }
      throw ExecError(os.str() + ": timed out after " + format(Seconds{options.timeout_s}), w.rank, -1, true);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  out.elapsed = MPI_Wtime() - t0;
  MPI_Comm_free(&comm);
  for (std::size_t i = 0; i < progs.size(); ++i) {
    std::string err = check_destinations(progs[i], inv, mems[i], w.rank, out.bytes_verified);
    if (!err.empty() && out.error.empty()) out.error = err;
  }
  return mpi_finish(plan, options, w, out);
}

#endif

}  // namespace reshard::exec::detail
