// The reduce family: row groups (a reduction over any dimensions with the chain before it fused
// into its loads and the chains after it fused, per row and per element; templates/reduce.cuh).
// Six kernels compete: a block per row (long contiguous rows), several blocks per row (few
// rows: a loss over a whole tensor), a block of neighbouring rows with a few threads each, which
// can keep short rows in registers between passes (rows along outer or middle dimensions, where
// neighbouring rows are neighbours in memory) or, reduce_tile, in shared memory, and a
// thread-block cluster per row, which keeps long rows in registers or in shared memory between
// passes.
#include <algorithm>

#include "families.h"
#include "reduce_launch.h"

namespace fusetune {

namespace {

// What both kernels share: the planner family, the flop count, the launch header and the
// transcendental arithmetic (MATH) under the precision policy.
class ReduceKernel : public Family {
 public:
  std::string group_family() const override { return "reduce"; }
  std::string extension_includes(const Group& g, const std::string& template_file) const override {
    return "#include \"" + template_file + "\"\n#include \"reduce_launch.h\"\n";
  }
  double flops(const Group& g) const override { return (double)g.m * (double)g.k * (double)g.ops.size(); }
  bool allowed(const Group& g, const Config& c, const std::string& policy) const override {
    return math_allowed(g, c, policy);
  }
  std::string precision(const Group&, const Config& c) const override {
    return c.at("MATH") ? "fp32 (approximate transcendentals)" : "fp32";
  }
};

constexpr int64_t kSplitMaxRows = 8192;

// Why reduce_split_kernel cannot run group g (empty when it can).
std::string split_refusal(const Group& g) {
  if (g.passes != 1 || g.full_outputs != 0) return "needs one pass over each row and no per-element outputs";
  if (g.slots.size() + 2 > (size_t)kMaxSlots) return "no free kernel-argument slot for the workspace";
  if (g.m > kSplitMaxRows) return std::to_string(g.m) + " rows fill the GPU without splitting them";
  return "";
}

// The kernels that give each row (or each ROWS rows) one block are not timed on a few long rows
// that the split kernel can take: under 32 blocks of a GPU with over a hundred SMs, each
// streaming 4 MB or more, run for seconds per call (a loss over a whole tensor: one block reading
// gigabytes), and a search would spend minutes timing them.
bool few_long_rows(const Group& g, std::string& why) {
  constexpr int64_t kFewRows = 32, kLongRow = int64_t(1) << 20;
  if (g.m < kFewRows && g.k >= kLongRow && split_refusal(g).empty())
    why = std::to_string(g.m) + " row(s) of " + std::to_string(g.k) +
          " elements: a block per row would leave most of the GPU idle; reduce_split takes this group";
  return !why.empty();
}

class Reduce : public ReduceKernel {
 public:
  std::string name() const override { return "reduce"; }
  bool supports(const Group& g, std::string& why) const override { return !few_long_rows(g, why); }
  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_kernel<" + p("BLOCK") + ", " + p("ILP") + ", " + p("VEC") + ", " + p("MATH") + ", " +
           g.op_type() + ">";
  }
  LaunchDims launch(const Group& g, const Config& c) const override {
    return reduce_launch((int)c.at("BLOCK"), g.numel());
  }
  std::string launch_expr(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_launch(" + p("BLOCK") + ", args.numel)";
  }
};

// CHUNKS blocks per row (reduce_split_kernel) for groups with too few rows to fill the GPU, such
// as a loss over a whole tensor (one row): one pass and per-row outputs only.
class ReduceSplit : public ReduceKernel {
 public:
  std::string name() const override { return "reduce_split"; }
  bool supports(const Group& g, std::string& why) const override {
    why = split_refusal(g);
    return why.empty();
  }
  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_split_kernel<" + p("BLOCK") + ", " + p("ILP") + ", " + p("VEC") + ", " + p("CHUNKS") + ", " +
           p("MATH") + ", " + g.op_type() + ">";
  }
  LaunchDims launch(const Group& g, const Config& c) const override {
    return reduce_split_launch((int)c.at("BLOCK"), (int)c.at("CHUNKS"), g.numel());
  }
  std::string launch_expr(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_split_launch(" + p("BLOCK") + ", " + p("CHUNKS") + ", args.numel)";
  }
  int64_t workspace_bytes(const Group& g) const override { return reduce_split_workspace_bytes(g.m, g.stats); }
};

