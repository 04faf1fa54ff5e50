// The elementwise ATen ops fusetune can fuse, and the fp32 CUDA expression each one becomes.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "graph.h"

namespace fusetune {

// Positional index or keyword name of a node argument -> its CUDA expression: an operand
// (a fused value or a tensor load), a float literal for a number, or "" when absent/None.
using ArgExpr = std::function<std::string(size_t index, const char* kwarg)>;

bool is_elementwise_op(const std::string& op);
// Elementwise ops fusetune also computes on int64 tensors (in 64-bit integers, exactly): add, sub,
// mul, neg, abs, minimum, maximum, clamp, where, fmod, remainder and conversions, e.g.
// BatchNorm's num_batches_tracked + 1, a loss's target with ignored ones replaced, roll's shifted
// indices, T5's relative position buckets.
bool is_int64_op(const std::string& op);
std::string int_literal(double v);  // an integral value as a long long literal
// Positions (and keyword names) of a node's tensor operands, for the planner to resolve.
std::vector<std::pair<size_t, std::string>> tensor_operands(const Node& n);
// How an elementwise expression computes: in fp32 (FloatNoNan: no operand can be NaN, so
// minimum, maximum and the clamps need no NaN checks), or on int64 values, in 64-bit integers
// (Int64) or in ints (Int32: the operands and the result fit in 32 bits).
enum class Arith { Float, FloatNoNan, Int64, Int32 };

// The expression computing node n from its argument expressions.
std::string elementwise_expr(const Node& n, const ArgExpr& arg, Arith arith = Arith::Float);
// A float literal that reads back exactly (inf and nan included).
std::string float_literal(double v);
// A number argument of an op: an integer literal in int64 arithmetic where it is integral.
std::string number_literal(double v, bool int64);
std::vector<std::string> supported_elementwise_ops();

}  // namespace fusetune
