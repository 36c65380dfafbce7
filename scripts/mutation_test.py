#!/usr/bin/env python3
"""Mutation testing: plants one plausible bug at a time in the core (planner, layouts, validator,
estimate, simulator, verification, the checked readers, staging, implementation profiles, the
quantiser, route views, the framework adapters), rebuilds the test programs that should catch it
(or runs the Python test), runs them whole, and restores the file. A mutation is "caught" when a
test fails, and "missed" when every test passes. Prints one line per mutation and the score.

    scripts/mutation_test.py [--build build] [--only NAME ...]

Needs a configured build directory (scripts/bootstrap.sh or the README's cmake line). Every file is
restored on exit, also on Ctrl-C.
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent

# (name, file, original text, mutated text, the test programs that should catch it)
MUTATIONS = [
    ("lower bound: source GPU egress cut removed", "model/layout/src/planner.cpp",
     'worst_instance("source_gpu_egress", c.gpu_out,', 'worst_instance("source_gpu_egress", {},',
     ["test_lower_bound"]),
    ("lower bound: destination GPU ingress cut removed", "model/layout/src/planner.cpp",
     'worst_instance("dest_gpu_ingress", c.gpu_in,', 'worst_instance("dest_gpu_ingress", {},',
     ["test_lower_bound"]),
    ("lower bound: source domain egress cut removed", "model/layout/src/planner.cpp",
     'worst_instance("source_domain_egress", c.domain_out,', 'worst_instance("source_domain_egress", {},',
     ["test_lower_bound"]),
    ("topology: an NVLink domain split between fabric groups", "model/topology/src/topology_cuts.cpp",
     "for (const auto& gpus_of_domain : domain_gpus)",
     "for (const auto& gpus_of_domain : std::vector<std::vector<GpuId>>{})",
     ["test_topology"]),
    ("lower bound: fabric ingress cut removed", "model/layout/src/planner.cpp",
     'worst_instance("dest_fabric_ingress", c.group_in,', 'worst_instance("dest_fabric_ingress", {},',
     ["test_lower_bound"]),
    ("lower bound: fabric egress cut removed", "model/layout/src/planner.cpp",
     'worst_instance("source_fabric_egress", c.group_out,', 'worst_instance("source_fabric_egress", {},',
     ["test_lower_bound"]),
    ("lower bound: fabric ingress counts what the group holds", "model/layout/src/planner.cpp",
     'if (!std::binary_search(h.groups.begin(), h.groups.end(), f)) c.group_in', 'if (true) c.group_in',
     ["test_lower_bound", "test_planner_property"]),
    ("validator: the tail of a piece is not checked", "model/schedule/src/schedule.cpp",
     "    if (pos != elements)\n      throw ScheduleError", "    if (false && pos != elements)\n      throw ScheduleError",
     ["test_schedule", "test_sim_schedule"]),
    ("validator: elements delivered twice accepted", "model/schedule/src/schedule.cpp",
     "if (b < pos)", "if (false && b < pos)",
     ["test_schedule", "test_sim_schedule"]),
    ("validator: forwarding what was never received accepted", "model/schedule/src/schedule.cpp",
     "      if (!ok)\n        throw ScheduleError(where", "      if (false && !ok)\n        throw ScheduleError(where",
     ["test_schedule", "test_sim_schedule"]),
    ("verification: only the first element of each row compared", "exec/backends/src/host_memory.cpp",
     "if (std::memcmp(want.data(), got, want.size()) == 0) return;",
     "if (std::memcmp(want.data(), got, static_cast<std::size_t>(es)) == 0) return;",
     ["test_exec"]),
    ("estimate: ECMP paths not shared (each path carries all bytes)", "model/topology/src/topology.cpp",
     "double RouteView::end_share() const {\n  const double one = 1.0 / static_cast<double>(paths);",
     "double RouteView::end_share() const {\n  const double one = 1.0;",
     ["test_schedule", "test_sim_schedule"]),
    ("estimate: route latency ignored", "model/cost/src/cost.cpp",
     "  c.latency = r.latency.value;\n  (r.kind", "  c.latency = 0;\n  (r.kind",
     ["test_schedule", "test_sim_schedule"]),
    ("simulator: a fixed link's share not charged to its other links", "sim/src/maxmin.cpp",
     "other.remaining -= static_cast<double>(flows) * share;", "other.remaining -= 0.5 * static_cast<double>(flows) * share;",
     ["test_maxmin", "test_sim"]),
    ("simulator, group engine: a class of another group crossing a saturated link is not moved",
     "sim/src/group_engine.cpp",
     "if (std::find(links.begin(), links.end(), l) == links.end()) {",
     "if (true) {",
     ["test_sim"]),
    ("simulator, group engine: a link counts as dominated by a slower one", "sim/src/group_engine.cpp",
     "if (net.capacity[p].value > r * net.capacity[n].value) dominated[p] = 1;",
     "if (net.capacity[p].value < r * net.capacity[n].value) dominated[p] = 1;",
     ["test_sim"]),
    ("layout megatron: expert EP rank off by one", "model/layout/src/layout_megatron.cpp",
     "const auto ep_rank = static_cast<std::int32_t>(t.expert / (E / m.ep));",
     "const auto ep_rank = static_cast<std::int32_t>((t.expert + 1) % E / (E / m.ep));",
     ["test_layout"]),
    ("layout vllm: DP replicas interleaved", "model/layout/src/layout_vllm.cpp",
     "const Rank r = base + q % v.tp + v.tp * v.pp * (q / v.tp);", "const Rank r = base + q % v.tp + v.tp * (q / v.tp);",
     ["test_layout"]),
    ("units: KiB read as 1000 bytes", "model/core/src/units.cpp",
     '{"KiB", 1024.0},', '{"KiB", 1000.0},',
     ["test_units"]),
    ("checked readers: integer overflow of a product ignored", "model/core/src/checked.cpp",
     "if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;", "__builtin_mul_overflow(a, b, &r);",
     ["test_hostile"]),
    ("schedule reader: an op may wait for itself", "model/schedule/src/schedule.cpp",
     "ids.push_back(integer(after[k], aw.at(k), 0, op.id - 1));", "ids.push_back(integer(after[k], aw.at(k), 0, op.id));",
     ["test_hostile"]),
    ("measurement: an unverified run accepted", "model/scenario/src/scenario_digest.cpp",
     'if (v == doc.end() || *v != true) return "the run\'s data was not verified";', "",
     ["test_exec"]),
    ("exec chunks: the short last chunk dropped", "exec/program/include/reshard/exec/program.hpp",
     "return part_bytes <= 0 ? 0 : (part_bytes + chunk - 1) / chunk;", "return part_bytes <= 0 ? 0 : part_bytes / chunk;",
     ["test_exec"]),
    # The four conventions that no symmetric, default-sized case could tell apart.
    ("chain: slot-rate cap S c / latency, not (S - 1) c", "model/schedule/src/chain.cpp",
     "static_cast<double>(std::max(slots, kMinSlots) - 1) * chunk.as_double()",
     "static_cast<double>(std::max(slots, kMinSlots)) * chunk.as_double()",
     ["test_schedule"]),
    ("chain: slot-rate cap over the root-to-leaf latency, not the largest hop's", "model/schedule/src/chain.cpp",
     "out.hop_latency = Seconds{slowest_hop};", "out.hop_latency = Seconds{slowest};",
     ["test_schedule"]),
    ("layout vllm: uneven PP remainder on the first stages (not get_pp_indices')", "model/layout/src/layout_vllm.cpp",
     "counts[static_cast<std::size_t>(v.pp - i)] += 1;", "counts[static_cast<std::size_t>(i - 2)] += 1;",
     ["test_layout"]),
    ("topology: a fabric group's ingress counted on its outgoing links", "model/topology/src/topology_cuts.cpp",
     "if (to) to->ingress.value += l.bandwidth.value;", "if (from) from->ingress.value += l.bandwidth.value;",
     ["test_lower_bound"]),
    ("lower bound: fabric ingress cut over the group's egress capacity", "model/layout/src/planner.cpp",
     'for (const auto& f : fabric) cap.push_back(f.ingress.value);',
     'for (const auto& f : fabric) cap.push_back(f.egress.value);',
     ["test_lower_bound"]),
    ("tuner: a peak equal to --max-staging rejected", "model/strategy/src/tuner.cpp",
     "(!cap || p.staging_peak <= *cap)", "(!cap || p.staging_peak < *cap)",
     ["test_memory"]),
    # The code of the last review's blind spots: staging reuse, implementation profiles, vLLM
    # placement and sequence-parallel MoE, the FP8 quantiser's scale rule, route views, the
    # barrier's GPUs, the framework adapters.
    ("staging: a free region taken whole (its remainder lost)", "exec/program/src/staging.cpp",
     "if (rest > 0) safe.emplace(off + size, rest);", "(void)rest;",
     ["test_exec"]),
    ("staging: a freed region not joined to the free one before it", "exec/program/src/staging.cpp",
     "if (prev->first + prev->second == off) {", "if (false) {",
     ["test_exec"]),
    ("systems: nccl_m2n's per-call launches 10 % slower (constant and its documentation moved together)",
     "model/cost/src/systems.cpp",
     "constexpr double kLaunch = 5.0e-6;", "constexpr double kLaunch = 5.5e-6;",
     ["test_calibrate"]),
    ("systems: NeMo RL's copy passes moved away from their documented value", "model/cost/src/systems.cpp",
     "constexpr double kNemoRlCopyPasses = 14.1376;", "constexpr double kNemoRlCopyPasses = 15.5;",
     ["test_calibrate"]),
    ("systems: slime's broadcast on every rail (channels=1 dropped)", "model/cost/src/systems.cpp",
     's.strategy = "gather_broadcast channels=1 bucket=512MiB";', 's.strategy = "gather_broadcast bucket=512MiB";',
     ["test_calibrate"]),
    ("layout vllm: round-robin kept with one expert group (Kimi-K2's n_group 1)", "model/layout/src/layout_vllm.cpp",
     "if (expert_groups <= 1)", "if (expert_groups < 1)",
     ["test_layout"]),
    ("layout vllm: naive left out of the sequence-parallel MoE backends", "model/layout/src/layout_vllm.cpp",
     "v.all2all_backend == VllmAll2All::AllgatherReducescatter || v.all2all_backend == VllmAll2All::Naive ||",
     "v.all2all_backend == VllmAll2All::AllgatherReducescatter ||",
     ["test_layout"]),
    ("layout vllm: shared experts unsplit with DP 1 (the DP > 1 condition dropped)", "model/layout/src/layout_vllm.cpp",
     "v.tp > 1 && v.dp > 1 && sequence_parallel_backend", "v.tp > 1 && sequence_parallel_backend",
     ["test_layout"]),
    ("quantizer: fp8_block factor as 1 / (amax / 448)", "exec/backends/src/quantize.cpp",
     "s.factor = 448.0f / a;", "s.factor = 1.0f / (a / 448.0f);",
     ["test_precision"]),
    ("quantizer: the MX scale exponent one too high", "exec/backends/src/quantize.cpp",
     "x = std::clamp(e - 1 - 8, -127, 127);", "x = std::clamp(e - 8, -127, 127);",
     ["test_precision"]),
    ("quantizer: the fp8_block amax floor only for an all-zero block", "exec/backends/src/quantize.cpp",
     "const float a = std::max(amax, kFp8BlockAmaxFloor);", "const float a = amax > 0 ? amax : kFp8BlockAmaxFloor;",
     ["test_precision"]),
    ("quantizer: the fp8_block scale's floor 10x lower", "exec/backends/src/quantize.cpp",
     "constexpr float kFp8BlockAmaxFloor = 1e-4f;", "constexpr float kFp8BlockAmaxFloor = 1e-5f;",
     ["test_precision"]),
    ("route view: core paths' sums numbered k x S + s", "model/topology/src/topology.cpp",
     "out[s * K + k] = up", "out[k * S + s] = up",
     ["test_topology"]),
    ("route view: a leaf link given one path's share, not its spine's K paths'", "model/topology/src/topology.cpp",
     "for (std::int32_t k = 0; k < per_spine; ++k) leaf_share += one;", "leaf_share = one;",
     ["test_topology", "test_schedule"]),
    ("estimate: the GPUs a chain passes through left out of the barrier", "model/cost/src/cost.cpp",
     "for (const ChainHop& h : s.chains[static_cast<std::size_t>(op.chain)].hops) gpus.push_back(h.to);",
     "for (const ChainHop& h : s.chains[static_cast<std::size_t>(op.chain)].hops) (void)h;",
     ["test_schedule"]),
    ("adapters: one DDP wrapper stripped", "reshard/adapters.py",
     'while name.startswith("module."):', 'if name.startswith("module."):',
     ["python/test_adapters.py"]),
    ("adapters: expert_order and the plan's expert slots ignored", "reshard/adapters.py",
     "(list(expert_order) if expert_order is not None else default if default is not None else sorted(es))",
     "sorted(es)",
     ["python/test_adapters.py"]),
    ("adapters: FusedMoE looked for under mlp.experts. only", "reshard/adapters.py",
     'for p in ("mlp.experts.", "mlp.experts.routed_experts.")', 'for p in ("mlp.experts.",)',
     ["python/test_adapters.py"]),
    ("adapters: a shared expert's [gate; up] read as the routed layer's dense FFN", "reshard/adapters.py",
     '("mlp.shared_experts.linear_fc1.weight", "mlp.shared_experts.")', '("mlp.shared_experts.linear_fc1.weight", "mlp.")',
     ["python/test_adapters.py"]),
    ("adapters: a destination in another dtype written in place, not converted", "reshard/adapters.py",
     "if want is not None and t.dtype != want:  # received in the plan's dtype", "if False:  # received in the plan's dtype",
     ["python/test_adapters.py"]),
]


def run(cmd, cwd, timeout, env=None):
    return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                          env=env)


# A target is a test program of the build (tests/NAME), or a Python test of the source tree
# ("python/test_x.py", run with the build's Python and its extension, as ctest runs it).
def is_python(target):
    return target.endswith(".py")


def python_of(build):
    """The Python the build was configured with (its CMakeCache), which has torch; else this one."""
    cache = pathlib.Path(build) / "CMakeCache.txt"
    if cache.exists():
        m = re.search(r"^Python3_EXECUTABLE:[A-Z]+=(.+)$", cache.read_text(), re.M)
        if m:
            return m.group(1)
    return sys.executable


def run_target(target, build):
    if is_python(target):
        env = dict(os.environ, PYTHONPATH=str(ROOT), RESHARD_BUILD_DIR=str(build), PYTHONDONTWRITEBYTECODE="1")
        return run([python_of(build), str(ROOT / target)], ROOT, 3600, env)
    return run([str(pathlib.Path(build) / "tests" / target)], build, 3600)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--only", nargs="*", help="substrings of mutation names to run")
    ap.add_argument("-j", default="2")
    ap.add_argument("--budget", type=float, default=0, help="start no mutation after this many seconds (0: no limit)")
    ap.add_argument("--check", action="store_true",
                    help="only check that every mutation's original text occurs exactly once (ctest runs this)")
    a = ap.parse_args()
    chosen = [m for m in MUTATIONS if not a.only or any(s in m[0] for s in a.only)]
    if a.check:
        stale = [(name, rel, (ROOT / rel).read_text().count(old)) for name, rel, old, _, _ in chosen]
        stale = [x for x in stale if x[2] != 1]
        for name, rel, n in stale:
            print(f"STALE  {name}: the original text occurs {n} times in {rel}")
        print(f"{len(chosen) - len(stale)} of {len(chosen)} mutations apply")
        return 1 if stale else 0
    caught = 0
    done = 0
    start = time.time()
    for name, rel, old, new, targets in chosen:
        if a.budget and time.time() - start > a.budget:
            print(f"budget spent: {len(chosen) - done} mutations not run")
            break
        path = ROOT / rel
        original = path.read_text()
        if original.count(old) != 1:
            print(f"SKIP   {name}: the original text occurs {original.count(old)} times in {rel}")
            continue
        t0 = time.time()
        try:
            path.write_text(original.replace(old, new))
            programs = [t for t in targets if not is_python(t)]
            b = run(["cmake", "--build", a.build, "-j", a.j, "--target", *programs], ROOT, 3600) if programs else None
            if b is not None and b.returncode != 0:
                verdict = "caught (does not build)"
            else:
                failed = [t for t in targets if run_target(t, a.build).returncode != 0]
                verdict = "caught by " + ", ".join(failed) if failed else "MISSED"
        finally:
            path.write_text(original)
        caught += verdict.startswith("caught")
        done += 1
        print(f"{verdict:40s} {name}  [{rel}; {time.time() - t0:.0f} s]", flush=True)
    # Rebuild the restored sources so the build directory matches the tree again.
    programs = sorted({t for m in chosen for t in m[4] if not is_python(t)})
    if programs:
        run(["cmake", "--build", a.build, "-j", a.j, "--target", *programs], ROOT, 3600)
    print(f"score: {caught} of {done} mutations caught ({100.0 * caught / max(done, 1):.0f} %)")
    return 0 if caught == done == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