// split_merge's shared memory: the statistics of every thread's rows.
int64_t split_partial_bytes(const Group& g, const Config& c) {
  return 4 * c.at("RVEC") * std::max(1, g.stats) * c.at("SPLIT") * c.at("ROWS");
}

// What the kernels with ROWS x RVEC neighbouring rows per block need: RVEC rows per thread only
// where they move as vectors, and split_merge's shared memory within the 48 KB a kernel has
// statically.
bool thread_rows_fit(const Group& g, const Config& c) {
  return g.row_vector % c.at("RVEC") == 0 && split_partial_bytes(g, c) <= 48 * 1024;
}

// The kernels that keep rows on chip between their reads: only for rows read more than once
// (several passes, or per-element outputs after the statistics); no scans.
class KeepsRowsKernel : public ReduceKernel {
 public:
  bool supports(const Group& g, std::string& why) const override {
    if (g.scans > 0) why = "scans run in element order along the row";
    else if (g.passes == 1 && g.full_outputs == 0) why = "reads each row once already";
    return why.empty();
  }
};

// A thread-block cluster per row (sm_90), for rows that no single SM can hold: the row kept in
// registers (reduce_cluster_kernel).
class ReduceCluster : public KeepsRowsKernel {
 public:
  std::string name() const override { return "reduce_cluster"; }
  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_cluster_kernel<" + p("CLUSTER") + ", " + p("BLOCK") + ", " + p("MINB") + ", " + p("CACHE") +
           ", " + p("VEC") + ", " + p("MATH") + ", " + g.op_type() + ">";
  }
  LaunchDims launch(const Group& g, const Config& c) const override {
    return reduce_cluster_launch((int)c.at("CLUSTER"), (int)c.at("BLOCK"), g.numel());
  }
  std::string launch_expr(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_cluster_launch(" + p("CLUSTER") + ", " + p("BLOCK") + ", args.numel)";
  }
};

// The row kept in shared memory (reduce_cluster_smem_kernel): few registers per thread, so
// several clusters' rows in flight per SM.
class ReduceClusterSmem : public KeepsRowsKernel {
 public:
  std::string name() const override { return "reduce_cluster_smem"; }
  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_cluster_smem_kernel<" + p("CLUSTER") + ", " + p("BLOCK") + ", " + p("ILP") + ", " + p("VEC") +
           ", " + p("MATH") + ", " + g.op_type() + ">";
  }
  LaunchDims launch(const Group& g, const Config& c) const override {
    return reduce_cluster_smem_launch((int)c.at("CLUSTER"), (int)c.at("BLOCK"), g.numel(), g.k, g.varying_inputs);
  }
  std::string launch_expr(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_cluster_smem_launch(" + p("CLUSTER") + ", " + p("BLOCK") + ", args.numel, args.k, " +
           std::to_string(g.varying_inputs) + ")";
  }
  std::string extension_launch(const Group& g, const ParamText& p) const override {
    return shared_memory_opt_in(*this, g, p) + ReduceKernel::extension_launch(g, p);
  }
};

// KEEP 1 (a thread's whole share of its rows in registers) where the rows are read more than
// once, the share is more than CACHE may hold (configs/reduce_thread.json: CACHE x RVEC <= 32
// values per input) and all inputs' values fit in registers beside the rest (192 values: the 96
// channels of two rows of rmsnorm_channels take 238 registers, no spills).
bool keep_allowed(const Group& g, const Config& c) {
  if (!c.at("KEEP")) return true;
  constexpr int64_t kCacheValues = 32, kKeepValues = 192;
  const int64_t share = (g.k + c.at("SPLIT") - 1) / c.at("SPLIT"), values = share * c.at("RVEC");
  const int64_t inputs = g.out_slot;  // the slots before the outputs
  const bool reread = g.scans == 0 && (g.passes > 1 || g.full_outputs > 0);
  return reread && values > kCacheValues && values * inputs <= kKeepValues;
}

