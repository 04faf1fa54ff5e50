// The measuring worker: a separate process (`fusetune _worker --job FILE`) that loads a group's
// tensors on the GPU, then checks and times candidates one by one, printing one line per event
// on stdout. A candidate that faults ends the process; the parent restarts it for the rest.
#pragma once
#include <string>

#include "json.h"

namespace fusetune {

// Lines the worker prints: "ready <json>", "begin <name>", "result <json>".
int run_measure_worker(const std::string& job_path);

// A recorded tensor's bytes as a slot of dtype `slot` holds them: the kernels keep comparisons
// (recorded as bool, one byte per element) as float 0 / 1, a float32 slot reads a half tensor
// converted, and a half slot a float32 value rounded (one the plan stores in half); the same
// dtype passes unchanged, any other pair throws.
std::string as_slot_dtype(std::string data, const std::string& recorded, const std::string& slot);

// Summary statistics of timing samples (milliseconds).
json time_stats(std::vector<double> samples);

}  // namespace fusetune
