// Planning on hand-built graphs: grouping, fusion, views read through strides, materialization
// of values needed elsewhere, the generated Op, and clear refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "error.h"
#include "families.h"
#include "graph_builder.h"
#include "index_range.h"
#include "measure.h"
#include "pipeline.h"
#include "plan.h"
#include "reduce_launch.h"
#include "results.h"
#include "tma_map.h"
#include "util.h"

namespace fusetune {
namespace {

using G = GraphBuilder;

// Planning g must stop with a UserError whose message contains `why`.
void expect_refusal(const Graph& g, const std::string& why) {
  try {
    plan_graph(g);
    FAIL() << "expected a refusal: " << why;
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

std::vector<std::string> accesses(const Group& g) {
  std::vector<std::string> a;
  for (const auto& s : g.slots) a.push_back(s.layout.base + ":" + access_name(s.access));
  return a;
}

TEST(Plan, LinearWithEpilogueIsOneGemmGroup) {
  Graph g = G()
                .value("w", {8, 5}, "parameter").value("b", {8}, "parameter").value("x", {3, 5}, "input")
                .node("permute", "aten.permute.default", {G::ref("w"), {1, 0}}, {5, 8})
                .node("addmm", "aten.addmm.default", {G::ref("b"), G::ref("x"), G::ref("permute")}, {3, 8})
                .node("gelu", "aten.gelu.default", {G::ref("addmm")}, {3, 8})
                .node("mul", "aten.mul.Tensor", {G::ref("gelu"), 0.5}, {3, 8})
                .build({"mul"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& gr = p.groups[0];
  EXPECT_EQ(gr.family, "gemm");
  EXPECT_EQ(gr.ops, (std::vector<std::string>{"aten.addmm.default", "aten.gelu.default", "aten.mul.Tensor"}));
  EXPECT_EQ(accesses(gr), (std::vector<std::string>{"x:operand", "w:operand", "b:strided", "mul:output"}));
  EXPECT_EQ(gr.slots[1].layout.sizes, (std::vector<int64_t>{1, 5, 8}));  // B = w^T read through strides
  EXPECT_EQ(gr.slots[1].layout.strides, (std::vector<int64_t>{0, 1, 5}));
  EXPECT_EQ(gr.slots[2].layout.strides, (std::vector<int64_t>{0, 1}));    // bias broadcast over rows
  EXPECT_EQ(gr.m, 3);
  EXPECT_EQ(gr.n, 8);
  EXPECT_EQ(gr.k, 5);
  EXPECT_EQ(gr.batch, 1);
  EXPECT_NE(gr.op_struct.find("fusetune::gelu_erf"), std::string::npos);
  EXPECT_NE(gr.op_struct.find("a.ptr[2][((long long)((unsigned)idx % 8u))] + x[0]"), std::string::npos) << gr.op_struct;
  EXPECT_NE(gr.op_struct.find("0.5f"), std::string::npos);
  EXPECT_EQ(p.outputs, (std::vector<std::string>{"mul"}));
}

TEST(Plan, ElementwiseChainWithSharedInputIsOneKernel) {
  Graph g = G()
                .value("x", {4, 6}, "input").value("r", {4, 6}, "input").value("c", {6}, "input")
                .node("s", "aten.sigmoid.default", {G::ref("x")}, {4, 6})
                .node("t", "aten.tanh.default", {G::ref("x")}, {4, 6})
                .node("a", "aten.add.Tensor", {G::ref("s"), G::ref("t")}, {4, 6}, {{"alpha", 2}})
                .node("b", "aten.mul.Tensor", {G::ref("a"), G::ref("r")}, {4, 6})
                .node("d", "aten.sub.Tensor", {G::ref("b"), G::ref("c")}, {4, 6})
                .build({"d"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(accesses(p.groups[0]), (std::vector<std::string>{"x:full", "r:full", "c:strided", "d:output"}));
  EXPECT_EQ(p.groups[0].n_full, 2);
  EXPECT_NE(p.groups[0].op_struct.find("2.0f * "), std::string::npos);
}

TEST(Plan, ValuesNeededElsewhereAreWritten) {
  // y = relu(x @ w); z = y * 2; out = (y @ w2, z): y feeds a second product and the epilogue.
  Graph g = G()
                .value("x", {4, 4}, "input").value("w", {4, 4}, "parameter").value("w2", {4, 4}, "parameter")
                .node("mm", "aten.mm.default", {G::ref("x"), G::ref("w")}, {4, 4})
                .node("y", "aten.relu.default", {G::ref("mm")}, {4, 4})
                .node("z", "aten.mul.Tensor", {G::ref("y"), 2}, {4, 4})
                .node("mm2", "aten.mm.default", {G::ref("y"), G::ref("w2")}, {4, 4})
                .build({"mm2", "z"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(accesses(p.groups[0]), (std::vector<std::string>{"x:operand", "w:operand", "y:output", "z:output"}));
  EXPECT_EQ(accesses(p.groups[1]), (std::vector<std::string>{"y:operand", "w2:operand", "mm2:output"}));
  EXPECT_EQ(p.outputs, (std::vector<std::string>{"mm2", "z"}));
}

TEST(Plan, TransposeOfFusedValueIsReadThroughStrides) {
  Graph g = G()
                .value("x", {4, 6}, "input").value("y", {6, 4}, "input")
                .node("e", "aten.exp.default", {G::ref("x")}, {4, 6})
                .node("t", "aten.permute.default", {G::ref("e"), {1, 0}}, {6, 4})
                .node("s", "aten.add.Tensor", {G::ref("t"), G::ref("y")}, {6, 4})
                .build({"s"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(accesses(p.groups[0]), (std::vector<std::string>{"x:full", "e:output"}));
  EXPECT_EQ(accesses(p.groups[1]), (std::vector<std::string>{"y:full", "e:strided", "s:output"}));
  EXPECT_EQ(p.groups[1].slots[1].layout.strides, (std::vector<int64_t>{1, 6}));
}

TEST(Plan, ReturnedViewIsCopiedContiguous) {
  Graph g = G().value("x", {4, 6}, "input").node("t", "aten.t.default", {G::ref("x")}, {6, 4}).build({"t"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].ops, (std::vector<std::string>{"copy"}));
  // The copy is named after the value it holds, whose reference PyTorch computes from the graph.
  EXPECT_EQ(p.outputs, (std::vector<std::string>{"t"}));
  EXPECT_EQ(p.groups[0].outputs.at(0).value, "t");
}

TEST(Plan, ViewOfAStridedValueReadsACopyNamedAfterIt) {
  Graph g = G()
                .value("x", {4, 6}, "input")
                .node("t", "aten.t.default", {G::ref("x")}, {6, 4})
                .node("v", "aten.view.default", {G::ref("t"), {24}}, {24})
                .node("e", "aten.exp.default", {G::ref("v")}, {24})
                .build({"e"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(accesses(p.groups[0]), (std::vector<std::string>{"x:strided", "t:output"}));
  EXPECT_EQ(accesses(p.groups[1]), (std::vector<std::string>{"t:full", "e:output"}));
}

TEST(Plan, BatchedAndVectorProducts) {
  Graph g = G()
                .value("a", {3, 4, 5}, "input").value("b", {5, 6}, "input").value("v", {5}, "input")
                .node("e", "aten.expand.default", {G::ref("b"), {3, 5, 6}}, {3, 5, 6})
                .node("bmm", "aten.bmm.default", {G::ref("a"), G::ref("e")}, {3, 4, 6})
                .node("m", "aten.select.int", {G::ref("a"), 0, 1}, {4, 5})
                .node("mv", "aten.mv.default", {G::ref("m"), G::ref("v")}, {4})
                .build({"bmm", "mv"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0].batch, 3);
  EXPECT_EQ(p.groups[0].slots[1].layout.strides, (std::vector<int64_t>{0, 6, 1}));
  EXPECT_EQ(p.groups[1].n, 1);
  EXPECT_EQ(p.groups[1].slots[0].layout.offset, 20);
  EXPECT_EQ(p.groups[1].slots[1].layout.sizes, (std::vector<int64_t>{1, 5, 1}));
}

TEST(Plan, UnsupportedOpNamesOpAndLine) {
  Graph g = G().value("x", {4, 6}, "input").node("c", "aten.sort.default", {G::ref("x"), 1}, {4, 6}).build({"c"});
  try {
    plan_graph(g);
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("aten.sort.default"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("m.py:3"), std::string::npos);
  }
}

TEST(Plan, Int64ValuesAreComputedInIntegers) {
  // BatchNorm's counter: num_batches_tracked + 1, a scalar int64 buffer; and an int64 input read
  // by a float op (converted, as PyTorch promotes it) next to an int64 product kept in 64 bits.
  G b;
  b.value("count", {}, "buffer", "int64").value("i", {5}, "input", "int64").value("x", {5}, "input");
  b.node("next", "aten.add.Tensor", {G::ref("count"), 1}, {});
  b.values_dtype("next", "int64");
  b.node("f", "aten.mul.Tensor", {G::ref("x"), G::ref("i")}, {5});
  b.node("twice", "aten.mul.Tensor", {G::ref("i"), 2}, {5});
  b.values_dtype("twice", "int64");
  const Plan p = plan_graph(b.build({"f", "twice", "next"}));
  ASSERT_EQ(p.groups.size(), 2u);
  const Group& counter = p.groups[0];
  EXPECT_EQ(counter.slots[0].dtype, "int64");
  EXPECT_EQ(counter.slots[0].access, Access::Strided);  // int64 operands are never loaded as floats
  EXPECT_EQ(counter.outputs.at(0).dtype, "int64");
  EXPECT_NE(counter.op_struct.find("const long long v0 = (reinterpret_cast<const long long*>(a.ptr[0])[0LL] + 1LL);"),
            std::string::npos) << counter.op_struct;
  EXPECT_NE(counter.op_struct.find("reinterpret_cast<long long*>(a.ptr[1])[idx] = v0;"), std::string::npos) << counter.op_struct;
  EXPECT_NE(counter.op_struct.find("kOut = 0;"), std::string::npos) << counter.op_struct;
  const Group& mixed = p.groups[1];
  // The float output first (the template stores it), the int64 one after it (Op::apply stores it).
  ASSERT_EQ(mixed.outputs.size(), 2u);
  EXPECT_EQ(mixed.outputs[0].value, "f");
  EXPECT_EQ(mixed.outputs[1].dtype, "int64");
  EXPECT_NE(mixed.op_struct.find("kOut = 1;"), std::string::npos) << mixed.op_struct;
  EXPECT_NE(mixed.op_struct.find("* 2LL)"), std::string::npos) << mixed.op_struct;
  EXPECT_EQ(Group::from_json(mixed.to_json()).slots.back().dtype, "int64");
}

// A group's outputs are ordered float32, then half, then int64: the templates store the float
// ones (kOut), and gemm_tma the half ones too (kHalfOut, at kOutSlot + kOut + h).
TEST(Plan, HalfOutputsFollowTheFloatOnesAndPrecedeInt64Ones) {
  G b;
  b.value("i", {5}, "input", "int64").value("x", {5}, "input");
  b.node("f", "aten.mul.Tensor", {G::ref("x"), G::ref("i")}, {5});
  b.node("twice", "aten.mul.Tensor", {G::ref("i"), 2}, {5});
  b.values_dtype("twice", "int64");
  b.node("h", "aten._to_copy.default", {G::ref("f")}, {5}, json{{"dtype", {{"dtype", "bfloat16"}}}});
  b.values_dtype("h", "bfloat16");
  const Plan p = plan_graph(b.build({"f", "twice", "h"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& g = p.groups[0];
  ASSERT_EQ(g.outputs.size(), 3u);
  EXPECT_EQ(g.outputs[0].value, "f");
  EXPECT_EQ(g.outputs[1].value, "h");
  EXPECT_EQ(g.outputs[2].value, "twice");
  const std::string h_slot = std::to_string(g.out_slot + 1), twice_slot = std::to_string(g.out_slot + 2);
  EXPECT_NE(g.op_struct.find("kOut = 1;"), std::string::npos) << g.op_struct;
  EXPECT_NE(g.op_struct.find("kHalfOut = 1;"), std::string::npos) << g.op_struct;
  EXPECT_NE(g.op_struct.find("kHalfOutBf16 = 1u;"), std::string::npos) << g.op_struct;
  EXPECT_NE(g.op_struct.find("reinterpret_cast<unsigned short*>(a.ptr[" + h_slot + "])[idx]"), std::string::npos)
      << g.op_struct;
  EXPECT_NE(g.op_struct.find("reinterpret_cast<long long*>(a.ptr[" + twice_slot + "])[idx]"), std::string::npos)
      << g.op_struct;
}

// x.float() of an int64 tensor: a conversion computed in the group that reads it, not a view that
// would read the int64 memory as floats.
TEST(Plan, Int64ToFloatCopyIsAConversion) {
  G b;
  b.value("i", {5, 7}, "input", "int64")
      .node("c", "aten._to_copy.default", {G::ref("i")}, {5, 7}, json{{"dtype", {{"dtype", "float32"}}}})
      .node("m", "aten.mul.Tensor", {G::ref("c"), 2.0}, {5, 7});
  const Plan p = plan_graph(b.build({"m"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& g = p.groups[0];
  EXPECT_EQ(g.nodes, (std::vector<std::string>{"c", "m"}));
  EXPECT_EQ(g.slots.at(0).dtype, "int64");
  EXPECT_NE(g.op_struct.find("const float v0 = (float)(reinterpret_cast<const long long*>(a.ptr[0])["), std::string::npos)
      << g.op_struct;
}

// x.bool() is x != 0 (0 / 1, as kernels hold bools: KernelBench's triu(ones(...)).bool() masks),
// x.long() truncates toward zero as PyTorch does, and a copy to the dtype the tensor has is a view.
TEST(Plan, ConversionsToBoolAndInt64AreComputed) {
  const json to_bool{{"dtype", {{"dtype", "bool"}}}}, to_int64{{"dtype", {{"dtype", "int64"}}}};
  G b;
  b.value("x", {5, 7}, "input").value("i", {5, 7}, "input", "int64");
  b.node("m", "aten._to_copy.default", {G::ref("x")}, {5, 7}, to_bool).values_dtype("m", "bool");
  b.node("f", "aten.mul.Tensor", {G::ref("x"), G::ref("m")}, {5, 7});
  b.node("t", "aten._to_copy.default", {G::ref("x")}, {5, 7}, to_int64).values_dtype("t", "int64");
  b.node("j", "aten._to_copy.default", {G::ref("i")}, {5, 7}, to_int64).values_dtype("j", "int64");
  b.node("s", "aten.add.Tensor", {G::ref("t"), G::ref("j")}, {5, 7}).values_dtype("s", "int64");
  const Plan p = plan_graph(b.build({"f", "s"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& g = p.groups[0];
  EXPECT_EQ(g.nodes, (std::vector<std::string>{"m", "f", "t", "s"}));  // j: i itself
  EXPECT_NE(g.op_struct.find("const float v0 = (float)(x[0] != 0);"), std::string::npos) << g.op_struct;
  EXPECT_NE(g.op_struct.find("const long long v2 = (long long)(x[0]);"), std::string::npos) << g.op_struct;
  EXPECT_EQ(g.outputs.at(1).dtype, "int64");
  G other;
  other.value("x", {3}, "input");
  other.node("d", "aten._to_copy.default", {G::ref("x")}, {3}, json{{"dtype", {{"dtype", "int32"}}}})
      .values_dtype("d", "int32");
  expect_refusal(other.build({"d"}), "a conversion to int32 is not lowered");
}

// T5's relative position buckets compute abs, minimum and clamp of int64 tensors: in 64-bit
// integers (llabs, llmin, llmax), not through floats, which lose units past 2^24.
TEST(Plan, Int64AbsMinimumAndClampAreIntegerArithmetic) {
  G b;
  b.value("i", {5, 7}, "input", "int64").value("j", {5, 7}, "input", "int64");
  b.node("a", "aten.abs.default", {G::ref("i")}, {5, 7}).values_dtype("a", "int64");
  b.node("m", "aten.minimum.default", {G::ref("a"), G::ref("j")}, {5, 7}).values_dtype("m", "int64");
  b.node("c", "aten.clamp.default", {G::ref("m"), json(nullptr), 31}, {5, 7}).values_dtype("c", "int64");
  b.node("x", "aten.maximum.default", {G::ref("c"), G::ref("i")}, {5, 7}).values_dtype("x", "int64");
  const Plan p = plan_graph(b.build({"x"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const std::string& ops = p.groups[0].op_struct;
  EXPECT_NE(ops.find("const long long v0 = llabs(reinterpret_cast<const long long*>(a.ptr[0])"), std::string::npos) << ops;
  EXPECT_NE(ops.find("const long long v1 = llmin(v0, reinterpret_cast<const long long*>(a.ptr[1])"), std::string::npos) << ops;
  EXPECT_NE(ops.find("const long long v2 = llmin(v1, 31LL);"), std::string::npos) << ops;
  EXPECT_NE(ops.find("const long long v3 = llmax(v2, reinterpret_cast<const long long*>(a.ptr[0])"), std::string::npos) << ops;
  EXPECT_EQ(p.groups[0].outputs.at(0).dtype, "int64");
  G other;  // an op with no int64 form
  other.value("i", {3}, "input", "int64");
  other.node("s", "aten.sqrt.default", {G::ref("i")}, {3}).values_dtype("s", "int64");
  expect_refusal(other.build({"s"}), "has dtype int64");
}

// A float16 model as capture writes it: the input converted to float32 where it is read (a full
// input of kind float16: elementwise.cuh loads it as vectors of halves), the chain computed in
// float32, the result rounded to float16 and stored as such.
TEST(Plan, HalfTensorsAreConvertedWhereLoadedAndStored) {
  G b;
  b.value("x", {5, 7}, "input", "float16")
      .node("c", "aten._to_copy.default", {G::ref("x")}, {5, 7}, json{{"dtype", {{"dtype", "float32"}}}})
      .node("r", "aten.relu.default", {G::ref("c")}, {5, 7})
      .node("o", "aten._to_copy.default", {G::ref("r")}, {5, 7}, json{{"dtype", {{"dtype", "float16"}}}})
      .values_dtype("o", "float16");
  const Plan p = plan_graph(b.build({"o"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& g = p.groups[0];
  EXPECT_EQ(g.nodes, (std::vector<std::string>{"r", "o"}));  // c is the half memory, read converted
  EXPECT_EQ(g.slots.at(0).dtype, "float16");
  EXPECT_EQ(g.slots.at(0).access, Access::Full);
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.outputs[0].dtype, "float16");
  const std::string& op = g.op_struct;
  EXPECT_NE(op.find("#include \"half.cuh\""), std::string::npos) << op;
  EXPECT_NE(op.find("kFullHalf = 1u;"), std::string::npos) << op;
  EXPECT_NE(op.find("fusetune::relu(x[0])"), std::string::npos) << op;
  EXPECT_NE(op.find("const float v1 = fusetune::round_f16((float)v0);"), std::string::npos) << op;
  EXPECT_NE(op.find("reinterpret_cast<unsigned short*>(a.ptr[1])[idx] = fusetune::float_to_f16(v1);"), std::string::npos) << op;
  EXPECT_NE(op.find("kOut = 0;"), std::string::npos) << op;
  // Templates that store half outputs as vectors (elementwise, gemm_tma) get them in y instead.
  EXPECT_NE(op.find("kHalfOut = 1;"), std::string::npos) << op;
  EXPECT_NE(op.find("kHalfOutBf16 = 0u;"), std::string::npos) << op;
  EXPECT_NE(op.find("bool kBiasInProduct = false, bool kHalfInY = false>"), std::string::npos) << op;
  EXPECT_NE(op.find("if constexpr (kHalfInY) y[kOut + 0] = v1;\n    else reinterpret_cast"), std::string::npos) << op;
  EXPECT_EQ(g.bytes_moved({{"x", 35}}), 35 * 2 + 35 * 2);
}

// A matrix product of bfloat16 tensors that the TMA GEMM can read (K-major, rows of whole 16
// bytes) reads them as they are: no conversion, bfloat16 operand slots, the weight's transpose a
// view of the weight itself; the epilogue adds a bfloat16 residual, a full input of kind
// bfloat16 (every GEMM template loads it as vectors of halves), and stores the bfloat16 result.
// Only the two GEMM families with a half instance compete for it.
TEST(Plan, HalfOperandsOfAMatrixProductAreReadAsTheyAre) {
  G b;
  b.value("x", {8, 16}, "input", "bfloat16").value("w", {32, 16}, "parameter", "bfloat16");
  b.value("r", {8, 32}, "input", "bfloat16");
  const json to_float = json{{"dtype", {{"dtype", "float32"}}}};
  b.node("cx", "aten._to_copy.default", {G::ref("x")}, {8, 16}, to_float)
      .node("cw", "aten._to_copy.default", {G::ref("w")}, {32, 16}, to_float)
      .node("cr", "aten._to_copy.default", {G::ref("r")}, {8, 32}, to_float)
      .node("t", "aten.permute.default", std::vector<json>{G::ref("cw"), json::array({1, 0})}, {16, 32})
      .node("m", "aten.mm.default", {G::ref("cx"), G::ref("t")}, {8, 32})
      .node("s", "aten.add.Tensor", {G::ref("m"), G::ref("cr")}, {8, 32})
      .node("o", "aten._to_copy.default", {G::ref("s")}, {8, 32}, json{{"dtype", {{"dtype", "bfloat16"}}}})
      .values_dtype("o", "bfloat16");
  const Plan p = plan_graph(b.build({"o"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& gr = p.groups[0];
  EXPECT_EQ(gr.family, "gemm");
  EXPECT_EQ(gr.slots[0].layout.base, "x");
  EXPECT_EQ(gr.slots[0].dtype, "bfloat16");
  EXPECT_EQ(gr.slots[1].layout.base, "w");
  EXPECT_EQ(gr.slots[1].dtype, "bfloat16");
  EXPECT_EQ(gr.slots[1].layout.strides, (std::vector<int64_t>{0, 1, 16}));
  EXPECT_EQ(gemm_operand_type(gr), 2);
  EXPECT_EQ(gr.n_full, 1);
  ASSERT_EQ(gr.slots.at(2).layout.base, "r");
  EXPECT_EQ(gr.slots[2].access, Access::Full);
  EXPECT_EQ(gr.slots[2].dtype, "bfloat16");
  EXPECT_NE(gr.op_struct.find("kFullHalf = 2u;"), std::string::npos) << gr.op_struct;
  EXPECT_NE(gr.op_struct.find("const float v1 = (v0 + x[1]);"), std::string::npos) << gr.op_struct;
  ASSERT_EQ(gr.outputs.size(), 1u);
  EXPECT_EQ(gr.outputs[0].dtype, "bfloat16");
  std::vector<std::string> families;
  for (const Family* f : families_for(gr, "sm_90")) families.push_back(f->name());
  EXPECT_EQ(families, (std::vector<std::string>{"gemm", "gemm_tma", "cublaslt_fp32"}));  // not TF32: half operands
  EXPECT_EQ(family_by_name("gemm_tma").precision(gr, Config{}), "bf16");
  EXPECT_TRUE(family_by_name("gemm_tma").allowed(gr, Config{}, "fp32"));  // exact products
}

// A plain batched A @ B of float16 tensors (B [batch][k][n], contiguous along n) reads them as
// they are too: the TMA GEMM reads B MN-major (wgmma transposes 16-bit B tiles), in tensor-map
// boxes of a k-tile's rows per block of the cluster, and its kernel takes B_MN = 1.
TEST(Plan, HalfOperandsOfAPlainProductAreReadAsTheyAre) {
  G b;
  b.value("x", {3, 8, 16}, "input", "float16").value("y", {3, 16, 40}, "input", "float16");
  const json to_float = json{{"dtype", {{"dtype", "float32"}}}};
  b.node("cx", "aten._to_copy.default", {G::ref("x")}, {3, 8, 16}, to_float)
      .node("cy", "aten._to_copy.default", {G::ref("y")}, {3, 16, 40}, to_float)
      .node("m", "aten.bmm.default", {G::ref("cx"), G::ref("cy")}, {3, 8, 40})
      .node("o", "aten._to_copy.default", {G::ref("m")}, {3, 8, 40}, json{{"dtype", {{"dtype", "float16"}}}})
      .values_dtype("o", "float16");
  const Plan p = plan_graph(b.build({"o"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& gr = p.groups[0];
  EXPECT_EQ(gr.slots[1].layout.base, "y");
  EXPECT_EQ(gr.slots[1].dtype, "float16");
  EXPECT_EQ(gr.slots[1].layout.strides, (std::vector<int64_t>{640, 40, 1}));
  EXPECT_TRUE(gemm_tma_b_mn(gr));
  const Family& tma = family_by_name("gemm_tma");
  std::string why;
  EXPECT_TRUE(tma.supports(gr, why)) << why;
  const Config c{"gemm_tma", {{"BM", 128}, {"BN", 192}, {"STAGES", 4}, {"GROUP_M", 8}, {"PINGPONG", 0}, {"CLUSTER", 2}}};
  const json extras = tma.launch_extras(gr, c);
  EXPECT_EQ(extras.at("tensor_maps"), json::array({128, 32}));  // half of a 64-row k-tile per block
  EXPECT_EQ(extras.at("tensor_map_type"), 1);
  EXPECT_EQ(extras.at("tensor_map_b_mn"), true);
  auto text = [&](const std::string& name) { return std::to_string(c.at(name)); };
  const std::string instance = tma.kernel_instance(gr, text);
  EXPECT_EQ(instance.rfind(", 1, 1>"), instance.size() - 7) << instance;  // float16, B_MN
  // B strided along both dimensions cannot be a tensor map.
  Group strided = gr;
  strided.slots[1].layout.strides = {640, 40, 2};
  EXPECT_FALSE(tma.supports(strided, why));
  EXPECT_EQ(why, "B is contiguous neither along k nor along n");
}

// An MLP in bfloat16 as capture writes it: the first Linear's ReLU is float32 in the graph and
// bfloat16 in the model (model_dtype); its only reader is the second Linear, whose weight is
// bfloat16, so it is stored in bfloat16 and both products read half operands. Read by a row
// group as well, it stays float32 and the second product converts its weight instead.
TEST(Plan, HalfActivationBetweenHalfProductsIsStoredInHalf) {
  for (const bool summed : {false, true}) {
    G b;
    b.value("x", {8, 16}, "input", "bfloat16").value("w1", {32, 16}, "parameter", "bfloat16");
    b.value("w2", {24, 32}, "parameter", "bfloat16");
    const json to_float = json{{"dtype", {{"dtype", "float32"}}}};
    b.node("cx", "aten._to_copy.default", {G::ref("x")}, {8, 16}, to_float)
        .node("cw1", "aten._to_copy.default", {G::ref("w1")}, {32, 16}, to_float)
        .node("cw2", "aten._to_copy.default", {G::ref("w2")}, {24, 32}, to_float)
        .node("t1", "aten.permute.default", std::vector<json>{G::ref("cw1"), json::array({1, 0})}, {16, 32})
        .node("m1", "aten.mm.default", {G::ref("cx"), G::ref("t1")}, {8, 32})
        .node("h", "aten.relu.default", {G::ref("m1")}, {8, 32})
        .model_dtype("m1", "bfloat16")
        .model_dtype("h", "bfloat16")
        .node("t2", "aten.permute.default", std::vector<json>{G::ref("cw2"), json::array({1, 0})}, {32, 24})
        .node("m2", "aten.mm.default", {G::ref("h"), G::ref("t2")}, {8, 24})
        .node("o", "aten._to_copy.default", {G::ref("m2")}, {8, 24}, json{{"dtype", {{"dtype", "bfloat16"}}}})
        .values_dtype("o", "bfloat16");
    std::vector<std::string> outputs = {"o"};
    if (summed) {
      b.node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("h"), json::array({1})}, {8});
      outputs.push_back("s");
    }
    const Plan p = plan_graph(b.build(outputs));
    const Group& first = p.groups.at(0);
    EXPECT_EQ(first.family, "gemm");
    ASSERT_EQ(first.outputs.size(), 1u);
    EXPECT_EQ(first.outputs[0].value, "h");
    EXPECT_EQ(first.outputs[0].dtype, summed ? "float32" : "bfloat16") << summed;
    const Group& second = *std::find_if(p.groups.begin(), p.groups.end(), [](const Group& g) { return g.nodes[0] == "m2"; });
    EXPECT_EQ(second.slots[0].layout.base, "h");
    EXPECT_EQ(second.slots[0].dtype, summed ? "float32" : "bfloat16");
    EXPECT_EQ(second.slots[1].layout.base, summed ? "cw2" : "w2");
    EXPECT_EQ(second.slots[1].dtype, summed ? "float32" : "bfloat16");
  }
}

// Half operands the TMA GEMM cannot read (K = 13: rows of 26 bytes): each one's float32
// conversion is written out once by an elementwise group before the products (which read it
// through the same views), and the float32 families run them.
TEST(Plan, HalfOperandsOfAMatrixProductAreConvertedOnceWhereTheyMustBe) {
  G b;
  b.value("x", {8, 13}, "input", "bfloat16").value("w", {32, 13}, "parameter", "bfloat16");
  const json to_float = json{{"dtype", {{"dtype", "float32"}}}};
  b.node("cx", "aten._to_copy.default", {G::ref("x")}, {8, 13}, to_float)
      .node("cw", "aten._to_copy.default", {G::ref("w")}, {32, 13}, to_float)
      .node("t", "aten.permute.default", std::vector<json>{G::ref("cw"), json::array({1, 0})}, {13, 32})
      .node("m", "aten.mm.default", {G::ref("cx"), G::ref("t")}, {8, 32})
      .node("m2", "aten.mm.default", {G::ref("cx"), G::ref("t")}, {8, 32})
      .node("s", "aten.add.Tensor", {G::ref("m"), G::ref("m2")}, {8, 32})
      .node("o", "aten._to_copy.default", {G::ref("s")}, {8, 32}, json{{"dtype", {{"dtype", "bfloat16"}}}})
      .values_dtype("o", "bfloat16");
  const Plan p = plan_graph(b.build({"o"}));
  ASSERT_EQ(p.groups.size(), 4u);  // the two conversions, then the two products
  for (int i : {0, 1}) {
    const Group& conv = p.groups[i];
    EXPECT_EQ(conv.family, "elementwise");
    EXPECT_EQ(conv.slots.at(0).dtype, "bfloat16");
    EXPECT_EQ(conv.outputs.at(0).dtype, "float32");
    EXPECT_EQ(conv.slots.at(0).access, Access::Full);  // loaded as bfloat16 vectors
    EXPECT_NE(conv.op_struct.find("kFullHalf = 2u;"), std::string::npos) << conv.op_struct;
  }
  EXPECT_EQ(p.groups[0].outputs[0].value, "cx");
  EXPECT_EQ(p.groups[1].outputs[0].value, "cw");
  const Group& first = p.groups[2];
  EXPECT_EQ(first.family, "gemm");
  EXPECT_EQ(first.slots[0].layout.base, "cx");
  EXPECT_EQ(first.slots[0].dtype, "float32");
  EXPECT_EQ(first.slots[1].layout.base, "cw");
  EXPECT_EQ(first.slots[1].layout.strides, (std::vector<int64_t>{0, 1, 13}));
  const Group& second = p.groups[3];
  EXPECT_EQ(second.slots[0].layout.base, "cx");  // not converted again
  ASSERT_EQ(second.outputs.size(), 1u);
  EXPECT_EQ(second.outputs[0].dtype, "bfloat16");
  EXPECT_NE(second.op_struct.find("= fusetune::float_to_bf16(v"), std::string::npos) << second.op_struct;
  EXPECT_NE(second.op_struct.find("kHalfOutBf16 = 1u;"), std::string::npos) << second.op_struct;
}

// A row group reads half memory as it is and stores half values: the row sum of a bfloat16 input
// (reduce.cuh converts the row's elements as it loads them, Op::slot_kind 2; no float32 copy is
// written first), rounded to float16 and stored by the row group (per row, converted by
// store_reduced); its product with a float16 per-row input joins the row group, whose generated
// code loads that input converting it.
TEST(Plan, HalfValuesOfARowGroupAreStoredByIt) {
  G b;
  b.value("x", {4, 8}, "input", "bfloat16").value("y", {4}, "input", "float16");
  b.node("cx", "aten._to_copy.default", {G::ref("x")}, {4, 8}, json{{"dtype", {{"dtype", "float32"}}}})
      .node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("cx"), json::array({1})}, {4})
      .node("o", "aten._to_copy.default", {G::ref("s")}, {4}, json{{"dtype", {{"dtype", "float16"}}}})
      .values_dtype("o", "float16")
      .node("cy", "aten._to_copy.default", {G::ref("y")}, {4}, json{{"dtype", {{"dtype", "float32"}}}})
      .node("m", "aten.mul.Tensor", {G::ref("s"), G::ref("cy")}, {4});
  const Plan p = plan_graph(b.build({"o", "m"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& rows = p.groups[0];
  EXPECT_EQ(rows.family, "reduce");
  EXPECT_EQ(rows.nodes, (std::vector<std::string>{"s", "o", "m"}));
  std::map<std::string, std::string> dtypes;
  for (const GroupOutput& out : rows.outputs) dtypes[out.value] = out.dtype;
  EXPECT_EQ(dtypes, (std::map<std::string, std::string>{{"m", "float32"}, {"o", "float16"}}));
  EXPECT_NE(rows.op_struct.find("*reinterpret_cast<unsigned short*>(p["), std::string::npos) << rows.op_struct;
  EXPECT_NE(rows.op_struct.find("]) = fusetune::float_to_f16(red["), std::string::npos) << rows.op_struct;
  EXPECT_NE(rows.op_struct.find("fusetune::round_f16("), std::string::npos) << rows.op_struct;
  EXPECT_NE(rows.op_struct.find("fusetune::f16_to_float(reinterpret_cast<const unsigned short*>(p["), std::string::npos)
      << rows.op_struct;
  std::map<std::string, std::string> inputs;
  for (const Slot& sl : rows.slots)
    if (sl.access != Access::Output) inputs[sl.layout.base] = sl.dtype;
  EXPECT_EQ(inputs, (std::map<std::string, std::string>{{"x", "bfloat16"}, {"y", "float16"}}));
  EXPECT_NE(rows.op_struct.find("kTypedSlots = true;"), std::string::npos) << rows.op_struct;
}

// Per element: a normalized row rounded to bfloat16 (softmax in a bfloat16 model) is the row
// group's bfloat16 Full output; reduce.cuh stores it through the slot's kind (Op::slot_kind 2).
TEST(Plan, HalfFullOutputOfARowGroup) {
  G b;
  b.value("x", {4, 8}, "input");
  b.node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("x"), json::array({1}), true}, {4, 1})
      .node("d", "aten.div.Tensor", {G::ref("x"), G::ref("s")}, {4, 8})
      .node("o", "aten._to_copy.default", {G::ref("d")}, {4, 8}, json{{"dtype", {{"dtype", "bfloat16"}}}})
      .values_dtype("o", "bfloat16");
  const Plan p = plan_graph(b.build({"o"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& rows = p.groups[0];
  EXPECT_EQ(rows.family, "reduce");
  ASSERT_EQ(rows.outputs.size(), 1u);
  EXPECT_EQ(rows.outputs[0].dtype, "bfloat16");
  EXPECT_EQ(rows.slots.at(rows.out_slot).dtype, "bfloat16");
  const std::string kind = "slot_kind(int i) { return i == 0 ? 0 : i == 1 ? 2 : -1; }";
  EXPECT_NE(rows.op_struct.find(kind), std::string::npos) << rows.op_struct;
  EXPECT_NE(rows.op_struct.find("fusetune::round_bf16("), std::string::npos) << rows.op_struct;
  EXPECT_EQ(rows.bytes_moved({{"x", 32}}), 32 * 4 + 32 * 2);
}

// A half tensor read by a kernel without its float32 conversion (no capture writes that) is
// refused with the value and the op.
TEST(Plan, HalfTensorReadUnconvertedIsRefused) {
  G b;
  b.value("x", {8, 16}, "input", "float16").value("w", {16, 4}, "input", "float16");
  b.node("m", "aten.mm.default", {G::ref("x"), G::ref("w")}, {8, 4});
  try {
    plan_graph(b.build({"m"}));
    FAIL() << "planned";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("value x has dtype float16 (m.py:3: m); this op reads float32 tensors only"),
              std::string::npos) << e.what();
  }
}

// A reduction of a chain that reads int64 memory: the chain stays an elementwise group (row
// kernels load floats only) and the reduction reads its float result.
TEST(Plan, ReductionOfAChainReadingInt64StartsItsOwnGroup) {
  G b;
  b.value("x", {5, 7}, "input").value("i", {5, 7}, "input", "int64");
  b.node("m", "aten.mul.Tensor", {G::ref("x"), G::ref("i")}, {5, 7});
  b.node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("m"), json::array({1})}, {5});
  const Plan p = plan_graph(b.build({"s"}));
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0].family, "elementwise");
  EXPECT_EQ(p.groups[0].slots.at(1).dtype, "int64");
  EXPECT_EQ(p.groups[1].family, "reduce");
  for (const Slot& s : p.groups[1].slots) EXPECT_EQ(s.dtype, "float32");
}

// gather along dimension 1 of x [4, 6] by an int64 index [4, 2]: the index's elements, x read
// through a view with stride 0 along that dimension plus index * its stride; the index's own
// chain (an int64 where with an int64 constant) fuses before it; an index out of range traps.
TEST(Plan, GatherReadsItsInputAtTheIndex) {
  G b;
  b.value("x", {4, 6}, "input").value("t", {4, 2}, "input", "int64");
  b.node("zero", "aten.scalar_tensor.default", {0}, {}, json{{"dtype", {{"dtype", "int64"}}}}).values_dtype("zero", "int64");
  b.node("ok", "aten.ge.Scalar", {G::ref("t"), 0}, {4, 2}).values_dtype("ok", "bool");
  b.node("i", "aten.where.self", {G::ref("ok"), G::ref("t"), G::ref("zero")}, {4, 2}).values_dtype("i", "int64");
  b.node("g", "aten.gather.default", {G::ref("x"), 1, G::ref("i")}, {4, 2});
  b.node("y", "aten.mul.Tensor", {G::ref("g"), 3.0}, {4, 2});
  const Plan p = plan_graph(b.build({"y"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& gr = p.groups[0];
  EXPECT_EQ(gr.nodes, (std::vector<std::string>{"ok", "i", "g", "y"}));
  EXPECT_NE(gr.op_struct.find("const long long v1 = (v0 != 0.f ? reinterpret_cast<const long long*>(a.ptr[0])[((long long)(unsigned)idx)] : 0LL);"),
            std::string::npos) << gr.op_struct;
  EXPECT_NE(gr.op_struct.find("const long long v2_at = v1;\n    if ((unsigned long long)v2_at >= 6ULL) __trap();"),
            std::string::npos)
      << gr.op_struct;
  // Every offset it can read fits in an int: computed in ints.
  EXPECT_NE(gr.op_struct.find("const float v2 = a.ptr[1][((int)((unsigned)idx / 2u) * 6) + (int)v2_at * 1];"),
            std::string::npos)
      << gr.op_struct;
  const Layout& view = gr.slots.at(1).layout;
  EXPECT_EQ(view.sizes, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(view.strides, (std::vector<int64_t>{6, 0}));
}

// A gather from an input of more than 2^31 elements computes its offsets in 64 bits.
// scaled_dot_product_attention (capture keeps it where the attention family runs it) is one
// group: q, k and v read through their strides as [batch, heads, seq, D] (a 3-D operand gets a
// head dimension of stride 0), the elementwise chain after it fused, its scale and causal flag
// recorded and baked into the kernel (scale * log2(e) as float bits).
TEST(Plan, AttentionIsOneGroupReadingItsOperandsThroughStrides) {
  Graph g = G().value("x", {2, 70, 3, 4, 16}, "input").value("r", {2, 4, 70, 16}, "input").value("f", {5, 9, 24}, "input")
                .node("q", "aten.select.int", {G::ref("x"), 2, 0}, {2, 70, 4, 16})
                .node("qt", "aten.permute.default", {G::ref("q"), {0, 2, 1, 3}}, {2, 4, 70, 16})
                .node("k", "aten.select.int", {G::ref("x"), 2, 1}, {2, 70, 4, 16})
                .node("kt", "aten.permute.default", {G::ref("k"), {0, 2, 1, 3}}, {2, 4, 70, 16})
                .node("a", "aten.scaled_dot_product_attention.default",
                      {G::ref("qt"), G::ref("kt"), G::ref("kt"), nullptr, 0.0, true}, {2, 4, 70, 16})
                .node("y", "aten.add.Tensor", {G::ref("a"), G::ref("r")}, {2, 4, 70, 16})
                .node("flat", "aten.scaled_dot_product_attention.default", {G::ref("f"), G::ref("f"), G::ref("f")},
                      {5, 9, 24}, {{"scale", 0.5}})
                .build({"y", "flat"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 2u);
  const Group& gr = p.groups[0];
  EXPECT_EQ(gr.family, "attention");
  EXPECT_EQ(accesses(gr), (std::vector<std::string>{"x:operand", "x:operand", "x:operand", "r:full", "y:output"}));
  EXPECT_EQ(gr.slots[0].layout.strides, (std::vector<int64_t>{13440, 16, 192, 1}));
  EXPECT_EQ(gr.slots[0].layout.offset, 0);
  EXPECT_EQ(gr.slots[1].layout.offset, 64);
  EXPECT_EQ(gr.m, 70);
  EXPECT_EQ(gr.n, 70);
  EXPECT_EQ(gr.k, 16);
  EXPECT_EQ(gr.batch, 8);
  EXPECT_TRUE(gr.attention.causal);
  EXPECT_DOUBLE_EQ(gr.attention.scale, 0.25);
  const Family& f = family_by_name("attention");
  const ParamText p4 = [](const std::string& name) {
    return name == "WARPS" ? std::string("4") : name == "BN" ? "64" : name == "STAGES" ? "2" : "1";
  };
  EXPECT_EQ(f.kernel_instance(gr, p4), "fusetune::attention_kernel<4, 64, 16, 2, 1, true, 0x3eb8aa3bu, 0, fusetune_gen::g0_op>");
  const Group& flat = p.groups[1];
  EXPECT_EQ(flat.slots[0].layout.sizes, (std::vector<int64_t>{5, 1, 9, 24}));
  EXPECT_EQ(flat.slots[0].layout.strides, (std::vector<int64_t>{216, 0, 24, 1}));
  EXPECT_FALSE(flat.attention.causal);
  EXPECT_DOUBLE_EQ(flat.attention.scale, 0.5);
  const Group back = Group::from_json(flat.to_json());
  EXPECT_EQ(back.attention.scale, 0.5);
  EXPECT_EQ(back.m, 9);
  EXPECT_EQ(back.batch, 5);
  // TF32 products under the tf32 policy only; tiles past a block's shared memory are left out.
  const Config tf32{"attention", {{"WARPS", 4}, {"BN", 64}, {"STAGES", 2}, {"SPLIT", 1}}},
      x3{"attention", {{"WARPS", 4}, {"BN", 64}, {"STAGES", 2}, {"SPLIT", 3}}};
  EXPECT_TRUE(f.allowed(gr, tf32, "tf32"));
  EXPECT_FALSE(f.allowed(gr, tf32, "fp32"));
  EXPECT_TRUE(f.allowed(gr, x3, "fp32"));
  EXPECT_EQ(f.launch(gr, tf32).shared_bytes, 2u * 2 * 64 * 20 * 4);
  Group wide = gr;
  wide.k = 256;
  EXPECT_FALSE(f.allowed(wide, x3, "tf32"));
}

// The heads merged back after attention ([batch, heads, seq, D] permuted to [batch, seq, heads,
// D] and made contiguous, or [batch x heads, seq, D] to [seq, batch x heads, D]): the kernel
// stores its output in the permuted order (OUT_RANK, the slot's strides), so no copy follows.
TEST(Plan, AttentionWritesItsOutputWhereAPermutationReadsItContiguous) {
  Graph g = G().value("q", {2, 4, 70, 16}, "input").value("f", {5, 9, 24}, "input")
                .node("a", "aten.scaled_dot_product_attention.default", {G::ref("q"), G::ref("q"), G::ref("q")}, {2, 4, 70, 16})
                .node("t", "aten.permute.default", {G::ref("a"), {0, 2, 1, 3}}, {2, 70, 4, 16})
                .node("c", "aten.clone.default", {G::ref("t")}, {2, 70, 4, 16}, {{"memory_format", nullptr}})
                .node("b", "aten.scaled_dot_product_attention.default", {G::ref("f"), G::ref("f"), G::ref("f")}, {5, 9, 24})
                .node("bt", "aten.permute.default", {G::ref("b"), {1, 0, 2}}, {9, 5, 24})
                .node("bc", "aten.clone.default", {G::ref("bt")}, {9, 5, 24}, {{"memory_format", nullptr}})
                .build({"c", "bc"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 2u);
  const Family& f = family_by_name("attention");
  const ParamText p4 = [](const std::string& name) {
    return name == "WARPS" ? std::string("4") : name == "BN" ? "64" : name == "STAGES" ? "2" : "1";
  };
  const Group& heads = p.groups[0];
  ASSERT_EQ(heads.outputs.size(), 1u);
  EXPECT_EQ(heads.outputs[0].value, "t");
  EXPECT_EQ(heads.outputs[0].shape, (std::vector<int64_t>{2, 70, 4, 16}));
  const Slot& out = heads.slots.back();
  EXPECT_EQ(out.access, Access::Output);
  EXPECT_EQ(out.layout.sizes, (std::vector<int64_t>{2, 4, 70, 16}));
  EXPECT_EQ(out.layout.strides, (std::vector<int64_t>{4480, 16, 64, 1}));
  EXPECT_NE(f.kernel_instance(heads, p4).find(", 4, fusetune_gen::g0_op>"), std::string::npos);
  const Group& flat = p.groups[1];
  EXPECT_EQ(flat.outputs.at(0).value, "bt");
  EXPECT_EQ(flat.slots.back().layout.strides, (std::vector<int64_t>{24, 120, 1}));
  EXPECT_NE(f.kernel_instance(flat, p4).find(", 3, fusetune_gen::g1_op>"), std::string::npos);
  EXPECT_EQ(p.outputs, (std::vector<std::string>{"t", "bt"}));
}

TEST(Plan, AttentionFormsTheKernelCannotRunAreRefused) {
  auto sdpa = [](std::vector<int64_t> q, std::vector<int64_t> k, json kwargs = json::object()) {
    return G().value("q", q, "input").value("k", k, "input")
        .node("a", "aten.scaled_dot_product_attention.default", {G::ref("q"), G::ref("k"), G::ref("k")}, q, kwargs)
        .build({"a"});
  };
  expect_refusal(sdpa({2, 5, 12}, {2, 5, 12}), "head dimensions other than multiples of 8 up to 128");
  expect_refusal(sdpa({2, 3, 5, 16}, {2, 2, 5, 16}), "do not broadcast over q's batch and heads");
  expect_refusal(sdpa({2, 5, 16}, {2, 5, 16}, {{"dropout_p", 0.1}}), "dropout");
  expect_refusal(sdpa({2, 3, 5, 16}, {2, 2, 5, 16}, {{"enable_gqa", true}}), "grouped heads other than");
  expect_refusal(sdpa({6, 5, 16}, {2, 5, 16}, {{"enable_gqa", true}}), "grouped heads other than");
}

// Grouped-query attention (enable_gqa): K and V are read with their own heads, fewer than Q's;
// the kernel maps Q's head to theirs, so its instance is the plain one.
TEST(Plan, AttentionReadsGroupedHeadsAsTheyAre) {
  Graph g = G().value("q", {2, 6, 33, 32}, "input").value("kv", {2, 33, 2, 2, 32}, "input")
                .node("k", "aten.select.int", {G::ref("kv"), 2, 0}, {2, 33, 2, 32})
                .node("kt", "aten.permute.default", {G::ref("k"), {0, 2, 1, 3}}, {2, 2, 33, 32})
                .node("v", "aten.select.int", {G::ref("kv"), 2, 1}, {2, 33, 2, 32})
                .node("vt", "aten.permute.default", {G::ref("v"), {0, 2, 1, 3}}, {2, 2, 33, 32})
                .node("a", "aten.scaled_dot_product_attention.default", {G::ref("q"), G::ref("kt"), G::ref("vt")},
                      {2, 6, 33, 32}, {{"is_causal", true}, {"enable_gqa", true}})
                .build({"a"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& gr = p.groups[0];
  EXPECT_EQ(gr.family, "attention");
  EXPECT_EQ(gr.batch, 12);
  EXPECT_EQ(gr.slots[1].layout.sizes, (std::vector<int64_t>{2, 2, 33, 32}));
  EXPECT_EQ(gr.slots[1].layout.strides, (std::vector<int64_t>{4224, 32, 128, 1}));
  EXPECT_EQ(gr.slots[2].layout.offset, 64);
  const ParamText p4 = [](const std::string& name) {
    return name == "WARPS" ? std::string("4") : name == "BN" ? "64" : name == "STAGES" ? "2" : "1";
  };
  EXPECT_EQ(family_by_name("attention").kernel_instance(gr, p4),
            "fusetune::attention_kernel<4, 64, 32, 2, 1, true, 0x3e8293eeu, 0, fusetune_gen::g0_op>");
}

TEST(Plan, GatherFromAHugeInputHasLongOffsets) {
  G b;
  b.value("x", {70000, 40000}, "input").value("t", {70000, 1}, "input", "int64");
  b.node("g", "aten.gather.default", {G::ref("x"), 1, G::ref("t")}, {70000, 1});
  const Plan p = plan_graph(b.build({"g"}));
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_NE(p.groups[0].op_struct.find("a.ptr[1][((long long)(unsigned)idx * 40000) + v0_at * 1LL]"), std::string::npos)
      << p.groups[0].op_struct;
}

TEST(Plan, GatherByAFloatIndexIsRefused) {
  G b;
  b.value("x", {4, 6}, "input").value("f", {4, 1}, "input");
  b.node("g", "aten.gather.default", {G::ref("x"), 1, G::ref("f")}, {4, 1});
  expect_refusal(b.build({"g"}), "the index must be int64");
}

// A comparison read by a later group is written as float 0 / 1 (as the kernels hold it); a model
// returning a bool tensor is refused.
TEST(Plan, ComparisonsInMemoryAreFloats) {
  G b;
  b.value("x", {4, 6}, "input");
  b.node("pos", "aten.gt.Scalar", {G::ref("x"), 0}, {4, 6}).values_dtype("pos", "bool");
  b.node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("x"), json::array({1}), true}, {4, 1});
  b.node("d", "aten.div.Tensor", {G::ref("x"), G::ref("s")}, {4, 6});
  b.node("y", "aten.where.self", {G::ref("pos"), G::ref("d"), 0.0}, {4, 6});
  const Plan p = plan_graph(b.build({"y"}));
  ASSERT_EQ(p.groups.size(), 2u);
  ASSERT_EQ(p.groups[0].outputs.size(), 1u);
  EXPECT_EQ(p.groups[0].outputs[0].value, "pos");
  EXPECT_EQ(p.groups[0].outputs[0].dtype, "float32");
  // The measuring worker gets PyTorch's bool reference of it (one byte per element) as floats.
  const std::string recorded{'\1', '\0', '\1'};
  const std::string floats = as_slot_dtype(recorded, "bool", "float32");
  ASSERT_EQ(floats.size(), 3 * sizeof(float));
  float f[3];
  std::memcpy(f, floats.data(), sizeof f);
  EXPECT_EQ(std::vector<float>(f, f + 3), (std::vector<float>{1.f, 0.f, 1.f}));
  EXPECT_EQ(as_slot_dtype(recorded, "float32", "float32"), recorded);
  expect_refusal(b.build({"pos"}), "returns a bool tensor");
}

// Half tensors recorded by PyTorch, read by the host as floats (a half output's first mismatch):
// float16's normal, largest, subnormal and special values, bfloat16's upper 16 bits of a float;
// and float32 references rounded to half for a value the plan stores in half.
TEST(Plan, HalfBytesReadAsFloats) {
  const uint16_t f16[] = {0x3c00, 0xc100, 0x7bff, 0x0001, 0x7c00, 0x8000};
  const std::string floats = as_slot_dtype(std::string(reinterpret_cast<const char*>(f16), sizeof f16), "float16", "float32");
  ASSERT_EQ(floats.size(), 6 * sizeof(float));
  float v[6];
  std::memcpy(v, floats.data(), sizeof v);
  EXPECT_EQ(v[0], 1.f);
  EXPECT_EQ(v[1], -2.5f);
  EXPECT_EQ(v[2], 65504.f);
  EXPECT_EQ(v[3], std::ldexp(1.f, -24));
  EXPECT_TRUE(std::isinf(v[4]) && v[4] > 0);
  EXPECT_TRUE(v[5] == 0.f && std::signbit(v[5]));
  const uint16_t bf16[] = {0x3f80, 0xc0a0};
  const std::string b = as_slot_dtype(std::string(reinterpret_cast<const char*>(bf16), sizeof bf16), "bfloat16", "float32");
  std::memcpy(v, b.data(), 2 * sizeof(float));
  EXPECT_EQ(v[0], 1.f);
  EXPECT_EQ(v[1], -5.f);
  EXPECT_EQ(as_slot_dtype(std::string(2, 'a'), "float16", "float16"), std::string(2, 'a'));
  // A float32 reference of a value stored in half: rounded to nearest, ties to even.
  const float f[] = {1.f, 65519.f, 65520.f, std::ldexp(1.f, -25), 3 * std::ldexp(1.f, -25), 1 + std::ldexp(1.f, -11),
                     1 + 3 * std::ldexp(1.f, -11), -2.5f};
  const std::string fb(reinterpret_cast<const char*>(f), sizeof f);
  uint16_t h[8];
  std::memcpy(h, as_slot_dtype(fb, "float32", "float16").data(), sizeof h);
  EXPECT_EQ(std::vector<uint16_t>(h, h + 8),
            (std::vector<uint16_t>{0x3c00, 0x7bff, 0x7c00, 0x0000, 0x0002, 0x3c00, 0x3c02, 0xc100}));
  std::memcpy(h, as_slot_dtype(fb, "float32", "bfloat16").data(), sizeof h);
  EXPECT_EQ(h[0], 0x3f80);
  EXPECT_EQ(h[5], 0x3f80);  // 1 + 2^-11 is 1 in bfloat16
  EXPECT_EQ(h[7], 0xc020);
  EXPECT_THROW(as_slot_dtype(std::string(8, '\0'), "int64", "float32"), std::exception);
}

TEST(Plan, Int64OutsideElementwiseOpsIsRefused) {
  Graph g = G().value("i", {4, 3}, "input", "int64")
                .node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("i"), json::array({1})}, {4})
                .build({"s"});
  expect_refusal(g, "has dtype int64");
}

// argmax: a Max statistic and the index of its first maximum beside it, stored as int64 per row.
TEST(Plan, ArgmaxIsTheMaximumAndItsIndex) {
  G b;
  b.value("x", {4, 6}, "input").node("a", "aten.argmax.default", std::vector<json>{G::ref("x"), 1}, {4}).values_dtype("a", "int64");
  const Plan p = plan_graph(b.build({"a"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& g = p.groups[0];
  EXPECT_EQ(g.family, "reduce");
  EXPECT_EQ(g.outputs.at(0).dtype, "int64");
  EXPECT_EQ(g.slots.at(g.out_slot).dtype, "int64");
  EXPECT_NE(g.op_struct.find("stat_kind(int i) { return i == 0 ? 1 : i == 1 ? 5 : -1; }"), std::string::npos) << g.op_struct;
  EXPECT_NE(g.op_struct.find("stat_partner(int i) { return i == 0 ? -1 : i == 1 ? 0 : -1; }"), std::string::npos) << g.op_struct;
  EXPECT_NE(g.op_struct.find("v[0] = x[0];"), std::string::npos) << g.op_struct;
  EXPECT_NE(g.op_struct.find("reinterpret_cast<long long*>(a.ptr[1])[row_offset(1, o)] = (long long)red[0];"),
            std::string::npos) << g.op_struct;
}

TEST(Plan, ArgminOverRowsBeyondFloatIndicesIsRefused) {
  G b;
  b.value("x", {2, (1 << 24) + 1}, "input")
      .node("a", "aten.argmin.default", std::vector<json>{G::ref("x"), -1}, {2})
      .values_dtype("a", "int64");
  expect_refusal(b.build({"a"}), "rows of more than 2^24 elements");
}

// A row group's output viewed without its other size-1 dimensions (BatchNorm's [1, C, 1, 1]
// statistic as [C]) is still one value per row.
TEST(Plan, RowOutputViewedWithoutUnitDimensions) {
  Graph g = G().value("x", {4, 3, 1, 1}, "input")
                .node("m", "aten.mean.dim", std::vector<json>{G::ref("x"), json::array({0}), true}, {1, 3, 1, 1})
                .node("v", "aten.view.default", std::vector<json>{G::ref("m"), json::array({-1})}, {3})
                .build({"v"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& gr = p.groups[0];
  ASSERT_EQ(gr.outputs.size(), 1u);
  EXPECT_EQ(gr.slots.at(gr.out_slot).layout.sizes, (std::vector<int64_t>{3, 4}));  // rows, then the reduced 4 at stride 0
  EXPECT_EQ(gr.slots.at(gr.out_slot).layout.strides, (std::vector<int64_t>{1, 0}));
}

// A per-row chain on that view joins the row group (BatchNorm's running statistic update: an
// elementwise op of the [C] view and a [C] buffer).
TEST(Plan, ChainOnARowOutputViewedWithoutUnitDimensionsJoinsTheRows) {
  Graph g = G().value("x", {4, 3, 1, 1}, "input").value("r", {3}, "buffer")
                .node("m", "aten.mean.dim", std::vector<json>{G::ref("x"), json::array({0}), true}, {1, 3, 1, 1})
                .node("v", "aten.view.default", std::vector<json>{G::ref("m"), json::array({-1})}, {3})
                .node("u", "aten.mul.Tensor", {G::ref("v"), 0.9}, {3})
                .node("w", "aten.add.Tensor", {G::ref("r"), G::ref("u")}, {3})
                .build({"w"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].nodes, (std::vector<std::string>{"m", "u", "w"}));
}

TEST(Plan, JsonRoundTrip) {
  Graph g = G()
                .value("x", {4, 6}, "input").value("c", {6}, "input")
                .node("d", "aten.sub.Tensor", {G::ref("x"), G::ref("c")}, {4, 6})
                .build({"d"});
  const Group gr = plan_graph(g).groups[0];
  const Group back = Group::from_json(gr.to_json());
  EXPECT_EQ(back.to_json(), gr.to_json());
}

// A reduction over a middle dimension: every tensor is viewed with the kept dimensions first and
// the reduced ones last; the chain on the reduced values runs once per row.
TEST(Plan, ReductionOverAMiddleDimensionWithItsEpilogue) {
  Graph g = G().value("x", {4, 6, 5}, "input")
                .node("m", "aten.mean.dim", std::vector<json>{G::ref("x"), json::array({-2}), true}, {4, 1, 5})
                .node("s", "aten.sqrt.default", {G::ref("m")}, {4, 1, 5})
                .build({"s"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& gr = p.groups[0];
  EXPECT_EQ(gr.family, "reduce");
  EXPECT_EQ(gr.ops, (std::vector<std::string>{"aten.mean.dim", "aten.sqrt.default"}));
  EXPECT_EQ(accesses(gr), (std::vector<std::string>{"x:strided", "s:output"}));
  EXPECT_EQ(gr.slots[0].layout.sizes, (std::vector<int64_t>{4, 5, 6}));  // kept, then reduced
  EXPECT_EQ(gr.slots[0].layout.strides, (std::vector<int64_t>{30, 1, 5}));
  EXPECT_EQ(gr.slots[1].layout.strides, (std::vector<int64_t>{5, 1, 0}));  // one value per row
  EXPECT_EQ(gr.m, 20);
  EXPECT_EQ(gr.k, 6);
  EXPECT_EQ(Group::from_json(gr.to_json()).k, 6);  // the worker gets the reduced count
  EXPECT_NE(gr.op_struct.find("red[0] = s[0] / (float)a.k;"), std::string::npos) << gr.op_struct;
  EXPECT_NE(gr.op_struct.find("red[1] = sqrtf(red[0]);"), std::string::npos) << gr.op_struct;
  EXPECT_NE(gr.op_struct.find("p[1][0] = red[1];"), std::string::npos) << gr.op_struct;
}

// The chain before a reduction is fused into its loads: x * x is never written.
TEST(Plan, ReductionOfEverythingFusesTheChainBeforeIt) {
  Graph g = G().value("x", {3, 7}, "input")
                .node("sq", "aten.mul.Tensor", {G::ref("x"), G::ref("x")}, {3, 7})
                .node("mx", "aten.amax.default", std::vector<json>{G::ref("sq"), json::array()}, {})
                .build({"mx"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& gr = p.groups[0];
  EXPECT_EQ(gr.family, "reduce");
  EXPECT_EQ(accesses(gr), (std::vector<std::string>{"x:strided", "mx:output"}));
  EXPECT_EQ(gr.slots[0].layout.sizes, (std::vector<int64_t>{21}));  // no kept dimension; merged
  EXPECT_EQ(gr.m, 1);
  EXPECT_EQ(gr.k, 21);
  EXPECT_NE(gr.op_struct.find("const float v0 = (x[0] * x[0]);"), std::string::npos) << gr.op_struct;
  EXPECT_NE(gr.op_struct.find("v[0] = v0;"), std::string::npos) << gr.op_struct;
  // Nothing is computed per element where nothing per element is written or scanned: out() and
  // scan_values() have no steps (x * x there was dead code, and nvcc warned about it).
  for (const char* fn : {"static void out(", "static void scan_values("}) {
    const size_t at = gr.op_struct.find(fn);
    ASSERT_NE(at, std::string::npos) << fn;
    const std::string body = gr.op_struct.substr(at, gr.op_struct.find("\n  }\n", at) - at);
    EXPECT_EQ(body.find("const float v"), std::string::npos) << body;
  }
}

// softmax as PyTorch decomposes it: one group; the sum of exp(x - max) is folded online in the
// maximum's pass, and the division runs in the final pass over the row.
TEST(Plan, SoftmaxIsOneGroupWithAnOnlineSum) {
  Graph g = G().value("x", {4, 6}, "input")
                .node("m", "aten.amax.default", std::vector<json>{G::ref("x"), json::array({1}), true}, {4, 1})
                .node("d", "aten.sub.Tensor", {G::ref("x"), G::ref("m")}, {4, 6})
                .node("e", "aten.exp.default", {G::ref("d")}, {4, 6})
                .node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("e"), json::array({1}), true}, {4, 1})
                .node("y", "aten.div.Tensor", {G::ref("e"), G::ref("s")}, {4, 6})
                .build({"y"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& gr = p.groups[0];
  EXPECT_EQ(gr.family, "reduce");
  EXPECT_EQ(accesses(gr), (std::vector<std::string>{"x:strided", "y:output"}));
  const std::string& op = gr.op_struct;
  EXPECT_NE(op.find("kPasses = 1;"), std::string::npos) << op;
  EXPECT_NE(op.find("stat_kind(int i) { return i == 0 ? 1 : i == 1 ? 3 : -1; }"), std::string::npos) << op;
  EXPECT_NE(op.find("v[0] = x[0];\n      v[1] = x[0];"), std::string::npos) << op;
  EXPECT_NE(op.find("red[1] = fusetune::expsum_value<MATH>(s[1], s[0], red[0]);"), std::string::npos) << op;
  EXPECT_NE(op.find("const float v2 = fusetune::div_by_row<MATH>(v1, red[1]);"), std::string::npos) << op;
  EXPECT_NE(op.find("y[0] = v2;"), std::string::npos) << op;
  // Approximate arithmetic is a candidate here, except under --precision fp32.
  const Config math1{"reduce", {{"BLOCK", 256}, {"ILP", 1}, {"VEC", 4}, {"MATH", 1}}};
  EXPECT_TRUE(family_by_name("reduce").allowed(gr, math1, "tf32"));
  EXPECT_FALSE(family_by_name("reduce").allowed(gr, math1, "fp32"));
}

// logsumexp's decomposition shifts by where(|max| == inf, 0, max): still one pass, one group.
TEST(Plan, LogsumexpIsOnePass) {
  Graph g = G().value("x", {4, 6}, "input")
                .node("m", "aten.amax.default", std::vector<json>{G::ref("x"), json::array({1}), true}, {4, 1})
                .node("a", "aten.abs.default", {G::ref("m")}, {4, 1})
                .node("c", "aten.eq.Scalar", std::vector<json>{G::ref("a"), json{{"float", "inf"}}}, {4, 1})
                .node("z", "aten.scalar_tensor.default", std::vector<json>{0.0}, {}, json{{"dtype", {{"dtype", "float32"}}}})
                .node("w", "aten.where.self", {G::ref("c"), G::ref("z"), G::ref("m")}, {4, 1})
                .node("d", "aten.sub.Tensor", {G::ref("x"), G::ref("w")}, {4, 6})
                .node("e", "aten.exp.default", {G::ref("d")}, {4, 6})
                .node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("e"), json::array({1}), true}, {4, 1})
                .node("l", "aten.log.default", {G::ref("s")}, {4, 1})
                .node("r", "aten.add.Tensor", {G::ref("l"), G::ref("w")}, {4, 1})
                .build({"r"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  const std::string& op = p.groups[0].op_struct;
  EXPECT_NE(op.find("kPasses = 1;"), std::string::npos) << op;
  EXPECT_NE(op.find("kFullOut = 0;"), std::string::npos) << op;
  EXPECT_NE(op.find("fusetune::expsum_value<MATH>(s[1], s[0], red[3])"), std::string::npos) << op;
}

// RMS norm over channels: the statistic and the scaling of every element in one group over a
// middle dimension; the sum of a value that is not exp(x - max) takes its own pass.
TEST(Plan, NormOverChannelsAndASecondPass) {
  Graph g = G().value("x", {2, 3, 5}, "input")
                .node("q", "aten.mul.Tensor", {G::ref("x"), G::ref("x")}, {2, 3, 5})
                .node("m", "aten.mean.dim", std::vector<json>{G::ref("q"), json::array({1}), true}, {2, 1, 5})
                .node("r", "aten.rsqrt.default", {G::ref("m")}, {2, 1, 5})
                .node("y", "aten.mul.Tensor", {G::ref("x"), G::ref("r")}, {2, 3, 5})
                .node("t", "aten.sum.dim_IntList", std::vector<json>{G::ref("y"), json::array({1}), true}, {2, 1, 5})
                .build({"y", "t"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& gr = p.groups[0];
  EXPECT_EQ(accesses(gr), (std::vector<std::string>{"x:strided", "y:output", "t:output"}));
  EXPECT_EQ(gr.slots[0].layout.sizes, (std::vector<int64_t>{2, 5, 3}));
  EXPECT_EQ(gr.slots[0].layout.strides, (std::vector<int64_t>{15, 1, 5}));
  EXPECT_NE(gr.op_struct.find("kPasses = 2;"), std::string::npos) << gr.op_struct;
  EXPECT_NE(gr.op_struct.find("full_out_slot(int i) { return i == 0 ? 1 : -1; }"), std::string::npos) << gr.op_struct;
}

// A norm over the channels of NCHW data: neighbouring rows are neighbours in memory, so one
// thread of reduce_thread may move four rows as one vector (the per-channel weight is one value
// for all of them); rows along the innermost dimension (x minus its row maximum) cannot, and
// reduce_thread's RVEC 4 is not offered there.
TEST(Plan, NeighbouringRowsMoveAsVectors) {
  Graph g = G().value("x", {2, 3, 8}, "input")
                .value("w", {3, 1}, "parameter")
                .node("q", "aten.mul.Tensor", {G::ref("x"), G::ref("x")}, {2, 3, 8})
                .node("m", "aten.mean.dim", std::vector<json>{G::ref("q"), json::array({1}), true}, {2, 1, 8})
                .node("y", "aten.mul.Tensor", {G::ref("x"), G::ref("m")}, {2, 3, 8})
                .node("z", "aten.mul.Tensor", {G::ref("y"), G::ref("w")}, {2, 3, 8})
                .node("a", "aten.amax.default", std::vector<json>{G::ref("x"), json::array({2}), true}, {2, 3, 1})
                .node("s", "aten.sub.Tensor", {G::ref("x"), G::ref("a")}, {2, 3, 8})
                .build({"z", "s"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 2u);
  const Group& norm = p.groups[0];
  EXPECT_EQ(accesses(norm), (std::vector<std::string>{"x:strided", "w:strided", "z:output"}));
  EXPECT_EQ(norm.row_vector, 4);
  EXPECT_NE(norm.op_struct.find("kRowVec = 4;"), std::string::npos) << norm.op_struct;
  EXPECT_NE(norm.op_struct.find("row_stride(int i) { return i == 0 ? 1 : i == 1 ? 0 : i == 2 ? 1 : -1; }"),
            std::string::npos) << norm.op_struct;
  EXPECT_EQ(Group::from_json(norm.to_json()).row_vector, 4);
  EXPECT_EQ(p.groups[1].row_vector, 1);
  EXPECT_NE(p.groups[1].op_struct.find("kRowVec = 1;"), std::string::npos) << p.groups[1].op_struct;
  const Family& thread = family_by_name("reduce_thread");
  const Config rvec4{"reduce_thread", {{"ROWS", 32}, {"SPLIT", 4}, {"CACHE", 0}, {"KEEP", 0}, {"RVEC", 4}, {"MATH", 0}}};
  EXPECT_TRUE(thread.allowed(norm, rvec4, "tf32"));
  EXPECT_FALSE(thread.allowed(p.groups[1], rvec4, "tf32"));
  // The norm has no arithmetic that MATH changes (no exponential, no division by a row's value):
  // MATH 1 would time the same kernel again.
  const Config math1{"reduce_thread", {{"ROWS", 32}, {"SPLIT", 4}, {"CACHE", 0}, {"KEEP", 0}, {"RVEC", 1}, {"MATH", 1}}};
  EXPECT_EQ(norm.op_struct.find("<MATH>("), std::string::npos) << norm.op_struct;
  EXPECT_FALSE(thread.allowed(norm, math1, "tf32"));
  const LaunchDims d = thread.launch(norm, rvec4);  // 16 rows, 128 per block
  EXPECT_EQ(d.grid[0], 1u);
  EXPECT_EQ(d.block[0], 32u);
  EXPECT_EQ(d.block[1], 4u);
  // reduce_tile keeps a block's rows of x and w (the inputs that vary along a row) in shared
  // memory: 8 x 4 rows of 3 elements each.
  const Family& tile = family_by_name("reduce_tile");
  const Config tile4{"reduce_tile", {{"ROWS", 8}, {"SPLIT", 16}, {"RVEC", 4}, {"MATH", 0}}};
  EXPECT_TRUE(tile.allowed(norm, tile4, "tf32"));
  EXPECT_FALSE(tile.allowed(p.groups[1], tile4, "tf32"));
  const LaunchDims t = tile.launch(norm, tile4);
  EXPECT_EQ(t.grid[0], 1u);
  EXPECT_EQ(t.block[0], 8u);
  EXPECT_EQ(t.block[1], 16u);
  EXPECT_EQ(t.shared_bytes, 2u * 4 * 8 * 4 * 3);
  EXPECT_EQ(tile.launch_expr(norm, [](const std::string& p) { return "tuned::" + p; }),
            "fusetune::reduce_tile_launch(tuned::ROWS, tuned::SPLIT, tuned::RVEC, args.numel, args.k, 2)");
  // Rows of 2000 elements: 8 of them fit the 200 KB a row kernel asks for (128 KB for x and w),
  // 32 do not.
  Group wide = norm;
  wide.k = 2000;
  const Config tile8{"reduce_tile", {{"ROWS", 8}, {"SPLIT", 16}, {"RVEC", 1}, {"MATH", 0}}};
  const Config tile32{"reduce_tile", {{"ROWS", 32}, {"SPLIT", 16}, {"RVEC", 1}, {"MATH", 0}}};
  EXPECT_TRUE(tile.allowed(wide, tile8, "tf32"));
  EXPECT_FALSE(tile.allowed(wide, tile32, "tf32"));
}

// reduce_thread's KEEP 1 keeps a thread's whole share of its rows in registers: offered where the
// rows are read twice (a norm's scaling after its sum), the share is more than CACHE may hold
// (32 values) and it fits the register budget (192 values); its CACHE is that share.
TEST(Plan, ThreadKeepsWholeRowsWhereTheyFit) {
  Graph g = G().value("x", {2, 96, 8}, "input")
                .node("q", "aten.mul.Tensor", {G::ref("x"), G::ref("x")}, {2, 96, 8})
                .node("m", "aten.mean.dim", std::vector<json>{G::ref("q"), json::array({1}), true}, {2, 1, 8})
                .node("r", "aten.rsqrt.default", {G::ref("m")}, {2, 1, 8})
                .node("y", "aten.mul.Tensor", {G::ref("x"), G::ref("r")}, {2, 96, 8})
                .build({"y"});
  Graph h = G().value("x", {2, 96, 8}, "input")
                .node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("x"), json::array({1})}, {2, 8})
                .build({"s"});
  const Plan p = plan_graph(g), q = plan_graph(h);
  ASSERT_EQ(p.groups.size(), 1u);
  ASSERT_EQ(q.groups.size(), 1u);
  const Group& norm = p.groups[0];
  const Group& sum = q.groups[0];
  ASSERT_EQ(norm.k, 96);
  ASSERT_EQ(norm.row_vector, 4);
  const Family& thread = family_by_name("reduce_thread");
  auto keep = [](int split, int rvec) {
    return Config{"reduce_thread", {{"ROWS", 64}, {"SPLIT", split}, {"CACHE", 0}, {"KEEP", 1}, {"RVEC", rvec}, {"MATH", 0}}};
  };
  EXPECT_TRUE(thread.allowed(norm, keep(1, 2), "tf32"));   // 2 rows x 96 = 192 values
  EXPECT_FALSE(thread.allowed(norm, keep(1, 4), "tf32"));  // 384: over the budget
  EXPECT_TRUE(thread.allowed(norm, keep(4, 4), "tf32"));   // 4 rows x 24 = 96
  EXPECT_FALSE(thread.allowed(norm, keep(4, 1), "tf32"));  // 24: CACHE 32 holds it already
  EXPECT_FALSE(thread.allowed(sum, keep(1, 1), "tf32"));   // one read of each row: nothing to keep
  EXPECT_NE(thread.kernel_instance(norm, [](const std::string& p) { return "tuned::" + p; })
                .find("fusetune::thread_cache(tuned::KEEP, tuned::CACHE, 96, tuned::SPLIT)"),
            std::string::npos);
}

// The TMA wgmma families (TF32 and 3xTF32) run a GEMM group only with both operands K-major, row
// strides of whole 16 bytes, and on sm_90 (compiled for sm_90a); the other GEMM families run it
// regardless.
TEST(Plan, TmaGemmNeedsKMajorAlignedOperandsOnSm90) {
  auto linear = [](int64_t k, bool transposed_w) {
    G b;
    b.value("x", {9, k}, "input").value("w", {5, k}, "parameter");
    if (transposed_w) b.node("t", "aten.permute.default", {G::ref("w"), {1, 0}}, {k, 5});
    else b.value("t", {k, 5}, "input");
    b.node("p", "aten.mm.default", {G::ref("x"), G::ref("t")}, {9, 5});
    return plan_graph(b.build({"p"})).groups.at(0);
  };
  auto names = [](const Group& gr, const std::string& arch, std::vector<std::string>* refused) {
    std::vector<std::string> n;
    for (const Family* f : families_for(gr, arch, refused)) n.push_back(f->name());
    return n;
  };
  std::vector<std::string> refused;
  EXPECT_EQ(names(linear(8, true), "sm_90", &refused),
            (std::vector<std::string>{"gemm", "gemm_tma", "gemm_3xtf32", "cublaslt_tf32", "cublaslt_fp32"}));
  EXPECT_TRUE(refused.empty());
  EXPECT_EQ(family_by_name("gemm_tma").arch("sm_90"), "sm_90a");
  EXPECT_EQ(names(linear(8, true), "sm_80", &refused), (std::vector<std::string>{"gemm", "cublaslt_tf32", "cublaslt_fp32"}));
  EXPECT_EQ(refused, (std::vector<std::string>{"gemm_tma: its kernels do not run on sm_80",
                                                "gemm_3xtf32: its kernels do not run on sm_80"}));
  refused.clear();
  names(linear(8, false), "sm_90", &refused);  // a plain A @ B: B's rows run along n
  EXPECT_EQ(refused, (std::vector<std::string>{"gemm_tma: B is not K-major (TF32 wgmma reads both operands along k)",
                                                "gemm_3xtf32: B is not K-major (TF32 wgmma reads both operands along k)"}));
  refused.clear();
  names(linear(6, true), "sm_90", &refused);  // rows of 24 bytes
  EXPECT_EQ(refused,
            (std::vector<std::string>{"gemm_tma: an operand's row stride is not a multiple of 16 bytes (TMA)",
                                      "gemm_3xtf32: an operand's row stride is not a multiple of 16 bytes (TMA)"}));
  const Group g = linear(8, true);
  const Family& tma = family_by_name("gemm_tma");
  const Config c = SearchSpace::load(path_join(fusetune_home(), "configs/gemm_tma.json")).enumerate().at(0);
  EXPECT_FALSE(tma.allowed(g, c, "fp32"));
  EXPECT_EQ(tma.precision(g, c), "tf32");
  ASSERT_EQ(c.at("CLUSTER"), 1);
  const json split_tail = {{"bm", c.at("BM")}, {"bn", c.at("BN")}};
  EXPECT_EQ(tma.launch_extras(g, c), (json{{"tensor_maps", {c.at("BM"), c.at("BN")}}, {"persistent", true}, {"cluster", 1},
                                           {"split_tail", split_tail}}));
  const LaunchDims d = tma.launch(g, c);
  EXPECT_EQ(d.grid[0], 1u);  // one 9 x 5 tile
  EXPECT_EQ(d.block[0], 384u);
  EXPECT_EQ(d.shared_bytes, (unsigned)gemm_tma_smem_bytes((int)c.at("BM"), (int)c.at("BN"), (int)c.at("STAGES")));
  // A pair of blocks: each loads half of B's tile (and multicasts it), the grid is whole pairs.
  const std::vector<Config> all = SearchSpace::load(path_join(fusetune_home(), "configs/gemm_tma.json")).enumerate();
  const auto pair = std::find_if(all.begin(), all.end(), [](const Config& x) { return x.at("CLUSTER") == 2; });
  ASSERT_NE(pair, all.end());
  EXPECT_EQ(tma.launch_extras(g, *pair), (json{{"tensor_maps", {pair->at("BM"), pair->at("BN") / 2}},
                                               {"persistent", true},
                                               {"cluster", 2},
                                               {"split_tail", {{"bm", pair->at("BM")}, {"bn", pair->at("BN")}}}}));
  EXPECT_EQ(tma.launch(g, *pair).grid[0], 2u);  // the 9 x 5 tile and an empty partner
  // 3 batches of 1000 x 300 in 128 x 64 tiles: 4 pairs of M-tiles (the last one's second block
  // past M) by 5 N-tiles per batch.
  EXPECT_EQ(gemm_tma_launch(128, 64, 4, 2, 1000, 300, 3).grid[0], 3u * 4 * 5 * 2);
  EXPECT_EQ(gemm_tma_launch(128, 64, 4, 1, 1000, 300, 3).grid[0], 3u * 8 * 5);

  // 3xTF32: the same kernel with OPERAND 3, under either policy, its stages twice the shared
  // memory (the remainders), float32 tensor maps, its roofline a third of the TF32 peak.
  const Family& x3 = family_by_name("gemm_3xtf32");
  const Config c3 = SearchSpace::load(path_join(fusetune_home(), "configs/gemm_3xtf32.json")).enumerate().at(0);
  const ParamText p3 = [&](const std::string& k) { return std::to_string(c3.at(k)); };
  EXPECT_TRUE(x3.allowed(g, c3, "fp32") && x3.allowed(g, c3, "tf32"));
  EXPECT_EQ(x3.precision(g, c3), "3xtf32");
  EXPECT_EQ(peak_flops(json{{"tf32_peak_tflops", 450.0}}, "3xtf32"), 150e12);
  EXPECT_EQ(x3.arch("sm_90"), "sm_90a");
  const std::string instance = x3.kernel_instance(g, p3);
  EXPECT_EQ(instance.rfind(", 3>"), instance.size() - 4) << instance;
  EXPECT_EQ(x3.launch(g, c3).shared_bytes,
            (unsigned)gemm_tma_smem_bytes((int)c3.at("BM"), (int)c3.at("BN"), 2 * (int)c3.at("STAGES")));
  EXPECT_NE(x3.launch_expr(g, p3).find(", 2 * " + p3("STAGES") + ", "), std::string::npos) << x3.launch_expr(g, p3);
  EXPECT_NE(x3.extension_launch(g, p3).find("fusetune::launch_gemm_tma<&" + instance + ", " + p3("BM") + ", " + p3("BN") +
                                            ", " + p3("STAGES") + ", " + p3("CLUSTER") + ", 3>(args, stream);"),
            std::string::npos)
      << x3.extension_launch(g, p3);
  EXPECT_EQ(x3.launch_extras(g, c3).count("tensor_map_type"), 0u);  // float32 maps
  for (const Config& x : SearchSpace::load(path_join(fusetune_home(), "configs/gemm_3xtf32.json")).enumerate())
    EXPECT_LE(x3.launch(g, x).shared_bytes, 232448u) << x.at("BM") << " " << x.at("BN") << " " << x.at("STAGES");
}

// The split tail (templates/gemm_tma_split.h): a last round at most half full is cut along K,
// into as many parts as the idle clusters allow (at most 4, each part 16 k-tiles or more).
TEST(Plan, TmaGemmSplitTail) {
  // gemm_relu_residual (6144 x 3072 x 3072) in 128 x 256 tiles, pairs, 66 clusters: 288 cluster
  // tiles are 4 rounds and 24 left over, cut in two.
  GemmTmaSplit s = gemm_tma_split(288, 66, 96);
  EXPECT_EQ(s.full, 264);
  EXPECT_EQ(s.tail, 24);
  EXPECT_EQ(s.ways, 2);
  EXPECT_EQ(s.units(), 312);
  EXPECT_EQ(gemm_tma_split_bytes(s, 128, 256, 2), 4LL * (24 * 2 * 2 + 24 * 1 * 2 * 128 * 256));
  // A round more than half full, a whole number of rounds, too few k-tiles: nothing is cut.
  EXPECT_EQ(gemm_tma_split(100, 66, 96).ways, 1);
  EXPECT_EQ(gemm_tma_split(132, 66, 96).ways, 1);
  EXPECT_EQ(gemm_tma_split(24, 66, 31).ways, 1);
  EXPECT_EQ(gemm_tma_split(24, 66, 32).ways, 2);
  EXPECT_EQ(gemm_tma_split(100, 66, 96).units(), 100);
  EXPECT_EQ(gemm_tma_split_bytes(gemm_tma_split(100, 66, 96), 128, 256, 2), 0);
  // Fewer tiles than clusters: 10 tiles in 4 parts each (6 clusters would idle with 6 parts).
  s = gemm_tma_split(10, 66, 1000);
  EXPECT_EQ(s.full, 0);
  EXPECT_EQ(s.ways, 4);
  // The host's grid is one block per unit up to the resident ones; the kernel derives its split
  // from that grid, which must give the same split for every shape.
  for (long long tiles : {1, 5, 10, 24, 33, 34, 65, 66, 67, 100, 132, 288, 1000})
    for (int clusters : {1, 2, 60, 66, 132})
      for (long long k_tiles : {0, 1, 16, 32, 48, 64, 96, 1000}) {
        const GemmTmaGrid grid = gemm_tma_grid(64, 64, 1, tiles * 64, 64, k_tiles * 32, 1, clusters);
        const GemmTmaSplit host = gemm_tma_split(tiles, clusters, k_tiles);
        const GemmTmaSplit kernel = gemm_tma_split(tiles, (int)grid.blocks, k_tiles);
        EXPECT_EQ(kernel.ways, host.ways) << tiles << " " << clusters << " " << k_tiles;
        EXPECT_EQ(kernel.units(), tiles + (long long)host.tail * (host.ways - 1));
        EXPECT_LE((long long)grid.blocks, clusters);
        EXPECT_EQ(grid.blocks, (unsigned)std::min<long long>(kernel.units(), clusters));
        EXPECT_EQ(grid.workspace_bytes, gemm_tma_split_bytes(kernel, 64, 64, 1));
      }
}

// What the TMA GEMM's tensor maps describe (templates/tma_map.h), read off a fake encoder: A as
// (k, m, batch), B's [n, k] rows as (k, n, batch), strides in bytes, boxes of 32 x BM or BN; a
// broadcast operand (batch stride 0) as one batch, and k = 0 as 1.
struct EncodedMap {
  std::vector<cuuint64_t> dims, strides;
  std::vector<cuuint32_t> box;
  void* base = nullptr;
  CUtensorMapSwizzle swizzle{};
};
EncodedMap last_encoded;
CUresult fake_encoder(CUtensorMap*, CUtensorMapDataType type, cuuint32_t rank, void* base, const cuuint64_t* dims,
                      const cuuint64_t* strides, const cuuint32_t* box, const cuuint32_t*, CUtensorMapInterleave,
                      CUtensorMapSwizzle swizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill fill) {
  EXPECT_EQ(type, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  EXPECT_EQ(fill, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // out-of-bounds elements read as zeros
  last_encoded = {std::vector<cuuint64_t>(dims, dims + rank), std::vector<cuuint64_t>(strides, strides + rank - 1),
                  std::vector<cuuint32_t>(box, box + rank), base, swizzle};
  return CUDA_SUCCESS;
}

TEST(Plan, TmaGemmOperandsAsTensorMaps) {
  KernelArgs a{};
  float buf[4];
  a.m = 131, a.n = 45, a.k = 68, a.batch = 3;
  a.ptr[0] = buf;
  a.stride[0][0] = 131 * 72, a.stride[0][1] = 72, a.stride[0][2] = 1;  // A [3, 131, 68], rows padded to 72
  a.ptr[1] = buf + 1;
  a.stride[1][0] = 0, a.stride[1][1] = 1, a.stride[1][2] = 68;  // B = W^T of one W [45, 68]: broadcast
  TmaMap map;
  ASSERT_EQ(encode_gemm_operand(fake_encoder, &map, a, 0, 128), CUDA_SUCCESS);
  EXPECT_EQ(last_encoded.dims, (std::vector<cuuint64_t>{68, 131, 3}));
  EXPECT_EQ(last_encoded.strides, (std::vector<cuuint64_t>{72 * 4, 131 * 72 * 4}));
  EXPECT_EQ(last_encoded.box, (std::vector<cuuint32_t>{32, 128, 1}));
  EXPECT_EQ(last_encoded.base, buf);
  EXPECT_EQ(last_encoded.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
  ASSERT_EQ(encode_gemm_operand(fake_encoder, &map, a, 1, 64), CUDA_SUCCESS);
  EXPECT_EQ(last_encoded.dims, (std::vector<cuuint64_t>{68, 45, 1}));
  EXPECT_EQ(last_encoded.strides, (std::vector<cuuint64_t>{68 * 4, 45 * 68 * 4}));
  EXPECT_EQ(last_encoded.box, (std::vector<cuuint32_t>{32, 64, 1}));
  EXPECT_EQ(last_encoded.base, buf + 1);
  a.k = 0;
  ASSERT_EQ(encode_gemm_operand(fake_encoder, &map, a, 0, 128), CUDA_SUCCESS);
  EXPECT_EQ(last_encoded.dims[0], 1u);
}

// Which row kernels may run a group: the split kernel needs one pass and per-row outputs only;
// the cluster kernel (a row kept on chip between reads) a row read more than once.
TEST(Plan, SplitRowKernelOnlyForSinglePassGroups) {
  Graph g = G().value("x", {4, 6}, "input")
                .node("m", "aten.amax.default", std::vector<json>{G::ref("x"), json::array({1}), true}, {4, 1})
                .node("d", "aten.sub.Tensor", {G::ref("x"), G::ref("m")}, {4, 6})
                .node("a", "aten.mean.default", std::vector<json>{G::ref("d")}, {})
                .build({"d", "a"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 2u);
  auto names = [](const Group& gr, std::vector<std::string>* refused) {
    std::vector<std::string> n;
    for (const Family* f : families_for(gr, "sm_90", refused)) n.push_back(f->name());
    return n;
  };
  std::vector<std::string> refused;
  EXPECT_EQ(names(p.groups[0], &refused),
            (std::vector<std::string>{"reduce", "reduce_thread", "reduce_cluster", "reduce_cluster_smem", "reduce_tile"}));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find("reduce_split: needs one pass over each row and no per-element outputs"), std::string::npos);
  refused.clear();
  EXPECT_EQ(names(p.groups[1], &refused), (std::vector<std::string>{"reduce", "reduce_thread", "reduce_split"}));
  EXPECT_EQ(refused, (std::vector<std::string>{"reduce_cluster: reads each row once already",
                                               "reduce_cluster_smem: reads each row once already",
                                               "reduce_tile: reads each row once already"}));
  EXPECT_EQ(p.groups[1].m, 1);
  EXPECT_EQ(p.groups[1].k, 24);
  EXPECT_EQ(family_by_name("reduce_split").workspace_bytes(p.groups[1]), 4 * (512 + 1));
}

// A loss over a whole large tensor (one row of 2^20 elements or more) is left to the split
// kernel: a block per row would stream it on one SM. Several passes keep the block per row.
TEST(Plan, FewLongRowsGoToTheSplitKernelOnly) {
  const int64_t n = int64_t(1) << 20;
  Graph g = G().value("x", {2, n / 2}, "input")
                .node("a", "aten.mean.default", std::vector<json>{G::ref("x")}, {})
                .build({"a"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  std::vector<std::string> refused;
  const std::vector<const Family*> fams = families_for(p.groups[0], "sm_90", &refused);
  ASSERT_EQ(fams.size(), 1u);
  EXPECT_EQ(fams[0]->name(), "reduce_split");
  ASSERT_EQ(refused.size(), 5u);  // reduce, reduce_thread, both cluster kernels and the tile (one pass)
  EXPECT_EQ(refused[0], "reduce: 1 row(s) of 1048576 elements: a block per row would leave most of the GPU idle; "
                        "reduce_split takes this group");

  Graph two_pass = G().value("x", {n}, "input")
                       .node("m", "aten.mean.default", std::vector<json>{G::ref("x")}, {})
                       .node("d", "aten.sub.Tensor", {G::ref("x"), G::ref("m")}, {n})
                       .build({"d"});
  const Plan q = plan_graph(two_pass);
  ASSERT_EQ(q.groups.size(), 1u);
  refused.clear();
  EXPECT_EQ(families_for(q.groups[0], "sm_90", &refused).size(), 4u);  // reduce, reduce_thread, both cluster kernels
  EXPECT_EQ(refused.back(), "reduce_tile: 8 rows of 1048576 elements do not fit the shared memory of a block");
}

// A row made of runs (a GroupNorm row: channels of h * w elements, a weight per channel) moves
// in vectors inside each run: the offsets have the sizes as literals, the weight is one value
// per run, and V = 8 divides every run.
TEST(Plan, RowsOfRunsMoveInVectors) {
  Graph g = G().value("x", {2, 3, 8}, "input")
                .value("w", {3, 1}, "parameter")
                .node("m", "aten.mean.dim", std::vector<json>{G::ref("x"), json::array({1, 2}), true}, {2, 1, 1})
                .node("d", "aten.sub.Tensor", {G::ref("x"), G::ref("m")}, {2, 3, 8})
                .node("y", "aten.mul.Tensor", {G::ref("d"), G::ref("w")}, {2, 3, 8})
                .build({"y"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  const std::string& op = p.groups[0].op_struct;
  EXPECT_EQ(accesses(p.groups[0]), (std::vector<std::string>{"x:strided", "w:strided", "y:output"}));
  EXPECT_NE(op.find("kOneRun = false;"), std::string::npos) << op;
  EXPECT_NE(op.find("kVec = 8;"), std::string::npos) << op;
  EXPECT_NE(op.find("inner_stride(int i) { return i == 0 ? 1 : i == 1 ? 0 : i == 2 ? 1 : -1; }"), std::string::npos) << op;
  EXPECT_NE(op.find("if (s == 0) return ((long long)(unsigned)o * 24);"), std::string::npos) << op;
  EXPECT_NE(op.find("if (s == 1) return ((long long)((unsigned)r / 8u));"), std::string::npos) << op;
  EXPECT_NE(op.find("if (s == 0) return ((long long)(unsigned)r);"), std::string::npos) << op;
  EXPECT_EQ(p.groups[0].varying_inputs, 1);  // x; w is one value per run
}

// A reversed cumsum as models write it (flip, cumsum, flip): the scan reads x through a negative
// stride from each row's last element, element by element (a reversed run is no vector), and
// writes the flip of its result the same way, so no copy reverses it.
TEST(Plan, ReversedScanReadsAndWritesThroughANegativeStride) {
  Graph g = G().value("x", {3, 8}, "input")
                .node("f", "aten.flip.default", std::vector<json>{G::ref("x"), json::array({-1})}, {3, 8})
                .node("c", "aten.cumsum.default", std::vector<json>{G::ref("f"), 1}, {3, 8})
                .node("r", "aten.flip.default", std::vector<json>{G::ref("c"), json::array({1})}, {3, 8})
                .build({"r"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& scan = p.groups[0];
  EXPECT_EQ(scan.family, "reduce");
  EXPECT_EQ(scan.slots[0].layout.strides, (std::vector<int64_t>{8, -1}));
  EXPECT_EQ(scan.slots[0].layout.offset, 7);
  ASSERT_EQ(scan.outputs.size(), 1u);
  EXPECT_EQ(scan.outputs[0].value, "r");
  EXPECT_EQ(scan.outputs[0].shape, (std::vector<int64_t>{3, 8}));
  const Slot& out = scan.slots.at(scan.out_slot);
  EXPECT_EQ(out.layout.base, "r");
  EXPECT_EQ(out.layout.strides, (std::vector<int64_t>{8, -1}));
  EXPECT_EQ(out.layout.offset, 7);
  const std::string& op = scan.op_struct;
  EXPECT_NE(op.find("kOneRun = false;"), std::string::npos) << op;
  EXPECT_NE(op.find("kVec = 1;"), std::string::npos) << op;
  EXPECT_NE(op.find("if (s == 0) return ((long long)(unsigned)r * -1);"), std::string::npos) << op;
  EXPECT_NE(op.find("if (s == 1) return ((long long)(unsigned)r * -1);"), std::string::npos) << op;
  EXPECT_EQ(p.outputs, (std::vector<std::string>{"r"}));
}

// A flip of a row group's result along a kept dimension, with the unflipped result returned too:
// the group writes the flip, and the result itself (that memory read flipped back) is a copy.
TEST(Plan, FlippedRowResultAlsoReturnedIsCopiedBack) {
  Graph g = G().value("x", {3, 8}, "input")
                .node("c", "aten.cumprod.default", std::vector<json>{G::ref("x"), 1}, {3, 8})
                .node("r", "aten.flip.default", std::vector<json>{G::ref("c"), json::array({0})}, {3, 8})
                .node("s", "aten.mul.Tensor", {G::ref("r"), 2.0}, {3, 8})
                .build({"s", "c"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 3u);
  const Group& scan = p.groups[0];
  ASSERT_EQ(scan.outputs.size(), 1u);
  EXPECT_EQ(scan.outputs[0].value, "r");
  const Slot& out = scan.slots.at(scan.out_slot);
  EXPECT_EQ(out.layout.strides, (std::vector<int64_t>{-8, 1}));
  EXPECT_EQ(out.layout.offset, 16);
  EXPECT_EQ(p.groups[1].family, "elementwise");  // s = r * 2, reading r in order
  EXPECT_EQ(p.groups[1].slots[0].layout, Layout::contiguous("r", {3, 8}));
  EXPECT_EQ(p.groups[2].ops, (std::vector<std::string>{"copy"}));  // c, r read flipped back
  EXPECT_EQ(p.groups[2].slots[0].layout.strides, (std::vector<int64_t>{-8, 1}));
  EXPECT_EQ(p.groups[2].slots[0].layout.offset, 16);
  EXPECT_EQ(p.outputs, (std::vector<std::string>{"s", "c"}));
}

// The cluster kernels' launch: a cluster per row; the shared-memory one gives each block its
// part of the row (whole float4) for every varying input, at most 200 KB.
TEST(Plan, ClusterLaunchSizesItsSharedMemory) {
  const LaunchDims r = reduce_cluster_launch(8, 512, 1024);
  EXPECT_EQ(r.grid[0], 8u * 1024);
  EXPECT_EQ(r.block[0], 512u);
  EXPECT_EQ(r.shared_bytes, 0u);
  const LaunchDims s = reduce_cluster_smem_launch(8, 256, 1024, 131072, 1);
  EXPECT_EQ(s.grid[0], 8u * 1024);
  EXPECT_EQ(s.shared_bytes, 65536u);  // 131072 / 8 floats
  EXPECT_EQ(reduce_cluster_smem_launch(4, 256, 3, 1001, 2).shared_bytes, 2u * 4 * 252);  // ceil(1001 / 4) = 251 -> 252
  EXPECT_EQ(reduce_cluster_smem_launch(2, 256, 3, 10000000, 4).shared_bytes, 204800u);  // capped
}

// A reduction over size-1 dimensions only is its input reshaped (a model's max, mean and
// logsumexp after a sum with keepdim): no group of its own, the chain after it fused where the
// input is; an argmax over one is still a reduction (its result is an index).
TEST(Plan, ReductionOverSizeOneDimensionsIsAReshape) {
  Graph g = G().value("x", {4, 6}, "input")
                .node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("x"), json::array({1}), true}, {4, 1})
                .node("m", "aten.amax.default", std::vector<json>{G::ref("s"), json::array({1})}, {4})
                .node("e", "aten.exp.default", {G::ref("m")}, {4})
                .node("a", "aten.argmax.default", std::vector<json>{G::ref("s"), 1}, {4})
                .values_dtype("a", "int64")
                .build({"e", "a"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0].ops, (std::vector<std::string>{"aten.sum.dim_IntList", "aten.exp.default"}));
  EXPECT_EQ(p.groups[1].ops, (std::vector<std::string>{"aten.argmax.default"}));
  EXPECT_EQ(p.groups[1].slots.at(0).layout.base, "s");
}

// prod over one dimension (prod.dim_int takes a single int) is a statistic of its own kind.
TEST(Plan, ProdOverOneDimension) {
  Graph g = G().value("x", {4, 6}, "input")
                .node("p", "aten.prod.dim_int", std::vector<json>{G::ref("x"), 1}, {4})
                .build({"p"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].k, 6);
  EXPECT_NE(p.groups[0].op_struct.find("stat_kind(int i) { return i == 0 ? 4 : -1; }"), std::string::npos)
      << p.groups[0].op_struct;
}

// A norm over groups of channels viewed back to channels (GroupNorm as models follow it with
// their own ops): the ops after the view stay in the row group, each loaded tensor viewed over the
// [rows, groups, channels per group] domain (w per channel: strides 0, 3, 1).
TEST(Plan, RowResultViewedToAnotherShapeKeepsItsChain) {
  Graph g = G().value("x", {4, 6}, "input").value("w", {6}, "parameter")
                .node("v", "aten.view.default", std::vector<json>{G::ref("x"), json::array({4, 2, 3})}, {4, 2, 3})
                .node("m", "aten.mean.dim", std::vector<json>{G::ref("v"), json::array({2}), true}, {4, 2, 1})
                .node("d", "aten.sub.Tensor", {G::ref("v"), G::ref("m")}, {4, 2, 3})
                .node("b", "aten.view.default", std::vector<json>{G::ref("d"), json::array({4, 6})}, {4, 6})
                .node("y", "aten.mul.Tensor", {G::ref("b"), G::ref("w")}, {4, 6})
                .node("s", "aten.sigmoid.default", {G::ref("y")}, {4, 6})
                .build({"s"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& rows = p.groups[0];
  EXPECT_EQ(rows.ops, (std::vector<std::string>{"aten.mean.dim", "aten.sub.Tensor", "aten.mul.Tensor", "aten.sigmoid.default"}));
  bool found = false;
  for (const Slot& sl : rows.slots)
    if (sl.layout.base == "w") {
      found = true;
      EXPECT_EQ(sl.layout.strides, (std::vector<int64_t>{0, 3, 1}));
    }
  EXPECT_TRUE(found);
  EXPECT_EQ(rows.outputs.at(0).value, "s");
}

// A result per element in another shape that a loaded tensor cannot view the domain in (a
// transpose whose two dimensions the domain merges) starts an elementwise group instead.
TEST(Plan, RowResultViewedWhereALoadCannotFollowStartsAGroup) {
  Graph g = G().value("x", {4, 6}, "input").value("t", {4, 3, 2}, "input")
                .node("m", "aten.amax.default", std::vector<json>{G::ref("x"), json::array({1}), true}, {4, 1})
                .node("d", "aten.sub.Tensor", {G::ref("x"), G::ref("m")}, {4, 6})
                .node("b", "aten.view.default", std::vector<json>{G::ref("d"), json::array({4, 2, 3})}, {4, 2, 3})
                .node("tt", "aten.permute.default", std::vector<json>{G::ref("t"), json::array({0, 2, 1})}, {4, 2, 3})
                .node("y", "aten.mul.Tensor", {G::ref("b"), G::ref("tt")}, {4, 2, 3})
                .build({"y"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0].ops, (std::vector<std::string>{"aten.amax.default", "aten.sub.Tensor"}));
  EXPECT_EQ(p.groups[1].family, "elementwise");
  EXPECT_EQ(p.groups[1].ops, (std::vector<std::string>{"aten.mul.Tensor"}));
}

// cumsum: a row group along the scanned dimension, the chains before and after it fused; the
// scanned value exists in the final pass only, so a reduction of it starts a new group.
TEST(Plan, CumsumIsARowGroupWithAScan) {
  Graph g = G().value("x", {4, 6, 5}, "input")
                .node("e", "aten.exp.default", {G::ref("x")}, {4, 6, 5})
                .node("c", "aten.cumsum.default", std::vector<json>{G::ref("e"), 1}, {4, 6, 5})
                .node("y", "aten.mul.Tensor", {G::ref("c"), 0.5}, {4, 6, 5})
                .node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("y"), json::array({1})}, {4, 5})
                .build({"y", "s"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 2u);
  const Group& gr = p.groups[0];
  EXPECT_EQ(gr.family, "reduce");
  EXPECT_EQ(gr.ops, (std::vector<std::string>{"aten.exp.default", "aten.cumsum.default", "aten.mul.Tensor"}));
  EXPECT_EQ(gr.index_shape, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(gr.slots[0].layout.sizes, (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(gr.passes, 0);
  const std::string& op = gr.op_struct;
  EXPECT_NE(op.find("kScans = 1;"), std::string::npos) << op;
  EXPECT_EQ(gr.scans, 1);
  std::vector<std::string> refused;
  families_for(gr, "sm_90", &refused);
  EXPECT_EQ(refused, (std::vector<std::string>{"reduce_split: needs one pass over each row and no per-element outputs",
                                               "reduce_cluster: scans run in element order along the row",
                                               "reduce_cluster_smem: scans run in element order along the row",
                                               "reduce_tile: scans run in element order along the row"}));
  EXPECT_NE(op.find("sv[0] = v0;"), std::string::npos) << op;
  EXPECT_NE(op.find("const float v1 = sc[0];"), std::string::npos) << op;
  EXPECT_EQ(p.groups[1].family, "reduce");
  EXPECT_EQ(accesses(p.groups[1]), (std::vector<std::string>{"y:strided", "s:output"}));
}

// Max pooling returns (values, indices); its values are one value of an elementwise chain that
// reads the input's windows through the input's own view.
TEST(Plan, MaxPoolValuesAreAFusedValue) {
  Graph g = G().value("x", {2, 3, 9, 8}, "input")
                .node("mp", "aten.max_pool2d_with_indices.default",
                      std::vector<json>{G::ref("x"), json::array({3, 3}), json::array({2, 2}), json::array({1, 1}), json::array({2, 1})}, {})
                .value("mp", {}, "tuple")
                .node("v", "getitem", std::vector<json>{G::ref("mp"), 0}, {2, 3, 4, 4})
                .node("r", "aten.relu.default", {G::ref("v")}, {2, 3, 4, 4})
                .build({"r"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& gr = p.groups[0];
  EXPECT_EQ(gr.family, "elementwise");
  EXPECT_EQ(accesses(gr), (std::vector<std::string>{"x:strided", "r:output"}));
  EXPECT_EQ(gr.slots[0].layout.sizes, (std::vector<int64_t>{2, 3, 9, 8}));  // the input's own shape
  EXPECT_EQ(gr.op_struct.rfind("#include \"pool.cuh\"", 0), 0u) << gr.op_struct;
  // The input at the output's (batch, channel), the two merged into one dimension of stride 72,
  // and the output's spatial index; the input's spatial strides {8, 1} are literals too.
  EXPECT_NE(gr.op_struct.find("fusetune::pool<0, 2, 9, 3>(a.ptr[0] + ((long long)(unsigned)((unsigned)idx / 16u) * 72), "
                              "(unsigned)idx % 16u, fusetune::PoolWindow<2>{{4, 4}, {9, 8}, {8, 1}, {3, 3}, "
                              "{2, 2}, {1, 1}, {2, 1}, 0})"),
            std::string::npos)
      << gr.op_struct;
  // The stride is even, so the window's rows are read in float2 pairs of its 3 columns (the
  // fourth template argument); one output per thread (VEC 1) joins the space for pooling only,
  // and MATH 1 does not (relu has no arithmetic it changes).
  const Family& ew = family_by_name("elementwise");
  const Config vec1{"elementwise", {{"BLOCK", 128}, {"VEC", 1}, {"ILP", 2}, {"MATH", 0}}};
  const Config math1{"elementwise", {{"BLOCK", 128}, {"VEC", 2}, {"ILP", 2}, {"MATH", 1}}};
  EXPECT_TRUE(ew.allowed(gr, vec1, "tf32"));
  EXPECT_FALSE(ew.allowed(gr, math1, "tf32"));
  const Plan chain = plan_graph(G().value("x", {4, 8}, "input").node("r", "aten.relu.default", {G::ref("x")}, {4, 8}).build({"r"}));
  EXPECT_FALSE(ew.allowed(chain.groups[0], vec1, "tf32"));

  // No pairs where a row's first column has no fixed parity: an odd stride, or an odd row stride.
  for (const auto& [width, stride] : std::vector<std::pair<int64_t, int64_t>>{{8, 1}, {7, 2}}) {
    const int64_t out_w = (width + 2 - 3) / stride + 1;
    const Plan odd = plan_graph(G().value("x", {2, 3, 9, width}, "input")
                                    .node("mp", "aten.max_pool2d_with_indices.default",
                                          std::vector<json>{G::ref("x"), json::array({3, 3}), json::array({stride, stride}), json::array({1, 1})}, {})
                                    .value("mp", {}, "tuple")
                                    .node("v", "getitem", std::vector<json>{G::ref("mp"), 0}, {2, 3, (9 + 2 - 3) / stride + 1, out_w})
                                    .build({"v"}));
    EXPECT_NE(odd.groups[0].op_struct.find("fusetune::pool<0, 2, 9, 0>("), std::string::npos) << odd.groups[0].op_struct;
  }

  Graph indices = G().value("x", {2, 3, 9, 8}, "input")
                      .node("mp", "aten.max_pool2d_with_indices.default", std::vector<json>{G::ref("x"), json::array({2, 2})}, {})
                      .value("mp", {}, "tuple")
                      .node("i", "getitem", std::vector<json>{G::ref("mp"), 1}, {2, 3, 4, 4})
                      .build({"i"});
  expect_refusal(indices, "indices of max pooling are not lowered");
}

// Average pooling: padding not counted, a divisor override; a reduction of a pooled value reads
// it from memory (a window is not an element of the reduction's rows).
TEST(Plan, AvgPoolThenASum) {
  Graph g = G().value("x", {2, 5, 7, 6}, "input")
                .node("ap", "aten.avg_pool2d.default",
                      std::vector<json>{G::ref("x"), json::array({3, 2}), json::array(), json::array({1, 1}), true, false, 4},
                      {2, 5, 3, 4})
                .node("s", "aten.sum.default", std::vector<json>{G::ref("ap")}, {})
                .build({"s"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0].family, "elementwise");
  EXPECT_EQ(p.groups[1].family, "reduce");
  EXPECT_NE(p.groups[0].op_struct.find("fusetune::pool<2, 2, 6, 2>(a.ptr[0] + ((long long)(unsigned)((unsigned)idx / 12u) * 42), "
                                       "(unsigned)idx % 12u, fusetune::PoolWindow<2>{{3, 4}, {7, 6}, {6, 1}, {3, 2}, "
                                       "{3, 2}, {1, 1}, {1, 1}, 4})"),
            std::string::npos)
      << p.groups[0].op_struct;
}

// A per-row value broadcast against the rows the wrong way (here along the last dimension) is
// not a row value: the consumer reads it from memory instead.
TEST(Plan, ReducedValueBroadcastAlongTheReducedDimensionIsNotFused) {
  Graph g = G().value("x", {6, 6}, "input")
                .node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("x"), json::array({1})}, {6})
                .node("y", "aten.sub.Tensor", {G::ref("x"), G::ref("s")}, {6, 6})
                .build({"y"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[1].family, "elementwise");
  EXPECT_EQ(accesses(p.groups[0]), (std::vector<std::string>{"x:strided", "s:output"}));
}

// scalar_tensor (as logsumexp's decomposition makes for its where()) is inlined as a literal.
TEST(Plan, ConstantTensorsAreInlined) {
  Graph g = G().value("x", {4, 6}, "input")
                .node("m", "aten.amax.default", std::vector<json>{G::ref("x"), json::array({1}), true}, {4, 1})
                .node("c", "aten.eq.Scalar", std::vector<json>{G::ref("m"), 1.5}, {4, 1})
                .node("z", "aten.scalar_tensor.default", std::vector<json>{0.25}, {}, json{{"dtype", {{"dtype", "float32"}}}})
                .node("w", "aten.where.self", {G::ref("c"), G::ref("z"), G::ref("m")}, {4, 1})
                .node("d", "aten.sub.Tensor", {G::ref("x"), G::ref("w")}, {4, 6})
                .build({"d"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].ops, (std::vector<std::string>{"aten.amax.default", "aten.eq.Scalar", "aten.where.self",
                                                       "aten.sub.Tensor"}));
  EXPECT_NE(p.groups[0].op_struct.find("0.25f"), std::string::npos) << p.groups[0].op_struct;

  Graph returned = G().node("z", "aten.scalar_tensor.default", std::vector<json>{1.0}, {}).build({"z"});
  EXPECT_THROW(plan_graph(returned), UserError);
}

// op_range follows an interpolation's source index: (pos + 0.5) * 0.5 - 0.5 in float32, clamped
// at 0 and truncated to int64, is 0..63 for pos 0..127; the decomposition's wrap of negative
// indices and its in-range test are then decided.
TEST(IndexRange, FollowsAnInterpolationsIndexAndDecidesItsTests) {
  auto node = [](const std::string& op, json kwargs = json::object()) { return Node{"n", op, json::array(), std::move(kwargs), ""}; };
  auto args = [](std::vector<std::optional<Range>> rs) {
    return [rs](size_t i, const char*) { return i < rs.size() ? rs[i] : std::nullopt; };
  };
  const Range pos{0, 127, false};
  Range src = op_range(node("aten.add.Tensor"), args({pos, Range::point(0.5)}), false);
  src = op_range(node("aten.mul.Tensor"), args({src, Range::point(0.5)}), false);
  src = op_range(node("aten.sub.Tensor"), args({src, Range::point(0.5)}), false);
  EXPECT_LT(src.lo, -0.25);  // float32's rounding allowed for
  src = op_range(node("aten.clamp_min.default"), args({src, Range::point(0)}), false);
  EXPECT_EQ(src.lo, 0.0);
  const Range lo = op_range(node("aten._to_copy.default", {{"dtype", {{"dtype", "int64"}}}}), args({src}), true);
  EXPECT_EQ(lo.lo, 0.0);
  EXPECT_EQ(lo.hi, 63.0);
  EXPECT_TRUE(lo.fits_int32());
  const Range negative = op_range(node("aten.lt.Scalar"), args({lo, Range::point(0)}), false);
  EXPECT_TRUE(negative.is_point());
  EXPECT_EQ(negative.lo, 0.0);
  const Range wrapped = op_range(node("aten.add.Tensor"), args({lo, Range::point(64)}), true);
  const Range index = op_range(node("aten.where.self"), args({negative, wrapped, lo}), true);
  EXPECT_EQ(index.lo, 0.0);
  EXPECT_EQ(index.hi, 63.0);
  EXPECT_EQ(op_range(node("aten.lt.Scalar"), args({index, Range::point(64)}), false).lo, 1.0);
  const Range high = op_range(node("aten.ge.Scalar"), args({index, Range::point(32)}), false);  // undecided
  EXPECT_FALSE(high.is_point());
  EXPECT_EQ(high.lo, 0.0);
  EXPECT_EQ(high.hi, 1.0);
  EXPECT_EQ(op_range(node("aten.where.self"), args({high, wrapped, lo}), true).hi, 127.0);
}

// Float32 rounding stays inside the range; what cannot be bounded is unknown and decides nothing.
TEST(IndexRange, IsConservative) {
  auto node = [](const std::string& op) { return Node{"n", op, json::array(), json::object(), ""}; };
  auto args = [](std::vector<std::optional<Range>> rs) {
    return [rs](size_t i, const char*) { return i < rs.size() ? rs[i] : std::nullopt; };
  };
  const float sum = 0.1f + 0.2f;
  const Range r = op_range(node("aten.add.Tensor"), args({Range::point(0.1f), Range::point(0.2f)}), false);
  EXPECT_LE(r.lo, sum);
  EXPECT_GE(r.hi, sum);
  EXPECT_FALSE(r.is_point());
  // A divisor that may be 0, an int64 product past 2^53, an op it does not follow: unknown.
  EXPECT_TRUE(op_range(node("aten.div.Tensor"), args({Range::point(1), Range{-1, 1, false}}), false).nan);
  EXPECT_TRUE(op_range(node("aten.mul.Tensor"), args({Range{0, 0x1p40, false}, Range{0, 0x1p20, false}}), true).nan);
  EXPECT_TRUE(op_range(node("aten.exp.default"), args({Range::point(1)}), false).nan);
  const Range undecided = op_range(node("aten.lt.Scalar"), args({Range::unknown(), Range::point(0)}), false);
  EXPECT_FALSE(undecided.is_point());
  // Python's remainder by 4 is 0..3 (x itself where x is already there); C's fmod keeps x's sign.
  EXPECT_EQ(op_range(node("aten.remainder.Scalar"), args({Range{-5, 5, false}, Range::point(4)}), true).lo, 0.0);
  EXPECT_EQ(op_range(node("aten.remainder.Scalar"), args({Range{-5, 5, false}, Range::point(4)}), true).hi, 3.0);
  EXPECT_EQ(op_range(node("aten.fmod.Scalar"), args({Range{-5, 5, false}, Range::point(4)}), true).lo, -3.0);
  EXPECT_EQ(op_range(node("aten.remainder.Scalar"), args({Range{1, 2, false}, Range::point(4)}), true).lo, 1.0);
  EXPECT_TRUE((Range{-2147483647.0, 2147483647.0, false}).fits_int32());
  EXPECT_FALSE((Range{0, 2147483648.0, false}).fits_int32());
  EXPECT_FALSE((Range{-2147483648.0, 0, false}).fits_int32());
}

// Int64 arithmetic whose result leaves 32 bits widens its int operands first (an int product
// would overflow), and a division of int64 values is a true one, in floats, as torch's.
TEST(Plan, DerivedIntegersWidenWhereTheyLeave32BitsAndDivideAsFloats) {
  G b;
  b.value("x", {100000}, "input");
  b.node("pos", "aten.arange.default", {100000}, {100000}).values_dtype("pos", "int64");
  b.node("square", "aten.mul.Tensor", {G::ref("pos"), G::ref("pos")}, {100000}).values_dtype("square", "int64");
  b.node("next", "aten.add.Tensor", {G::ref("pos"), 1}, {100000}).values_dtype("next", "int64");
  b.node("q", "aten.div.Tensor", {G::ref("square"), G::ref("next")}, {100000});
  b.node("y", "aten.mul.Tensor", {G::ref("x"), G::ref("q")}, {100000});
  const Plan p = plan_graph(b.build({"y"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const std::string& code = p.groups[0].op_struct;
  EXPECT_NE(code.find("    const int v0_i0 = ((0 + 1 * (int)idx) + 1);\n"
                      "    const long long v0_i1 = ((long long)(0 + 1 * (int)idx) * (long long)(0 + 1 * (int)idx));\n"
                      "    const float v0_i2 = ((float)v0_i1 / (float)v0_i0);\n"),
            std::string::npos)
      << code;
}

// x * (a / b) with int64 a and b: torch's division is a true one, so the step divides floats
// (C++ would divide the long longs as integers).
TEST(Plan, ADivisionOfInt64TensorsIsInFloats) {
  G b;
  b.value("x", {8, 16}, "input").value("a", {8, 16}, "input", "int64").value("b", {8, 16}, "input", "int64");
  b.node("q", "aten.div.Tensor", {G::ref("a"), G::ref("b")}, {8, 16});
  b.node("y", "aten.mul.Tensor", {G::ref("x"), G::ref("q")}, {8, 16});
  const Plan p = plan_graph(b.build({"y"}));
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_NE(p.groups[0].op_struct.find("const float v0 = ((float)reinterpret_cast<const long long*>(a.ptr[1])[((long long)(unsigned)idx)] / "
                                       "(float)reinterpret_cast<const long long*>(a.ptr[2])[((long long)(unsigned)idx)]);"),
            std::string::npos)
      << p.groups[0].op_struct;
}

// A gather at an index wrapped and masked as torch's indexing decomposition writes it
// (where(i < 0, i + n, i), then -1 where it falls outside): over positions 0..4 both tests are
// decided, so the index is the position itself, in ints, with no range check; the next position
// (1..5) can leave x's 5 columns and keeps its check.
TEST(Plan, DecidedWrapsAndMasksOfAnIndexFold) {
  G b;
  b.value("x", {3, 5}, "input");
  b.node("pos", "aten.arange.default", {5}, {5}).values_dtype("pos", "int64");
  b.node("neg", "aten.lt.Scalar", {G::ref("pos"), 0}, {5}).values_dtype("neg", "bool");
  b.node("up", "aten.add.Tensor", {G::ref("pos"), 5}, {5}).values_dtype("up", "int64");
  b.node("wrap", "aten.where.self", {G::ref("neg"), G::ref("up"), G::ref("pos")}, {5}).values_dtype("wrap", "int64");
  b.node("inside", "aten.lt.Scalar", {G::ref("wrap"), 5}, {5}).values_dtype("inside", "bool");
  b.node("none", "aten.scalar_tensor.default", {-1}, {}, json{{"dtype", {{"dtype", "int64"}}}}).values_dtype("none", "int64");
  b.node("at", "aten.where.self", {G::ref("inside"), G::ref("wrap"), G::ref("none")}, {5}).values_dtype("at", "int64");
  b.node("i", "aten.expand.default", {G::ref("at"), json::array({3, 5})}, {3, 5}).values_dtype("i", "int64");
  b.node("g", "aten.gather.default", {G::ref("x"), 1, G::ref("i")}, {3, 5});
  b.node("next", "aten.add.Tensor", {G::ref("pos"), 1}, {5}).values_dtype("next", "int64");
  b.node("j", "aten.expand.default", {G::ref("next"), json::array({3, 5})}, {3, 5}).values_dtype("j", "int64");
  b.node("h", "aten.gather.default", {G::ref("x"), 1, G::ref("j")}, {3, 5});
  b.node("y", "aten.add.Tensor", {G::ref("g"), G::ref("h")}, {3, 5});
  const Plan p = plan_graph(b.build({"y"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const std::string& code = p.groups[0].op_struct;
  EXPECT_NE(code.find("    const long long v0_at = (0 + 1 * (int)v0_i0);\n"
                      "    const float v0 = a.ptr[0][((int)((unsigned)idx / 5u) * 5) + (int)v0_at * 1];\n"),
            std::string::npos)
      << code;
  EXPECT_NE(code.find("    const int v1_i1 = ((0 + 1 * (int)v1_i0) + 1);\n"
                      "    const long long v1_at = v1_i1;\n"
                      "    if ((unsigned long long)v1_at >= 5ULL) __trap();"),
            std::string::npos)
      << code;
  EXPECT_EQ(code.find(" ? "), std::string::npos) << code;
}

// torch.triu(a @ b) as torch.export writes it: two aranges viewed as a row and a column, their
// difference compared with 0, a where. The aranges and the mask computed from them are in no
// group: the epilogue computes them from idx where the where reads the mask, so the mask is
// fused into the matrix product.
TEST(Plan, ArangeMaskFusesIntoTheProductsEpilogue) {
  G b;
  b.value("a", {5, 4}, "input").value("b", {4, 6}, "input");
  b.node("mm", "aten.mm.default", {G::ref("a"), G::ref("b")}, {5, 6});
  b.node("cols", "aten.arange.start_step", {0, 6}, {6}, json{{"dtype", nullptr}}).values_dtype("cols", "int64");
  b.node("row", "aten.unsqueeze.default", {G::ref("cols"), -2}, {1, 6}).values_dtype("row", "int64");
  b.node("rows", "aten.arange.start_step", {0, 5}, {5}).values_dtype("rows", "int64");
  b.node("col", "aten.unsqueeze.default", {G::ref("rows"), -1}, {5, 1}).values_dtype("col", "int64");
  b.node("sub", "aten.sub.Tensor", {G::ref("row"), G::ref("col")}, {5, 6}).values_dtype("sub", "int64");
  b.node("ge", "aten.ge.Scalar", {G::ref("sub"), 0}, {5, 6}).values_dtype("ge", "bool");
  b.node("zero", "aten.scalar_tensor.default", {0}, {});
  b.node("triu", "aten.where.self", {G::ref("ge"), G::ref("mm"), G::ref("zero")}, {5, 6});
  const Plan p = plan_graph(b.build({"triu"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& gr = p.groups[0];
  EXPECT_EQ(gr.family, "gemm");
  EXPECT_EQ(gr.nodes, (std::vector<std::string>{"mm", "triu"}));
  EXPECT_EQ(accesses(gr), (std::vector<std::string>{"a:operand", "b:operand", "triu:output"}));
  // The positions (0..5, 0..4) and their difference fit in ints: computed in 32 bits.
  EXPECT_NE(gr.op_struct.find("const int v1_i0 = ((0 + 1 * (int)((long long)((unsigned)idx % 6u))) - "
                              "(0 + 1 * (int)((long long)((unsigned)idx / 6u))));\n"
                              "    const float v1_i1 = (float)(v1_i0 >= 0);\n"
                              "    const float v1 = (v1_i1 != 0.f ? v0 : 0.0f);"),
            std::string::npos)
      << gr.op_struct;
}

// A linear interpolation along x's rows as torch's upsample decomposition writes it: source
// positions, their floor and next index and the weight, computed from an arange only, so each is
// recomputed where it is read (declared once per step); the two gathers and the blend are one
// kernel, with no index tensor written. The indices' ranges (0..4, 1..4) fit in ints and in x's
// rows: computed in 32 bits, with no range check.
TEST(Plan, ValuesComputedFromArangesAreRecomputedWhereRead) {
  G b;
  b.value("x", {3, 5}, "input");
  b.node("pos", "aten.arange.default", {9}, {9}, json{{"dtype", {{"dtype", "float32"}}}});
  b.node("src", "aten.mul.Tensor", {G::ref("pos"), 0.5}, {9});
  b.node("lo", "aten._to_copy.default", {G::ref("src")}, {9}, json{{"dtype", {{"dtype", "int64"}}}}).values_dtype("lo", "int64");
  b.node("next", "aten.add.Tensor", {G::ref("lo"), 1}, {9}).values_dtype("next", "int64");
  b.node("hi", "aten.clamp.default", {G::ref("next"), json(nullptr), 4}, {9}).values_dtype("hi", "int64");
  b.node("lof", "aten._to_copy.default", {G::ref("lo")}, {9}, json{{"dtype", {{"dtype", "float32"}}}});
  b.node("w", "aten.sub.Tensor", {G::ref("src"), G::ref("lof")}, {9});
  b.node("ilo", "aten.expand.default", {G::ref("lo"), json::array({3, 9})}, {3, 9}).values_dtype("ilo", "int64");
  b.node("ihi", "aten.expand.default", {G::ref("hi"), json::array({3, 9})}, {3, 9}).values_dtype("ihi", "int64");
  b.node("a", "aten.gather.default", {G::ref("x"), 1, G::ref("ilo")}, {3, 9});
  b.node("c", "aten.gather.default", {G::ref("x"), 1, G::ref("ihi")}, {3, 9});
  b.node("d", "aten.sub.Tensor", {G::ref("c"), G::ref("a")}, {3, 9});
  b.node("m", "aten.mul.Tensor", {G::ref("d"), G::ref("w")}, {3, 9});
  b.node("y", "aten.add.Tensor", {G::ref("a"), G::ref("m")}, {3, 9});
  const Plan p = plan_graph(b.build({"y"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& gr = p.groups[0];
  EXPECT_EQ(gr.nodes, (std::vector<std::string>{"a", "c", "d", "m", "y"}));
  EXPECT_EQ(accesses(gr), (std::vector<std::string>{"x:strided", "y:output"}));
  const std::string& code = gr.op_struct;
  EXPECT_NE(code.find("    const long long v0_i0 = ((long long)((unsigned)idx % 9u));\n"
                      "    const float v0_i1 = ((0.0f + 1.0f * (int)v0_i0) * 0.5f);\n"
                      "    const int v0_i2 = (int)(v0_i1);\n"
                      "    const long long v0_at = v0_i2;\n"
                      "    const float v0 = a.ptr[0]["),
            std::string::npos)
      << code;
  EXPECT_NE(code.find("    const int v1_i4 = min(v1_i3, 4);\n"), std::string::npos) << code;
  EXPECT_EQ(code.find("__trap"), std::string::npos) << code;
  // The weight's src and lo, at m's element, once each.
  EXPECT_NE(code.find("    const float v3_i4 = (v3_i1 - v3_i3);\n    const float v3 = (v2 * v3_i4);"), std::string::npos)
      << code;
}

// A causal mask made from aranges applied to an input before a row reduction: the mask is written
// by a small kernel and loaded, so that the where joins the sum's row group (row kernels cannot
// compute positions); once written, a later where reads it too.
TEST(Plan, AMaskFromArangesBeforeARowOpIsWrittenAndLoaded) {
  G b;
  b.value("x", {3, 5, 5}, "input");
  b.node("cols", "aten.arange.default", {5}, {5}).values_dtype("cols", "int64");
  b.node("rows", "aten.arange.default", {5}, {5}).values_dtype("rows", "int64");
  b.node("col", "aten.unsqueeze.default", {G::ref("rows"), -1}, {5, 1}).values_dtype("col", "int64");
  b.node("above", "aten.gt.Tensor", {G::ref("cols"), G::ref("col")}, {5, 5}).values_dtype("above", "bool");
  b.node("masked", "aten.where.self", {G::ref("above"), -1.0, G::ref("x")}, {3, 5, 5});
  b.node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("masked"), json::array({2})}, {3, 5});
  b.node("other", "aten.where.self", {G::ref("above"), G::ref("x"), 0.0}, {3, 5, 5});
  const Plan p = plan_graph(b.build({"s", "other"}));
  ASSERT_EQ(p.groups.size(), 3u);
  EXPECT_EQ(p.groups[0].family, "elementwise");
  EXPECT_EQ(accesses(p.groups[0]), (std::vector<std::string>{"above:output"}));
  EXPECT_EQ(p.groups[0].outputs.at(0).dtype, "float32");  // a bool written as 0 / 1
  EXPECT_EQ(p.groups[1].family, "reduce");
  EXPECT_EQ(p.groups[1].nodes, (std::vector<std::string>{"masked", "s"}));
  EXPECT_EQ(p.groups[2].nodes, (std::vector<std::string>{"other"}));
  EXPECT_EQ(accesses(p.groups[2]), (std::vector<std::string>{"x:full", "above:strided", "other:output"}));
}

// fmod and remainder: in 64-bit integers on int64 values (roll's shifted indices), in floats on
// floats; remainder takes the divisor's sign. bitwise_not of an int64 value is its complement
// (of a bool one a logical not: Plan.BoolConstantsAndLogicalOpsAreTruthsOfFloats).
TEST(Plan, FmodRemainderAndBitwiseNotInIntegersAndFloats) {
  G b;
  b.value("i", {6}, "input", "int64").value("x", {6}, "input");
  b.node("a", "aten.add.Tensor", {G::ref("i"), 3}, {6}).values_dtype("a", "int64");
  b.node("f", "aten.fmod.Scalar", {G::ref("a"), 5}, {6}).values_dtype("f", "int64");
  b.node("r", "aten.remainder.Scalar", {G::ref("x"), -1.5}, {6});
  b.node("n", "aten.bitwise_not.default", {G::ref("f")}, {6}).values_dtype("n", "int64");
  const Plan p = plan_graph(b.build({"f", "r", "n"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const std::string& code = p.groups[0].op_struct;
  EXPECT_NE(code.find("const long long v1 = (v0 % 5LL);"), std::string::npos) << code;
  EXPECT_NE(code.find("const long long v3 = ~(v1);"), std::string::npos) << code;
  EXPECT_NE(code.find("const float v2 = ((fmodf(x[0], -1.5f) != 0.f && (-1.5f < 0.f) != (fmodf(x[0], -1.5f) < 0.f)) ? "
                      "fmodf(x[0], -1.5f) + -1.5f : fmodf(x[0], -1.5f));"),
            std::string::npos)
      << code;
}

// as_strided (adaptive_avg_pool1d's decomposition restrides its mean's size-1 dimensions): over a
// computed value it is a view of that value's elements; over a view it is refused, since its
// strides count PyTorch's storage, which the view shares from an unknown place.
TEST(Plan, AsStridedViewsAComputedValue) {
  G b;
  b.value("x", {10, 7, 4}, "input");
  b.node("m", "aten.mean.dim", std::vector<json>{G::ref("x"), json::array({-1}), true}, {10, 7, 1});
  b.node("s", "aten.as_strided.default", {G::ref("m"), json::array({10, 7, 1}), json::array({7, 1, 7})}, {10, 7, 1});
  b.node("y", "aten.view.default", {G::ref("s"), json::array({10, 7})}, {10, 7});
  const Plan p = plan_graph(b.build({"y"}));
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].family, "reduce");
  ASSERT_EQ(p.groups[0].outputs.size(), 1u);  // the mean, as the view y of it the model returns
  EXPECT_EQ(p.groups[0].outputs[0].value, "y");

  G v;
  v.value("x", {4, 6}, "input");
  v.node("t", "aten.permute.default", {G::ref("x"), json::array({1, 0})}, {6, 4});
  v.node("s", "aten.as_strided.default", {G::ref("t"), json::array({2, 2}), json::array({1, 2})}, {2, 2});
  try {
    plan_graph(v.build({"s"}));
    ADD_FAILURE() << "planned";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("its input is a view (aten.permute.default)"), std::string::npos) << e.what();
  }
}

// A bool constant is a float 1 / 0 like every bool in a kernel's registers; logical and / or / xor
// take the operands' truth.
TEST(Plan, BoolConstantsAndLogicalOpsAreTruthsOfFloats) {
  G b;
  b.value("x", {4, 6}, "input");
  b.node("all", "aten.full.default", {json::array({4, 6}), true}, {4, 6}, json{{"dtype", {{"dtype", "bool"}}}})
      .values_dtype("all", "bool");
  b.node("ge", "aten.ge.Scalar", {G::ref("x"), 0}, {4, 6}).values_dtype("ge", "bool");
  b.node("keep", "aten.logical_and.default", {G::ref("ge"), G::ref("all")}, {4, 6}).values_dtype("keep", "bool");
  b.node("le", "aten.le.Scalar", {G::ref("x"), -1.0}, {4, 6}).values_dtype("le", "bool");
  b.node("either", "aten.logical_or.default", {G::ref("le"), G::ref("keep")}, {4, 6}).values_dtype("either", "bool");
  b.node("odd", "aten.logical_xor.default", {G::ref("either"), G::ref("x")}, {4, 6}).values_dtype("odd", "bool");
  b.node("even", "aten.bitwise_not.default", {G::ref("odd")}, {4, 6}).values_dtype("even", "bool");
  b.node("y", "aten.where.self", {G::ref("even"), 0.5, G::ref("x")}, {4, 6});
  const Plan p = plan_graph(b.build({"y"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const std::string& code = p.groups[0].op_struct;
  EXPECT_NE(code.find("const float v1 = (float)((v0 != 0.f) && (1.0f != 0.f));"), std::string::npos) << code;
  EXPECT_NE(code.find("const float v5 = (float)(v4 == 0.f);"), std::string::npos) << code;
  EXPECT_NE(code.find("const float v3 = (float)((v2 != 0.f) || (v1 != 0.f));"), std::string::npos) << code;
  EXPECT_NE(code.find("const float v4 = (float)((v3 != 0.f) != (x[0] != 0.f));"), std::string::npos) << code;
}

// A slice or a flip of an arange starts where it does: arange(12)[3:] is 3, 4, ... 11, and
// arange(9).flip(0) is 8, 7, ... 0.
TEST(Plan, SlicedOrFlippedArangeStartsWhereItDoes) {
  G b;
  b.value("x", {4, 9}, "input");
  b.node("r", "aten.arange.start_step", {0, 12}, {12}, json{{"dtype", {{"dtype", "float32"}}}});
  b.node("s", "aten.slice.Tensor", {G::ref("r"), 0, 3, 9223372036854775807LL}, {9});
  b.node("y", "aten.mul.Tensor", {G::ref("x"), G::ref("s")}, {4, 9});
  b.node("q", "aten.arange.start_step", {0, 9}, {9}, json{{"dtype", {{"dtype", "float32"}}}});
  b.node("f", "aten.flip.default", {G::ref("q"), json::array({0})}, {9});
  b.node("z", "aten.add.Tensor", {G::ref("y"), G::ref("f")}, {4, 9});
  const Plan p = plan_graph(b.build({"z"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const std::string& code = p.groups[0].op_struct;
  EXPECT_NE(code.find("(0.0f + 1.0f * (int)(3LL + ((long long)((unsigned)idx % 9u))))"), std::string::npos) << code;
  EXPECT_NE(code.find("(0.0f + 1.0f * (int)(8LL + ((long long)((unsigned)idx % 9u) * -1)))"), std::string::npos) << code;
}

// A gather computes an arange index where it reads it (here through an expand, counting down);
// a value computed from an arange keeps its group from becoming a row group (row kernels have no
// idx), so a reduction of it reads it from memory; an arange read by something other than an
// elementwise step or a gather (here the model's output) is written out by a group of its own.
TEST(Plan, ArangesAreComputedWhereReadOrWrittenFirst) {
  G b;
  b.value("x", {3, 4}, "input");
  b.node("down", "aten.arange.start_step", {3, -1, -1}, {4}).values_dtype("down", "int64");
  b.node("idx", "aten.expand.default", {G::ref("down"), json::array({3, -1})}, {3, 4}).values_dtype("idx", "int64");
  b.node("rev", "aten.gather.default", {G::ref("x"), 1, G::ref("idx")}, {3, 4});
  b.node("pos", "aten.arange.default", {4}, {4}, json{{"dtype", {{"dtype", "float32"}}}});
  b.node("w", "aten.mul.Tensor", {G::ref("x"), G::ref("pos")}, {3, 4});
  b.node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("w"), json::array({1})}, {3});
  b.node("half", "aten.arange.start", {0.5, 3.5}, {3}, json{{"dtype", {{"dtype", "float32"}}}});
  const Plan p = plan_graph(b.build({"rev", "s", "half"}));
  std::vector<std::string> families;
  for (const Group& gr : p.groups) families.push_back(gr.family);
  EXPECT_EQ(families, (std::vector<std::string>{"elementwise", "reduce", "elementwise"}));
  // w joins the gather's group (the same elements); the sum reads it from memory.
  EXPECT_EQ(p.groups[0].nodes, (std::vector<std::string>{"rev", "w"}));
  EXPECT_EQ(accesses(p.groups[0]), (std::vector<std::string>{"x:full", "x:strided", "w:output", "rev:output"}));
  EXPECT_NE(p.groups[0].op_struct.find("const long long v0_at = (3 + -1 * (int)((long long)((unsigned)idx % 4u)));\n"
                                       "    const float v0 = a.ptr[1]["),
            std::string::npos)
      << p.groups[0].op_struct;
  EXPECT_NE(p.groups[0].op_struct.find("(x[0] * (0.0f + 1.0f * (int)((long long)((unsigned)idx % 4u))))"), std::string::npos)
      << p.groups[0].op_struct;
  EXPECT_EQ(accesses(p.groups[1]), (std::vector<std::string>{"w:strided", "s:output"}));
  EXPECT_EQ(p.groups[2].nodes, (std::vector<std::string>{"half"}));
  EXPECT_NE(p.groups[2].op_struct.find("(0.5f + 1.0f * "), std::string::npos) << p.groups[2].op_struct;

  G bad;
  bad.node("r", "aten.arange.start_step", {0, 4}, {4}, json{{"dtype", {{"dtype", "int32"}}}}).values_dtype("r", "int32");
  expect_refusal(bad.build({"r"}), "only int64 and float32 aranges are lowered");
}

// torch.cat: one elementwise step over the result, each part read where the coordinate along the
// concatenated dimension falls in it (and only there), through its own strides shifted back by
// the part's start; a constant part (zeros_like, as an exclusive cumsum's shift writes it) is a
// literal; a value may be a part twice.
TEST(Plan, CatReadsEachPartWhereItsCoordinatesFall) {
  G b;
  b.value("x", {4, 6}, "input").value("y", {6, 2}, "input");
  b.node("t", "aten.permute.default", {G::ref("y"), json::array({1, 0})}, {2, 6});
  b.node("zero", "aten.full_like.default", {G::ref("x"), 0}, {4, 6});
  b.node("rows", "aten.cat.default", {json::array({G::ref("x"), G::ref("t"), G::ref("zero"), G::ref("x")})}, {14, 6});
  b.node("cols", "aten.cat.default", {json::array({G::ref("x"), G::ref("x")}), -1}, {4, 12});
  b.node("r", "aten.relu.default", {G::ref("cols")}, {4, 12});
  const Plan p = plan_graph(b.build({"rows", "r"}));
  ASSERT_EQ(p.groups.size(), 2u);
  const Group& rows = p.groups[0];
  EXPECT_EQ(accesses(rows), (std::vector<std::string>{"y:strided", "x:strided", "rows:output"}));  // x's parts share a slot
  EXPECT_EQ(rows.slots[0].layout.strides, (std::vector<int64_t>{1, 2}));  // y^T, read through strides
  EXPECT_NE(rows.op_struct.find("const long long v0_at = ((long long)((unsigned)idx / 6u));\n"
                                "    const float v0 = (v0_at < 4LL ? a.ptr[1][((long long)(unsigned)idx) - 0LL] : "
                                "(v0_at < 6LL ? a.ptr[0][((long long)((unsigned)idx / 6u) + (long long)((unsigned)idx % 6u) * 2) - 4LL] : "
                                "(v0_at < 10LL ? 0.0f : a.ptr[1][((long long)(unsigned)idx) - 60LL])));"),
            std::string::npos)
      << rows.op_struct;
  EXPECT_EQ(p.groups[1].nodes, (std::vector<std::string>{"cols", "r"}));
  EXPECT_NE(p.groups[1].op_struct.find("const long long v1_at = ((long long)((unsigned)idx % 12u));\n"
                                       "    const float v1 = (v1_at < 6LL ? a.ptr[0][((long long)((unsigned)idx / 12u) * 6 + "
                                       "(long long)((unsigned)idx % 12u)) - 0LL] : a.ptr[0][((long long)((unsigned)idx / 12u) * 6 + "
                                       "(long long)((unsigned)idx % 12u)) - 6LL]);"),
            std::string::npos)
      << p.groups[1].op_struct;

  // A reduction of a cat along another dimension than the cat's (GoogLeNet's pooling after its
  // inception blocks) reads it from memory, as does one of a pad along two dimensions; along the
  // cat's (or pad's) one dimension the row kernel reads the parts (CatAlongARowIsReadWhereItsPartsLie).
  G reduced;
  reduced.value("x", {4, 6}, "input");
  reduced.node("c", "aten.cat.default", {json::array({G::ref("x"), G::ref("x")}), 0}, {8, 6});
  reduced.node("p", "aten.constant_pad_nd.default", {G::ref("x"), json::array({1, 1, 1, 0})}, {5, 8});
  reduced.node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("c"), json::array({1})}, {8});
  reduced.node("t", "aten.sum.dim_IntList", std::vector<json>{G::ref("p"), json::array({1})}, {5});
  const Plan r = plan_graph(reduced.build({"s", "t"}));
  std::vector<std::string> families;
  for (const Group& gr : r.groups) families.push_back(gr.family);
  EXPECT_EQ(families, (std::vector<std::string>{"elementwise", "elementwise", "reduce", "reduce"}));
  EXPECT_EQ(r.groups[0].nodes, (std::vector<std::string>{"c"}));

  G bad;
  bad.value("x", {4, 6}, "input").value("i", {4, 6}, "input", "int64");
  bad.node("c", "aten.cat.default", {json::array({G::ref("x"), G::ref("i")})}, {8, 6});
  expect_refusal(bad.build({"c"}), "value i has dtype int64");
}

// A cat that only row ops along its dimension read (through slices) is never written: each
// memory part is a slot read over its range of the row (the fill elsewhere), the parts added up.
// KernelBench's exclusive cumsum (zeros before the row, the last column or row dropped) is one
// pass; so is a softmax over two tensors joined along its rows.
TEST(Plan, CatAlongARowIsReadWhereItsPartsLie) {
  G b;
  b.value("x", {4, 6}, "input").value("y", {4, 3}, "input");
  b.node("z", "aten.full.default", {json::array({4, 1}), 0}, {4, 1});
  b.node("c", "aten.cat.default", {json::array({G::ref("z"), G::ref("x")}), 1}, {4, 7});
  b.node("sl", "aten.slice.Tensor", {G::ref("c"), 1, 0, -1}, {4, 6});
  b.node("cs", "aten.cumsum.default", {G::ref("sl"), 1}, {4, 6});
  b.node("rowsl", "aten.slice.Tensor", {G::ref("c"), 0, 0, -1}, {3, 7});  // KernelBench's [:-1]
  b.node("cr", "aten.cumsum.default", {G::ref("rowsl"), 1}, {3, 7});
  b.node("xy", "aten.cat.default", {json::array({G::ref("x"), G::ref("y")}), -1}, {4, 9});
  b.node("mx", "aten.amax.default", std::vector<json>{G::ref("xy"), json::array({1}), true}, {4, 1});
  b.node("d", "aten.sub.Tensor", {G::ref("xy"), G::ref("mx")}, {4, 9});
  const Plan p = plan_graph(b.build({"cs", "cr", "d"}));
  ASSERT_EQ(p.groups.size(), 3u);
  for (const Group& gr : p.groups) EXPECT_EQ(gr.family, "reduce") << gr.id;
  const Group& exclusive = p.groups[0];
  EXPECT_EQ(exclusive.nodes, (std::vector<std::string>{"sl", "cs"}));
  ASSERT_EQ(exclusive.slots.size(), 2u);
  const Slot& part = exclusive.slots[0];
  EXPECT_EQ(part.layout.base, "x");
  EXPECT_EQ(part.layout.offset, -1);  // x[i][j - 1] at column j of the cat
  ASSERT_TRUE(part.range.has_value());
  EXPECT_EQ(*part.range, (SlotRange{1, 6, "0.0f"}));
  EXPECT_NE(exclusive.op_struct.find("static constexpr bool kRanged = true;"), std::string::npos);
  EXPECT_NE(exclusive.op_struct.find("if (s == 0) return r >= 1LL && r < 6LL;"), std::string::npos) << exclusive.op_struct;
  EXPECT_EQ(p.groups[1].nodes, (std::vector<std::string>{"rowsl", "cr"}));
  EXPECT_EQ(p.groups[1].slots[0].layout.sizes, (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(*p.groups[1].slots[0].range, (SlotRange{1, 7, "0.0f"}));
  const Group& softmax = p.groups[2];
  EXPECT_EQ(accesses(softmax), (std::vector<std::string>{"x:strided", "y:strided", "d:output"}));
  EXPECT_EQ(*softmax.slots[0].range, (SlotRange{0, 6, "0.0f"}));
  EXPECT_EQ(*softmax.slots[1].range, (SlotRange{6, 9, "0.0f"}));
  EXPECT_EQ(softmax.slots[1].layout.offset, -6);
  EXPECT_NE(softmax.op_struct.find(" = x[0] + x[1];"), std::string::npos) << softmax.op_struct;
  const Group back = Group::from_json(softmax.to_json());
  EXPECT_EQ(*back.slots[1].range, *softmax.slots[1].range);

  // A waiting cat that a later op reads through a tuple (max pooling with indices) is computed
  // when that op is visited.
  G pooled;
  pooled.value("x", {2, 3, 8, 8}, "input").value("y", {2, 3, 8, 4}, "input");
  pooled.node("c", "aten.cat.default", {json::array({G::ref("x"), G::ref("y")}), 3}, {2, 3, 8, 12});
  pooled.node("sl", "aten.slice.Tensor", {G::ref("c"), 3, 0, -1}, {2, 3, 8, 11});
  pooled.node("cs", "aten.cumsum.default", {G::ref("sl"), 3}, {2, 3, 8, 11});
  pooled.node("mp", "aten.max_pool2d_with_indices.default", std::vector<json>{G::ref("c"), json::array({2, 2})}, {})
      .value("mp", {}, "tuple")
      .node("v", "getitem", std::vector<json>{G::ref("mp"), 0}, {2, 3, 4, 6});
  const Plan pm = plan_graph(pooled.build({"cs", "v"}));
  ASSERT_EQ(pm.groups.size(), 3u);
  EXPECT_EQ(pm.groups[0].nodes, (std::vector<std::string>{"sl", "cs"}));
  EXPECT_EQ(pm.groups[1].nodes, (std::vector<std::string>{"c"}));

  // A slice starting inside the first part and ending inside the second moves both ranges.
  G sliced;
  sliced.value("x", {4, 6}, "input").value("y", {4, 3}, "input");
  sliced.node("c", "aten.cat.default", {json::array({G::ref("x"), G::ref("y")}), 1}, {4, 9});
  sliced.node("sl", "aten.slice.Tensor", {G::ref("c"), 1, 2, 8}, {4, 6});
  sliced.node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("sl"), json::array({1})}, {4});
  const Plan ps = plan_graph(sliced.build({"s"}));
  ASSERT_EQ(ps.groups.size(), 1u);
  EXPECT_EQ(ps.groups[0].slots[0].layout.offset, 2);  // x[i][j + 2] at column j of the slice
  EXPECT_EQ(*ps.groups[0].slots[0].range, (SlotRange{0, 4, "0.0f"}));
  EXPECT_EQ(ps.groups[0].slots[1].layout.offset, -4);  // y[i][j - 4]
  EXPECT_EQ(*ps.groups[0].slots[1].range, (SlotRange{4, 6, "0.0f"}));

  // F.pad along the row is a cat of the input between constants: the exclusive cumsum written
  // with a pad, and a mean over a row padded with 1 on both sides.
  G padded;
  padded.value("x", {4, 6}, "input");
  padded.node("p", "aten.constant_pad_nd.default", {G::ref("x"), json::array({1, 0})}, {4, 7});
  padded.node("sl", "aten.slice.Tensor", {G::ref("p"), 1, 0, 6}, {4, 6});
  padded.node("cs", "aten.cumsum.default", {G::ref("sl"), 1}, {4, 6});
  padded.node("q", "aten.constant_pad_nd.default", {G::ref("x"), json::array({2, 1}), 1.0}, {4, 9});
  padded.node("m", "aten.mean.dim", std::vector<json>{G::ref("q"), json::array({-1})}, {4});
  const Plan pp = plan_graph(padded.build({"cs", "m"}));
  ASSERT_EQ(pp.groups.size(), 2u);
  EXPECT_EQ(pp.groups[0].ops, (std::vector<std::string>{"aten.constant_pad_nd.default", "aten.cumsum.default"}));
  EXPECT_EQ(*pp.groups[0].slots[0].range, (SlotRange{1, 6, "0.0f"}));
  EXPECT_EQ(pp.groups[1].family, "reduce");
  EXPECT_EQ(*pp.groups[1].slots[0].range, (SlotRange{2, 8, "1.0f"}));
  EXPECT_EQ(pp.groups[1].slots[0].layout.offset, -2);

  // Computed by an elementwise group: a cat that an elementwise op reads first; one reduced along
  // another dimension; one whose parts cannot add up (two tensors and a constant 1).
  G other;
  other.value("x", {4, 6}, "input");
  other.node("one", "aten.full.default", {json::array({4, 1}), 1}, {4, 1});
  other.node("c", "aten.cat.default", {json::array({G::ref("x"), G::ref("x")}), 1}, {4, 12});
  other.node("r", "aten.relu.default", {G::ref("c")}, {4, 12});
  other.node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("c"), json::array({1})}, {4});
  other.node("c2", "aten.cat.default", {json::array({G::ref("x"), G::ref("x")}), 1}, {4, 12});
  other.node("s2", "aten.sum.dim_IntList", std::vector<json>{G::ref("c2"), json::array({0})}, {12});
  other.node("c3", "aten.cat.default", {json::array({G::ref("x"), G::ref("one"), G::ref("x")}), 1}, {4, 13});
  other.node("s3", "aten.sum.dim_IntList", std::vector<json>{G::ref("c3"), json::array({1})}, {4});
  const Plan q = plan_graph(other.build({"s", "r", "s2", "s3"}));
  std::vector<std::string> written;
  for (const Group& gr : q.groups)
    for (const GroupOutput& o : gr.outputs) written.push_back(o.value);
  EXPECT_NE(std::find(written.begin(), written.end(), "c"), written.end());
  EXPECT_NE(std::find(written.begin(), written.end(), "c2"), written.end());
  EXPECT_NE(std::find(written.begin(), written.end(), "c3"), written.end());
  for (const Group& gr : q.groups)
    for (const Slot& sl : gr.slots) EXPECT_FALSE(sl.range.has_value()) << gr.id;
}

// A bool mask the model is given is read one byte per element, as 0 / 1 like a comparison's
// result, by elementwise and row kernels alike (the masked product fuses into the scan's loads,
// reduce.cuh's slot kind 3); a copy of it (a view strides cannot express) is written as float
// 0 / 1, as kernels write every bool.
TEST(Plan, BoolInputsAreReadAsBytes) {
  G b;
  b.value("x", {4, 6}, "input").value("mask", {4, 6}, "input", "bool").value("y", {24}, "input");
  b.node("m", "aten.mul.Tensor", {G::ref("x"), G::ref("mask")}, {4, 6});
  b.node("c", "aten.cumsum.default", {G::ref("m"), 1}, {4, 6});
  b.node("t", "aten.permute.default", {G::ref("mask"), json::array({1, 0})}, {6, 4}).values_dtype("t", "bool");
  b.node("v", "aten.view.default", {G::ref("t"), json::array({24})}, {24}).values_dtype("v", "bool");
  b.node("w", "aten.where.self", {G::ref("v"), G::ref("y"), 0.0}, {24});
  const Plan p = plan_graph(b.build({"c", "w"}));
  ASSERT_EQ(p.groups.size(), 3u);
  const Group& scan = p.groups[0];
  EXPECT_EQ(scan.family, "reduce");
  EXPECT_EQ(scan.nodes, (std::vector<std::string>{"m", "c"}));
  EXPECT_EQ(scan.slots.at(0).layout.base, "mask");
  EXPECT_EQ(scan.slots.at(0).dtype, "bool");
  EXPECT_NE(scan.op_struct.find("kTypedSlots = true;"), std::string::npos) << scan.op_struct;
  EXPECT_NE(scan.op_struct.find("slot_kind(int i) { return i == 0 ? 3 : i == 1 ? 0 : i == 2 ? 0 : -1; }"), std::string::npos)
      << scan.op_struct;
  EXPECT_NE(scan.op_struct.find("(x[1] * x[0])"), std::string::npos) << scan.op_struct;
  EXPECT_EQ(p.groups[1].nodes, (std::vector<std::string>{"t"}));  // the copy, read through the view
  EXPECT_EQ(p.groups[1].outputs.at(0).dtype, "float32");
  EXPECT_NE(p.groups[2].op_struct.find("(x[0] != 0.f ? x[1] : 0.0f)"), std::string::npos) << p.groups[2].op_struct;
}

// A row group reads a bool per row as a byte too (a per-row mask after a reduction), and a bool
// tensor reduced itself (mask.float(), a view of the bytes), but no int64 tensor: an int64
// operand, in memory or computed by an earlier elementwise group, starts an elementwise group
// reading the row group's result.
TEST(Plan, RowGroupsReadBoolButNotInt64) {
  G b;
  b.value("x", {4, 6}, "input").value("keep", {4}, "input", "bool").value("n", {4, 6}, "input", "int64");
  b.value("mask", {4, 6}, "input", "bool");
  b.node("i", "aten.add.Tensor", {G::ref("n"), 1}, {4, 6}).values_dtype("i", "int64");
  b.node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("x"), json::array({1})}, {4});
  b.node("k", "aten.mul.Tensor", {G::ref("s"), G::ref("keep")}, {4});
  b.node("f", "aten._to_copy.default", {G::ref("mask")}, {4, 6}, json{{"dtype", {{"dtype", "float32"}}}});
  b.node("fs", "aten.sum.dim_IntList", std::vector<json>{G::ref("f"), json::array({1})}, {4});
  b.node("c", "aten.cumsum.default", {G::ref("x"), 1}, {4, 6});
  b.node("e", "aten.mul.Tensor", {G::ref("c"), G::ref("i")}, {4, 6});
  b.node("d", "aten.mul.Tensor", {G::ref("c"), G::ref("n")}, {4, 6});
  const Plan p = plan_graph(b.build({"k", "fs", "d", "e"}));
  ASSERT_EQ(p.groups.size(), 3u);
  EXPECT_EQ(p.groups[0].nodes, (std::vector<std::string>{"i"}));
  const Group& rows = p.groups[1];
  EXPECT_EQ(rows.nodes, (std::vector<std::string>{"s", "k", "fs", "c"}));
  EXPECT_EQ(rows.slots.at(1).layout.base, "keep");
  EXPECT_EQ(rows.slots.at(1).dtype, "bool");
  EXPECT_EQ(rows.slots.at(2).layout.base, "mask");
  EXPECT_EQ(rows.slots.at(2).dtype, "bool");
  EXPECT_NE(rows.op_struct.find("(float)reinterpret_cast<const unsigned char*>(p[1])[0]"), std::string::npos) << rows.op_struct;
  const Group& after = p.groups[2];
  EXPECT_EQ(after.family, "elementwise");
  EXPECT_EQ(after.nodes, (std::vector<std::string>{"e", "d"}));
  int int64_slots = 0;
  for (const Slot& sl : after.slots) int64_slots += (sl.layout.base == "i" || sl.layout.base == "n") && sl.dtype == "int64";
  EXPECT_EQ(int64_slots, 2);
}

// Independent chains over as many elements share a kernel only while its tensors fit: a network
// with 20 BatchNorm layers in training mode has 20 counters (num_batches_tracked + 1), six a
// group (each loads one tensor and writes one).
TEST(Plan, IndependentChainsShareAKernelWhileTheyFit) {
  G b;
  std::vector<std::string> outs;
  for (int i = 0; i < 20; ++i) {
    const std::string n = "n" + std::to_string(i), a = "a" + std::to_string(i);
    b.value(n, {}, "buffer", "int64");
    b.node(a, "aten.add.Tensor", {G::ref(n), 1}, {}).values_dtype(a, "int64");
    outs.push_back(a);
  }
  const Plan p = plan_graph(b.build(outs));
  std::vector<size_t> sizes;
  for (const Group& gr : p.groups) {
    sizes.push_back(gr.nodes.size());
    EXPECT_LE((int)gr.slots.size(), kMaxSlots);
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{6, 6, 6, 2}));
}

// A per-row result viewed to another shape of as many elements before it is returned (a VQ-VAE's
// nearest codes, argmin over the flattened pixels, viewed back to the image): stored row by row.
TEST(Plan, ARowResultViewedToAnotherShapeIsStoredRowByRow) {
  G b;
  b.value("d", {6, 5}, "input");
  b.node("i", "aten.argmin.default", std::vector<json>{G::ref("d"), 1}, {6}).values_dtype("i", "int64");
  b.node("v", "aten.view.default", {G::ref("i"), json::array({2, 3})}, {2, 3}).values_dtype("v", "int64");
  const Plan p = plan_graph(b.build({"v"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& g = p.groups[0];
  EXPECT_EQ(g.outputs.at(0).shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g.slots.at(g.out_slot).layout.strides, (std::vector<int64_t>{1, 0}));  // one per row of the [6, 5] domain
}

// A recurrence written out step by step (a Mamba block's selective scan: h = a[:, t] * h + b[:, t],
// y_t = (h * c[:, t]).sum(-1) viewed as [2, 1, 5] for the stack) joins one row group after
// another while each fits: every step loads views of its own, and every y_t (through its view)
// is still to be read. (Capture splits a stack this long into cats that fit; here each y_t is an
// output.)
TEST(Plan, RowGroupsTakeStepsWhileTheirTensorsFit) {
  const int steps = 24;
  G b;
  b.value("a", {2, steps, 5, 3}, "input").value("bu", {2, steps, 5, 3}, "input").value("c", {2, steps, 1, 3}, "input");
  b.value("h0", {2, 5, 3}, "input");
  std::string h = "h0";
  std::vector<std::string> ys;
  for (int t = 0; t < steps; ++t) {
    const std::string i = std::to_string(t);
    b.node("a" + i, "aten.select.int", {G::ref("a"), 1, t}, {2, 5, 3});
    b.node("b" + i, "aten.select.int", {G::ref("bu"), 1, t}, {2, 5, 3});
    b.node("c" + i, "aten.select.int", {G::ref("c"), 1, t}, {2, 1, 3});
    b.node("m" + i, "aten.mul.Tensor", {G::ref("a" + i), G::ref(h)}, {2, 5, 3});
    b.node("h" + std::to_string(t + 1), "aten.add.Tensor", {G::ref("m" + i), G::ref("b" + i)}, {2, 5, 3});
    h = "h" + std::to_string(t + 1);
    b.node("p" + i, "aten.mul.Tensor", {G::ref(h), G::ref("c" + i)}, {2, 5, 3});
    b.node("y" + i, "aten.sum.dim_IntList", {G::ref("p" + i), json::array({-1})}, {2, 5});
    b.node("u" + i, "aten.unsqueeze.default", {G::ref("y" + i), 1}, {2, 1, 5});
    ys.push_back("u" + i);
  }
  const Plan p = plan_graph(b.build(ys));
  int rows = 0;
  for (const Group& gr : p.groups) {
    EXPECT_LE((int)gr.slots.size(), kMaxSlots) << gr.id;
    rows += gr.family == "reduce";
  }
  EXPECT_GT(rows, 1);  // not all 24 steps in one kernel: they need 72 loads and 24 results
}

// split (and chunk, which torch.export writes as split_with_sizes): each part a slice, read
// through its view; a part of a fused value writes the value first.
TEST(Plan, SplitPartsAreSlices) {
  G b;
  b.value("x", {4, 15}, "input");
  b.node("s", "aten.split.Tensor", {G::ref("x"), 6, 1}, {});
  b.node("t", "aten.split_with_sizes.default", {G::ref("x"), json::array({1, 3}), 0}, {});
  for (const char* name : {"s", "t"}) b.values_dtype(name, "float32");
  b.node("q", "getitem", {G::ref("s"), 0}, {4, 6});
  b.node("v", "getitem", {G::ref("s"), 2}, {4, 3});
  b.node("r", "getitem", {G::ref("t"), 1}, {3, 15});
  b.node("y", "aten.mul.Tensor", {G::ref("q"), 2.0}, {4, 6});
  b.node("z", "aten.neg.default", {G::ref("v")}, {4, 3});
  b.node("w", "aten.relu.default", {G::ref("r")}, {3, 15});
  Graph g = b.build({"y", "z", "w"});
  for (const char* name : {"s", "t"}) g.values.at(name).kind = "tuple";
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 3u);
  const Layout& q = p.groups[0].slots.at(0).layout;
  EXPECT_EQ(q.sizes, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(q.strides, (std::vector<int64_t>{15, 1}));
  EXPECT_EQ(q.offset, 0);
  EXPECT_EQ(p.groups[1].slots.at(0).layout.offset, 12);  // the last part: 3 columns from column 12
  EXPECT_EQ(p.groups[1].slots.at(0).layout.sizes, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(p.groups[2].slots.at(0).layout.offset, 15);  // rows 1-3
}

// F.pad with a constant: the input read where the coordinates fall inside it (shifted back by the
// low pads), the constant elsewhere; a negative pad crops.
TEST(Plan, ConstantPadReadsInsideTheInputOnly) {
  G b;
  b.value("x", {3, 4, 5}, "input");
  b.node("p", "aten.constant_pad_nd.default", {G::ref("x"), json::array({1, 2, 0, 3}), 0.5}, {3, 7, 8});
  b.node("c", "aten.constant_pad_nd.default", {G::ref("x"), json::array({-1, 1})}, {3, 4, 5});
  const Plan p = plan_graph(b.build({"p", "c"}));
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_NE(p.groups[0].op_struct.find("const float v0 = ((unsigned long long)(((long long)((unsigned)idx % 8u)) - 1LL) < 5ULL && "
                                       "(unsigned long long)(((long long)(((unsigned)idx / 8u) % 7u)) - 0LL) < 4ULL ? "
                                       "a.ptr[0][((long long)((unsigned)idx / 56u) * 20 + (long long)(((unsigned)idx / 8u) % 7u) * 5 + "
                                       "(long long)((unsigned)idx % 8u)) - 1LL] : 0.5f);"),
            std::string::npos)
      << p.groups[0].op_struct;
  EXPECT_NE(p.groups[1].op_struct.find(" - -1LL] : 0.0f);"), std::string::npos) << p.groups[1].op_struct;
  EXPECT_EQ(p.groups[0].slots.at(0).access, Access::Strided);
}

// torch.export keeps dropout only in training mode with p > 0 (else it is a clone): refused with
// the reason and the way out, not as an op with several outputs.
TEST(Plan, RandomDropoutIsRefusedWithTheWayOut) {
  G b;
  b.value("x", {4, 6}, "input");
  b.node("d", "aten.native_dropout.default", {G::ref("x"), 0.2, true}, {4, 6});
  expect_refusal(b.build({"d"}), "dropout in training mode draws random numbers, which no kernel can match element for "
                                 "element; tune the model in eval mode (self.eval() in its __init__) or with p = 0");
}

// A random tensor made in forward (KernelBench's LSTMs draw h0 with torch.randn there), or one
// like an input: refused as random, with the way out, not as an op no family lowers.
TEST(Plan, RandomNumbersInForwardAreRefusedWithTheWayOut) {
  const std::string why = "forward draws random numbers, which no kernel can match element for element; create the "
                          "tensor in __init__ (a buffer) or take it from get_inputs()";
  G made;
  made.value("x", {2, 3}, "input");
  made.node("h", "aten.randn.default", {json::array({2, 3})}, {2, 3});
  made.node("y", "aten.add.Tensor", {G::ref("x"), G::ref("h")}, {2, 3});
  expect_refusal(made.build({"y"}), why);
  G like;
  like.value("x", {2, 3}, "input");
  like.node("b", "aten.bernoulli.p", {G::ref("x"), 0.5}, {2, 3});
  expect_refusal(like.build({"b"}), why);
}

TEST(Plan, RepeatIsACopyReadingTheTileWithStrideZero) {
  // InstanceNorm's parameters repeated per sample: [6] -> [18], then a second repeat of a
  // [2, 3] over [2, 2] (a leading dimension added, the other repeated), and one over 4 dimensions.
  Graph g = G().value("w", {6}, "parameter").value("m", {2, 3}, "input")
                .node("r", "aten.repeat.default", {G::ref("w"), json::array({3})}, {18})
                .node("q", "aten.repeat.default", {G::ref("m"), json::array({2, 1, 2})}, {2, 2, 6})
                .build({"r", "q"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0].ops, std::vector<std::string>{"copy"});
  EXPECT_EQ(p.groups[0].index_shape, (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(p.groups[0].slots[0].layout.strides, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(p.groups[0].outputs.at(0).shape, std::vector<int64_t>{18});
  // Dimensions: (2 repeats of the added one), (2 rows), (2 repeats, 3 columns).
  EXPECT_EQ(p.groups[1].index_shape, (std::vector<int64_t>{2, 1, 2, 2, 3}));
  EXPECT_EQ(p.groups[1].slots[0].layout.strides, (std::vector<int64_t>{0, 0, 3, 0, 1}));
  EXPECT_EQ(p.groups[1].outputs.at(0).shape, (std::vector<int64_t>{2, 2, 6}));
  // Four repeated dimensions read over eight (more than KernelArgs' six: copies read literals).
  const Plan deep = plan_graph(G().value("t", {2, 3, 2, 3}, "input")
                                   .node("r", "aten.repeat.default", {G::ref("t"), json::array({2, 2, 2, 2})}, {4, 6, 4, 6})
                                   .build({"r"}));
  ASSERT_EQ(deep.groups.size(), 1u);
  EXPECT_EQ(deep.groups[0].index_shape, (std::vector<int64_t>{2, 2, 2, 3, 2, 2, 2, 3}));
}

TEST(Plan, ReductionToAnotherDtypeIsRefused) {
  Graph g = G().value("x", {3, 7}, "input")
                .node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("x"), json::array({1})}, {3},
                      json{{"dtype", {{"dtype", "float64"}}}})
                .build({"s"});
  expect_refusal(g, "only float32 results");
}

// Groups whose kernel an earlier group already is (the same code on tensors of the same shapes and
// strides, at offsets of the same 16-byte alignment) run that group's kernel: a product reusing
// the weight on the last one's output; one reading a slice 16 bytes further. Not a kernel of an
// earlier group: other code (a scale), other strides, an offset of other alignment.
TEST(Plan, GroupsWithAnEarlierGroupsKernelRunIt) {
  G b;
  b.value("x", {8, 32}, "input").value("z", {8, 40}, "input").value("w", {32, 32}, "parameter");
  b.node("p0", "aten.mm.default", {G::ref("x"), G::ref("w")}, {8, 32}).node("y0", "aten.relu.default", {G::ref("p0")}, {8, 32});
  b.node("p1", "aten.mm.default", {G::ref("y0"), G::ref("w")}, {8, 32}).node("y1", "aten.relu.default", {G::ref("p1")}, {8, 32});
  b.node("p2", "aten.mm.default", {G::ref("y1"), G::ref("w")}, {8, 32}).node("y2", "aten.mul.Tensor", {G::ref("p2"), 2.0}, {8, 32});
  const std::vector<std::pair<const char*, int>> slices = {{"a", 0}, {"c", 4}, {"d", 1}};
  std::vector<std::string> outs = {"y2"};
  for (const auto& [name, start] : slices) {
    const std::string s = name, p = s + "p", r = s + "r";
    b.node(s, "aten.slice.Tensor", {G::ref("z"), 1, start, start + 32}, {8, 32});
    b.node(p, "aten.mm.default", {G::ref(s), G::ref("w")}, {8, 32}).node(r, "aten.relu.default", {G::ref(p)}, {8, 32});
    outs.push_back(r);
  }
  const Plan p = plan_graph(b.build(outs));
  ASSERT_EQ(p.groups.size(), 6u);
  std::vector<std::string> same_as;
  for (const Group& gr : p.groups) same_as.push_back(gr.same_as);
  EXPECT_EQ(same_as, (std::vector<std::string>{"", "g0", "", "", "g3", ""}));
  EXPECT_EQ(p.groups[4].slots[0].layout.offset, 4);
  EXPECT_EQ(p.to_json()["groups"][1]["same_as"], "g0");
  EXPECT_FALSE(p.to_json()["groups"][0].contains("same_as"));

  // A cat's code names its coordinate after its value (v3_at): twins all the same, as an RNN's
  // concatenation of each step's input and hidden state.
  G c;
  c.value("x", {4, 6}, "input").value("y", {4, 2}, "input").value("w", {8, 6}, "parameter");
  c.node("c0", "aten.cat.default", {json::array({G::ref("x"), G::ref("y")}), 1}, {4, 8});
  c.node("p", "aten.mm.default", {G::ref("c0"), G::ref("w")}, {4, 6});
  c.node("c1", "aten.cat.default", {json::array({G::ref("p"), G::ref("y")}), 1}, {4, 8});
  const Plan q = plan_graph(c.build({"c1"}));
  ASSERT_EQ(q.groups.size(), 3u);
  EXPECT_EQ(q.groups[2].same_as, "g0");
}


// A constant that a product reads (an RNN's zero initial state times W_hh, when nn.RNN is given
// none) is written by an elementwise group first, then read from memory like any operand.
TEST(Plan, ConstantOperandsOfAProductAreWrittenFirst) {
  Graph g = G().value("w", {4, 5}, "parameter")
                .node("z", "aten.full.default", {json::array({3, 4}), 0.0}, {3, 4})
                .node("y", "aten.mm.default", {G::ref("z"), G::ref("w")}, {3, 5})
                .node("s", "aten.add.Tensor", {G::ref("z"), 1.0}, {3, 4})
                .build({"y", "s"});
  const Plan p = plan_graph(g);
  ASSERT_GE(p.groups.size(), 2u);
  const Group& zeros = p.groups[0];
  EXPECT_EQ(zeros.family, "elementwise");
  EXPECT_EQ(zeros.ops.at(0), "aten.full.default");
  EXPECT_NE(zeros.op_struct.find("= 0.0f;"), std::string::npos) << zeros.op_struct;
  EXPECT_EQ(p.groups[1].family, "gemm");
  EXPECT_EQ(p.groups[1].slots[0].layout.base, "z");
}

// A multi-layer LSTM (fusetune::lstm, which capture makes of nn.LSTM): one recurrent group
// reading x through its strides, h0, c0 and the packed weights, writing its whole output; no
// elementwise op of the same size joins it (the kernel applies none), and what reads its parts
// reads them as views of that output.
TEST(Plan, LstmIsOneRecurrentGroup) {
  const int64_t T = 6, B = 3, I = 7, H = 9, L = 2;
  const int64_t packed = 4 * H * (I + H) + 8 * H + 8 * H * H + 8 * H, out = T * B * H + 2 * L * B * H;
  Graph g = G().value("xb", {B, T, I}, "input").value("h0", {L, B, H}, "input").value("c0", {L, B, H}, "input")
                .value("w", {packed}, "parameter").value("z", {out}, "input")
                .node("x", "aten.transpose.int", {G::ref("xb"), 0, 1}, {T, B, I})
                .node("r", "fusetune.lstm.default", {G::ref("x"), G::ref("h0"), G::ref("c0"), G::ref("w"), L}, {out})
                .node("s", "aten.slice.Tensor", {G::ref("r"), 0, 0, T * B * H}, {T * B * H})
                .node("y", "aten.view.default", {G::ref("s"), {T, B, H}}, {T, B, H})
                .node("y2", "aten.mul.Tensor", {G::ref("y"), 2.0}, {T, B, H})
                .node("z2", "aten.mul.Tensor", {G::ref("z"), 3.0}, {out})
                .build({"y2", "z2"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 3u);
  const Group& gr = p.groups[0];
  EXPECT_EQ(gr.family, "recurrent");
  EXPECT_EQ(gr.ops, (std::vector<std::string>{"fusetune.lstm.default"}));
  EXPECT_EQ(std::make_tuple(gr.m, gr.batch, gr.k, gr.n), std::make_tuple(T, B, I, H));
  ASSERT_EQ(gr.slots.size(), 5u);
  EXPECT_EQ(gr.slots[0].layout.strides, (std::vector<int64_t>{I, T * I, 1}));  // batch first, read as it is
  EXPECT_EQ(gr.slots[4].access, Access::Output);
  EXPECT_EQ(gr.slots[4].layout.sizes, (std::vector<int64_t>{out}));
  EXPECT_EQ(p.groups[1].family, "elementwise");
  EXPECT_EQ(p.groups[2].family, "elementwise");
}

TEST(Plan, LstmFormsTheKernelCannotRunAreRefused) {
  auto lstm = [](std::vector<int64_t> x, std::vector<int64_t> h, int64_t layers, int64_t out, int64_t packed = 4 * 3 * 8 + 24) {
    return G().value("x", x, "input").value("h", h, "input").value("w", {packed}, "parameter")
        .node("r", "fusetune.lstm.default", {G::ref("x"), G::ref("h"), G::ref("h"), G::ref("w"), layers}, {out})
        .build({"r"});
  };
  expect_refusal(lstm({4, 17, 5}, {1, 17, 3}, 1, 4 * 17 * 3 + 2 * 17 * 3), "B <= 16");
  expect_refusal(lstm({4, 2, 5}, {2, 2, 3}, 1, 4 * 2 * 3 + 4 * 2 * 3), "B <= 16");  // h0's layers
  expect_refusal(lstm({4, 5}, {1, 2, 3}, 1, 10), "x must be [T, B, I]");
  expect_refusal(lstm({4, 2, 5}, {1, 2, 3}, 1, 7), "an output other than");
  expect_refusal(lstm({4, 2, 5}, {1, 2, 3}, 1, 4 * 2 * 3 + 2 * 2 * 3, 100), "weights packed other than");
}

}  // namespace
}  // namespace fusetune