class ReduceThread : public ReduceKernel {
 public:
  std::string name() const override { return "reduce_thread"; }
  bool supports(const Group& g, std::string& why) const override { return !few_long_rows(g, why); }
  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    const std::string cache = "fusetune::thread_cache(" + p("KEEP") + ", " + p("CACHE") + ", " + std::to_string(g.k) + ", " +
                              p("SPLIT") + ")";
    return "fusetune::reduce_thread_kernel<" + p("ROWS") + ", " + p("SPLIT") + ", " + cache + ", " + p("RVEC") + ", " +
           p("MATH") + ", " + g.op_type() + ">";
  }
  bool allowed(const Group& g, const Config& c, const std::string& policy) const override {
    return thread_rows_fit(g, c) && keep_allowed(g, c) && ReduceKernel::allowed(g, c, policy);
  }
  LaunchDims launch(const Group& g, const Config& c) const override {
    return reduce_thread_launch((int)c.at("ROWS"), (int)c.at("SPLIT"), (int)c.at("RVEC"), g.numel());
  }
  std::string launch_expr(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_thread_launch(" + p("ROWS") + ", " + p("SPLIT") + ", " + p("RVEC") + ", args.numel)";
  }
};

// The rows of a block kept whole in shared memory (reduce_tile_kernel): short rows read more than
// once, with few registers per thread.
class ReduceTile : public KeepsRowsKernel {
 public:
  std::string name() const override { return "reduce_tile"; }
  bool supports(const Group& g, std::string& why) const override {
    if (!KeepsRowsKernel::supports(g, why)) return false;
    if (reduce_tile_bytes(8, 1, g.k, g.varying_inputs) > kRowSmem)
      why = "8 rows of " + std::to_string(g.k) + " elements do not fit the shared memory of a block";
    return why.empty();
  }
  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_tile_kernel<" + p("ROWS") + ", " + p("SPLIT") + ", " + p("RVEC") + ", " + p("MATH") + ", " +
           g.op_type() + ">";
  }
  // The tile and split_merge's statistics within the shared memory a row kernel asks for.
  bool allowed(const Group& g, const Config& c, const std::string& policy) const override {
    const int64_t tile = reduce_tile_bytes((int)c.at("ROWS"), (int)c.at("RVEC"), g.k, g.varying_inputs);
    return thread_rows_fit(g, c) && tile + split_partial_bytes(g, c) <= kRowSmem && ReduceKernel::allowed(g, c, policy);
  }
  LaunchDims launch(const Group& g, const Config& c) const override {
    return reduce_tile_launch((int)c.at("ROWS"), (int)c.at("SPLIT"), (int)c.at("RVEC"), g.numel(), g.k, g.varying_inputs);
  }
  std::string launch_expr(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_tile_launch(" + p("ROWS") + ", " + p("SPLIT") + ", " + p("RVEC") + ", args.numel, args.k, " +
           std::to_string(g.varying_inputs) + ")";
  }
  std::string extension_launch(const Group& g, const ParamText& p) const override {
    return shared_memory_opt_in(*this, g, p) + ReduceKernel::extension_launch(g, p);
  }
};

}  // namespace

const Family& reduce_tile_family() {
  static const ReduceTile f;
  return f;
}

const Family& reduce_family() {
  static const Reduce f;
  return f;
}

const Family& reduce_split_family() {
  static const ReduceSplit f;
  return f;
}

const Family& reduce_cluster_family() {
  static const ReduceCluster f;
  return f;
}

const Family& reduce_cluster_smem_family() {
  static const ReduceClusterSmem f;
  return f;
}

const Family& reduce_thread_family() {
  static const ReduceThread f;
  return f;
}

}  // namespace fusetune
