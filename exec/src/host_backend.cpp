// The host backend: MPI processes, host memory, MPI_Isend/MPI_Irecv.
//
// Every receive is posted before the first send; sends are posted as soon as the operations they
// depend on *here* are done (a receive into this GPU that they forward, or an earlier send of this
// GPU); dependencies between operations of other GPUs carry no data and are not waited for across
// processes. Progress is polled with MPI_Testsome against a deadline, so a peer that never answers
// ends the run with an ExecError instead of a hang.
#include "backend_impl.hpp"

#ifdef RESHARD_HAVE_MPI
#include <mpi.h>

#include <chrono>
#include <climits>
#include <csignal>
#include <sstream>
#include <thread>

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
  MpiWorld w = mpi_start();
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
  void* attr = nullptr;
  int has_attr = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attr, &has_attr);
  const std::int64_t tag_ub = has_attr ? *static_cast<int*>(attr) : 32767;
  auto tag_of = [&](std::int64_t op) { return static_cast<int>(op % (tag_ub + 1)); };

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
    for (const auto& r : progs[i].regions)
      if (r.bytes > INT_MAX)
        throw ExecError("operation " + std::to_string(r.op) + " moves more than 2 GiB; the host backend sends at most 2 GiB per message",
                        w.rank, -1, true);
    fill_sources(progs[i], inv, mems[i]);
    run_copies(progs[i].local, mems[i]);
  }
  // Staging memory is released as soon as nothing needs it: a send region when its send completes,
  // a receive region once it is unpacked and every send that forwards from it has been packed.
  std::vector<std::vector<int>> readers(progs.size());
  for (std::size_t i = 0; i < progs.size(); ++i) {
    readers[i].assign(progs[i].regions.size(), 0);
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
    if (progs[prog].regions[r].kind == Region::Kind::Receive && readers[prog][r] == 0)
      std::vector<unsigned char>().swap(mems[prog].regions[r]);
  };
  const std::size_t n_ops = s.ops.size();
  std::vector<char> recv_done(n_ops, 0), send_done(n_ops, 0);
  LocalOutcome out;
  out.start.assign(n_ops, -1);
  out.end.assign(n_ops, -1);

  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  if (has_fault(options, Fault::Kind::Kill, w.rank)) std::raise(SIGKILL);  // test-only: a rank killed before its sends
  if (has_fault(options, Fault::Kind::Die, w.rank)) go_silent(w, options.timeout_s);  // test-only: a silent peer

  struct Pending {
    bool receive;
    std::size_t prog;
    const Transfer* t;
  };
  std::vector<MPI_Request> requests;
  std::vector<Pending> pending;
  // Receives of every local GPU, in op id order, posted within a window of kReceiveWindow bytes
  // (always at least one). Deadlock-free: the sender of a posted receive waits only for operations
  // with smaller ids, whose receives here are posted before it.
  std::vector<std::pair<std::size_t, const Transfer*>> receives;
  for (std::size_t i = 0; i < progs.size(); ++i)
    for (const Transfer& t : progs[i].receives) receives.emplace_back(i, &t);
  std::sort(receives.begin(), receives.end(), [](const auto& a, const auto& b) { return a.second->op < b.second->op; });
  constexpr std::int64_t kReceiveWindow = 256LL << 20;
  std::size_t next_receive = 0;
  std::int64_t window = 0;  // bytes of posted, unfinished receives
  auto post_receives = [&] {
    bool any = false;
    while (next_receive < receives.size()) {
      const auto& [pi, t] = receives[next_receive];
      const auto r = static_cast<std::size_t>(t->region);
      const std::int64_t bytes = progs[pi].regions[r].bytes;
      if (window > 0 && window + bytes > kReceiveWindow) break;
      mems[pi].regions[r].assign(static_cast<std::size_t>(bytes), 0);
      requests.emplace_back();
      pending.push_back({true, pi, t});
      MPI_Irecv(mems[pi].regions[r].data(), static_cast<int>(bytes), MPI_BYTE, process_of(plan, t->peer, w.world),
                tag_of(t->op), MPI_COMM_WORLD, &requests.back());
      window += bytes;
      ++next_receive;
      any = true;
    }
    return any;
  };
  // Sends of every local GPU, in op id order.
  std::vector<std::pair<std::size_t, const Transfer*>> sends;
  for (std::size_t i = 0; i < progs.size(); ++i)
    for (const Transfer& t : progs[i].sends) sends.emplace_back(i, &t);
  std::sort(sends.begin(), sends.end(), [](const auto& a, const auto& b) { return a.second->op < b.second->op; });
  std::vector<char> posted(sends.size(), 0);
  std::size_t first_unposted = 0, outstanding = receives.size() + sends.size();

  auto ready = [&](const Op& op) {
    for (auto a : op.after) {
      const Op& prev = s.ops[static_cast<std::size_t>(a)];
      if (prev.dst == op.src && !recv_done[static_cast<std::size_t>(a)]) return false;  // data it forwards
      if (prev.src == op.src && !send_done[static_cast<std::size_t>(a)]) return false;  // its own earlier send
    }
    return true;
  };
  double deadline = t0 + options.timeout_s;  // moves on with every completion: the limit is on silence
  std::vector<int> indices;
  std::vector<MPI_Status> statuses;
  while (outstanding > 0) {
    bool progress = post_receives();
    while (first_unposted < sends.size() && posted[first_unposted]) ++first_unposted;
    for (std::size_t k = first_unposted; k < sends.size(); ++k) {
      if (posted[k]) continue;
      const auto& [pi, t] = sends[k];
      const Op& op = s.ops[static_cast<std::size_t>(t->op)];
      if (!ready(op)) continue;
      posted[k] = 1;
      progress = true;
      mems[pi].regions[static_cast<std::size_t>(t->region)].resize(
          static_cast<std::size_t>(progs[pi].regions[static_cast<std::size_t>(t->region)].bytes));
      run_copies(t->copies, mems[pi]);
      {
        std::vector<std::int32_t> from;
        for (const CopyRun& c : t->copies) from.push_back(c.src);
        std::sort(from.begin(), from.end());
        from.erase(std::unique(from.begin(), from.end()), from.end());
        for (auto r : from)  // a receive region read here was received (the send waits for it)
          if (--readers[pi][static_cast<std::size_t>(r)] == 0) release(pi, r);
      }
      out.start[static_cast<std::size_t>(t->op)] = MPI_Wtime() - t0;
      if (has_fault(options, Fault::Kind::Drop, t->op)) {  // test-only: the receiver never gets it
        send_done[static_cast<std::size_t>(t->op)] = 1;
        --outstanding;
        continue;
      }
      requests.emplace_back();
      pending.push_back({false, pi, t});
      MPI_Isend(mems[pi].regions[static_cast<std::size_t>(t->region)].data(),
                static_cast<int>(progs[pi].regions[static_cast<std::size_t>(t->region)].bytes), MPI_BYTE,
                process_of(plan, t->peer, w.world), tag_of(t->op), MPI_COMM_WORLD, &requests.back());
    }
    int count = 0;
    indices.resize(requests.size());
    statuses.resize(requests.size());
    if (!requests.empty())
      MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &count, indices.data(), statuses.data());
    if (count == MPI_UNDEFINED) count = 0;
    for (int c = 0; c < count; ++c) {
      const Pending& p = pending[static_cast<std::size_t>(indices[static_cast<std::size_t>(c)])];
      const auto op = static_cast<std::size_t>(p.t->op);
      progress = true;
      --outstanding;
      if (!p.receive) {
        send_done[op] = 1;
        std::vector<unsigned char>().swap(mems[p.prog].regions[static_cast<std::size_t>(p.t->region)]);
        continue;
      }
      out.end[op] = MPI_Wtime() - t0;
      auto& region = mems[p.prog].regions[static_cast<std::size_t>(p.t->region)];
      if (has_fault(options, Fault::Kind::Corrupt, p.t->op) && !region.empty()) {
        // test-only: flip a byte that lands in a destination shard (or the first byte if none does)
        const std::size_t at = p.t->copies.empty() ? 0 : static_cast<std::size_t>(p.t->copies.front().src_offset);
        region[at] ^= 0x5a;
      }
      run_copies(p.t->copies, mems[p.prog]);
      recv_done[op] = 1;
      window -= progs[p.prog].regions[static_cast<std::size_t>(p.t->region)].bytes;
      release(p.prog, p.t->region);
    }
    if (progress) {
      deadline = MPI_Wtime() + options.timeout_s;
      continue;
    }
    if (MPI_Wtime() > deadline) {
      // Name the first operation this process still waits for, and its peer.
      std::ostringstream os;
      os << "rank " << w.rank;
      for (const auto& [pi, t] : receives) {
        const auto op = static_cast<std::size_t>(t->op);
        if (recv_done[op]) continue;
        const int peer = process_of(plan, t->peer, w.world);
        os << " (GPU " << s.ops[op].dst << ") waited for rank " << peer << " (GPU " << t->peer << "): operation " << op
           << " (receive of " << format(s.ops[op].bytes) << ") had no answer within " << format(Seconds{options.timeout_s});
        throw ExecError(os.str(), w.rank, peer, true);
      }
      for (std::size_t k = 0; k < sends.size(); ++k) {
        const Transfer* t = sends[k].second;
        const auto op = static_cast<std::size_t>(t->op);
        if (send_done[op]) continue;
        const int peer = process_of(plan, t->peer, w.world);
        os << " (GPU " << s.ops[op].src << ") waited for rank " << peer << " (GPU " << t->peer << "): operation " << op
           << " (send of " << format(s.ops[op].bytes) << ") was not taken within " << format(Seconds{options.timeout_s});
        throw ExecError(os.str(), w.rank, peer, true);
      }
      throw ExecError(os.str() + ": timed out after " + format(Seconds{options.timeout_s}), w.rank, -1, true);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  out.elapsed = MPI_Wtime() - t0;
  for (std::size_t i = 0; i < progs.size(); ++i) {
    std::string err = check_destinations(progs[i], inv, mems[i], w.rank, out.bytes_verified);
    if (!err.empty() && out.error.empty()) out.error = err;
  }
  return mpi_finish(plan, options, w, out);
}

#endif

}  // namespace reshard::exec::detail
