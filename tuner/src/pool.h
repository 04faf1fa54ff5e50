// Max and average pooling (templates/pool.cuh) as one value of a fused elementwise chain: the
// planner reads the op's window, the code generator writes the call.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "graph.h"
#include "layout.h"

namespace fusetune {

struct PoolOp {
  int kind = 0;  // 0 max, 1 average counting padding, 2 average over the input only
  int lead = 0;  // batch and channel dimensions before the spatial ones
  std::vector<int64_t> out, in, kernel, stride, padding, dilation;  // per spatial dimension
  int64_t divisor = 0;                                               // avg: divisor_override
};

bool is_pool_op(const std::string& op);
// Whether max pooling returns its indices beside the values (a tuple; only the values are lowered).
bool pool_returns_indices(const std::string& op);
// The window of pooling node n from an input and an output shape; empty with `why` if unsupported.
std::optional<PoolOp> pool_of(const Node& n, const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape,
                              std::string& why);
// The fused expression: fusetune::pool<...>(the input at the output's batch and channel, its spatial
// index, fusetune::PoolWindow<ND>{...}), every size and stride of `input` (slot `slot`) a literal;
// the fourth template argument is the last dimension's kernel size where its taps may be loaded in
// pairs, else 0.
std::string pool_expr(const PoolOp& p, int slot, const Layout& input);

}  // namespace fusetune
