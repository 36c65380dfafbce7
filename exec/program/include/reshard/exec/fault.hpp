// Faults injected into a run, for tests (`reshard exec --inject`, reshard.torch's _faults): what each
// does and how the backends apply it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reshard/exec/program.hpp"

namespace reshard::exec {

struct Fault {
  enum class Kind : std::uint8_t { Corrupt, Die, Kill, Drop, Stop, StopBeforeInit } kind = Kind::Corrupt;
  std::int64_t target = 0;  // Corrupt, Drop: an op id; Die, Kill, Stop, StopBeforeInit: a process rank
  // Corrupt: which byte of those the receiver unpacks into its destination shards is flipped.
  enum class Where : std::uint8_t { First, Middle, Last } where = Where::First;
};
// "corrupt:OP" flips a byte the receiver of OP got; "die:RANK" makes that process go silent before
// its sends (it answers nobody, as a dead peer the launcher has not noticed); "kill:RANK" kills it
// with SIGKILL before its sends (the launcher notices and ends the job); "drop:OP" never sends OP.
// For a chain op, the receiver is the op's dst (its last hop's `to`): the byte is flipped in the
// chunk that holds it when that chunk arrives at dst, before dst forwards it (so dst's subtree, if
// any, gets it flipped too); and "never sends" is the root: no chunk leaves it, every GPU of the
// tree waits for its parent. "corrupt:OP@middle" and "corrupt:OP@last" flip the middle or the last
// of the bytes the receiver unpacks (in unpack order) instead of the first. "stop:RANK" stops that process (SIGSTOP) right after MPI_Init, before
// the run's setup, "stop:RANK@init" before it calls MPI_Init: the others must end within the
// timeout, naming it. Throws ConfigError on other text.
Fault parse_fault(const std::string& text);
// Whether `faults` holds a fault of kind k on target (a rank or an operation id).
bool has_fault(const std::vector<Fault>& faults, Fault::Kind k, std::int64_t target);
// The offset in a receive's staging region of the byte a corrupt fault on its op flips (-1: none
// for this op; 0 when the receive unpacks nothing).
std::int64_t corrupt_offset(const std::vector<Fault>& faults, const OpStream& receive);

}  // namespace reshard::exec
