// NVRTC compilation for sm_90 of every instance of every template, of every fusable op, the
// compile cache, and compile errors recorded rather than thrown.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "compile.h"
#include "graph_builder.h"
#include "families.h"
#include "ops.h"
#include "pipeline.h"
#include "scratch.h"
#include "search.h"
#include "util.h"

namespace fusetune {
namespace {

std::vector<std::string> templates() { return {path_join(fusetune_home(), "templates")}; }

int workers() { return std::max(2L, ::sysconf(_SC_NPROCESSORS_ONLN)); }

using G = GraphBuilder;

// Every candidate the search of the group may time (under the tf32 policy, which allows all that
// fp32 does) must compile; `names`, if given, gets the candidates' names.
void compile_space(const Group& g, const Compiler& c, std::vector<std::string>* names = nullptr) {
  SearchContext ctx;
  ctx.configs_dir = path_join(fusetune_home(), "configs");
  ctx.arch = "sm_90";  // the compilers below target sm_90 (a family may compile for sm_90a)
  const std::vector<CompileJob> jobs = compile_jobs(g, ctx, "tf32");
  ASSERT_GT(jobs.size(), 0u);
  for (const CompileJob& j : jobs)
    if (names) names->push_back(j.name);
  for (const auto& r : c.compile_all(jobs, workers(), nullptr)) {
    EXPECT_TRUE(r.ok) << r.name << "\n" << r.log;
    EXPECT_FALSE(r.lowered_name.empty()) << r.name;
    EXPECT_TRUE(file_exists(r.cubin_path)) << r.name;
  }
}

TEST(Compile, EveryElementwiseInstance) {
  Graph g = G().value("x", {7, 9}, "input").value("c", {9}, "input")
                .node("y", "aten.tanh.default", {G::ref("x")}, {7, 9})
                .node("z", "aten.add.Tensor", {G::ref("y"), G::ref("c")}, {7, 9})
                .build({"z"});
  compile_space(plan_graph(g).groups.at(0), Compiler(templates(), "sm_90", scratch_dir("ew")));
}

TEST(Compile, EveryElementwiseInstanceWithInt64Values) {
  // An int64 input read by a float op and kept in 64 bits by others (remainder in integers), a
  // float and an int64 output; and a group whose only output is int64 (no float output for the
  // template to store).
  G b;
  b.value("i", {7, 9}, "input", "int64").value("x", {7, 9}, "input").value("n", {}, "buffer", "int64");
  b.node("f", "aten.mul.Tensor", {G::ref("x"), G::ref("i")}, {7, 9});
  b.node("j", "aten.add.Tensor", {G::ref("i"), 3}, {7, 9}).values_dtype("j", "int64");
  b.node("k", "aten.remainder.Scalar", {G::ref("j"), -4}, {7, 9}).values_dtype("k", "int64");
  b.node("r", "aten.fmod.Tensor", {G::ref("f"), G::ref("k")}, {7, 9});
  b.node("m", "aten.add.Tensor", {G::ref("n"), 1}, {}).values_dtype("m", "int64");
  const Plan p = plan_graph(b.build({"r", "k", "m"}));
  ASSERT_EQ(p.groups.size(), 2u);
  for (const Group& gr : p.groups) compile_space(gr, Compiler(templates(), "sm_90", scratch_dir("i64")));
}

TEST(Compile, EveryElementwiseInstanceWithAGather) {
  // A loss's picked log-probability: the target with ignored ones replaced (an int64 where with
  // an int64 constant), the input gathered at it, a float where after it.
  G b;
  b.value("x", {7, 9}, "input").value("t", {7, 1}, "input", "int64");
  b.node("zero", "aten.scalar_tensor.default", {0}, {}, json{{"dtype", {{"dtype", "int64"}}}}).values_dtype("zero", "int64");
  b.node("ok", "aten.ne.Scalar", {G::ref("t"), -100}, {7, 1}).values_dtype("ok", "bool");
  b.node("i", "aten.where.self", {G::ref("ok"), G::ref("t"), G::ref("zero")}, {7, 1}).values_dtype("i", "int64");
  b.node("g", "aten.gather.default", {G::ref("x"), 1, G::ref("i")}, {7, 1});
  b.node("y", "aten.where.self", {G::ref("ok"), G::ref("g"), 0.0}, {7, 1});
  const Plan p = plan_graph(b.build({"y"}));
  ASSERT_EQ(p.groups.size(), 1u);
  compile_space(p.groups[0], Compiler(templates(), "sm_90", scratch_dir("gather")));
}

// Index values, concatenation and padding: an arange mask in a matrix product's epilogue (triu,
// and-ed with a bool constant as scaled_dot_product_attention's causal mask is),
// a float arange broadcast over rows, an int64 arange as a gather's index, an interpolation's
// clamped next index and weight computed from an arange (declared values in the gather and the
// blend), a cat with a constant part, a pad that crops one side.
TEST(Compile, EveryInstanceWithAranges) {
  G b;
  b.value("a", {9, 5}, "input").value("b", {5, 11}, "input").value("x", {7, 9}, "input");
  b.node("mm", "aten.mm.default", {G::ref("a"), G::ref("b")}, {9, 11});
  b.node("cols", "aten.arange.start_step", {0, 11}, {11}).values_dtype("cols", "int64");
  b.node("row", "aten.unsqueeze.default", {G::ref("cols"), -2}, {1, 11}).values_dtype("row", "int64");
  b.node("rows", "aten.arange.start_step", {0, 9}, {9}).values_dtype("rows", "int64");
  b.node("col", "aten.unsqueeze.default", {G::ref("rows"), -1}, {9, 1}).values_dtype("col", "int64");
  b.node("sub", "aten.sub.Tensor", {G::ref("row"), G::ref("col")}, {9, 11}).values_dtype("sub", "int64");
  b.node("ge", "aten.ge.Scalar", {G::ref("sub"), 0}, {9, 11}).values_dtype("ge", "bool");
  b.node("all", "aten.full.default", {json::array({9, 11}), true}, {9, 11}, json{{"dtype", {{"dtype", "bool"}}}})
      .values_dtype("all", "bool");
  b.node("keep", "aten.logical_and.default", {G::ref("ge"), G::ref("all")}, {9, 11}).values_dtype("keep", "bool");
  b.node("triu", "aten.where.self", {G::ref("keep"), G::ref("mm"), 0.0}, {9, 11});
  b.node("pos", "aten.arange.start", {0.5, 9.5}, {9}, json{{"dtype", {{"dtype", "float32"}}}});
  b.node("w", "aten.mul.Tensor", {G::ref("x"), G::ref("pos")}, {7, 9});
  b.node("down", "aten.arange.start_step", {8, -1, -1}, {9}).values_dtype("down", "int64");
  b.node("idx", "aten.expand.default", {G::ref("down"), json::array({7, -1})}, {7, 9}).values_dtype("idx", "int64");
  b.node("rev", "aten.gather.default", {G::ref("x"), 1, G::ref("idx")}, {7, 9});
  b.node("src", "aten.mul.Tensor", {G::ref("pos"), 0.5}, {9});
  b.node("lo", "aten._to_copy.default", {G::ref("src")}, {9}, json{{"dtype", {{"dtype", "int64"}}}}).values_dtype("lo", "int64");
  b.node("next", "aten.add.Tensor", {G::ref("lo"), 1}, {9}).values_dtype("next", "int64");
  b.node("hi", "aten.clamp.default", {G::ref("next"), json(nullptr), 8}, {9}).values_dtype("hi", "int64");
  b.node("ihi", "aten.expand.default", {G::ref("hi"), json::array({7, -1})}, {7, 9}).values_dtype("ihi", "int64");
  b.node("up", "aten.gather.default", {G::ref("x"), 1, G::ref("ihi")}, {7, 9});
  b.node("lof", "aten._to_copy.default", {G::ref("lo")}, {9}, json{{"dtype", {{"dtype", "float32"}}}});
  b.node("wt", "aten.sub.Tensor", {G::ref("src"), G::ref("lof")}, {9});
  b.node("blend", "aten.mul.Tensor", {G::ref("up"), G::ref("wt")}, {7, 9});
  b.node("zero", "aten.full_like.default", {G::ref("x"), 0}, {7, 9});
  b.node("cat", "aten.cat.default", {json::array({G::ref("zero"), G::ref("w"), G::ref("x")}), 1}, {7, 27});
  b.node("pad", "aten.constant_pad_nd.default", {G::ref("x"), json::array({-1, 2, 1, 0}), 0.5}, {8, 10});
  const Plan p = plan_graph(b.build({"triu", "rev", "blend", "cat", "pad"}));
  ASSERT_EQ(p.groups.size(), 4u);  // gemm + mask; w, rev, the interpolation; cat; pad
  for (const Group& gr : p.groups) compile_space(gr, Compiler(templates(), "sm_90", scratch_dir("arange")));
}

// An einsum's broadcast product has seven dimensions: elementwise and row kernels take any rank
// (their offsets are literals); KernelArgs' sizes and strides, which only GEMM and convolution
// kernels read, leave such slots out.
TEST(Compile, EveryInstanceOverSevenDimensions) {
  G b;
  b.value("a", {2, 1, 4, 1, 5, 1, 3}, "input").value("b", {1, 3, 1, 2, 1, 4, 3}, "input");
  b.node("p", "aten.mul.Tensor", {G::ref("a"), G::ref("b")}, {2, 3, 4, 2, 5, 4, 3});
  b.node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("p"), json::array({-1})}, {2, 3, 4, 2, 5, 4});
  b.node("e", "aten.exp.default", {G::ref("p")}, {2, 3, 4, 2, 5, 4, 3});
  const Plan p = plan_graph(b.build({"s", "e"}));
  ASSERT_FALSE(p.groups.empty());
  for (const Group& gr : p.groups) {
    compile_space(gr, Compiler(templates(), "sm_90", scratch_dir("rank7")));
    const KernelArgs a = kernel_args(gr, std::vector<float*>(gr.slots.size(), nullptr));
    for (size_t s = 0; s < gr.slots.size(); ++s)
      EXPECT_EQ(a.size[s][0], gr.slots[s].layout.sizes.size() > (size_t)kMaxRank ? 0 : gr.slots[s].layout.sizes[0]);
  }
  const auto deep = std::find_if(p.groups.begin(), p.groups.end(), [](const Group& gr) {
    return std::any_of(gr.slots.begin(), gr.slots.end(), [](const Slot& s) { return s.layout.sizes.size() > (size_t)kMaxRank; });
  });
  ASSERT_NE(deep, p.groups.end());
  Group gemm = *deep;  // the same slots in a family whose kernels read them: an internal error
  gemm.family = "gemm";
  EXPECT_THROW(kernel_args(gemm, std::vector<float*>(gemm.slots.size(), nullptr)), std::exception);
}

TEST(Compile, EveryGemmInstance) {
  Graph g = G().value("a", {3, 17, 19}, "input").value("b", {3, 19, 23}, "input").value("r", {3, 17, 23}, "input")
                .node("p", "aten.bmm.default", {G::ref("a"), G::ref("b")}, {3, 17, 23})
                .node("q", "aten.add.Tensor", {G::ref("p"), G::ref("r")}, {3, 17, 23})
                .build({"q"});
  const Group gr = plan_graph(g).groups.at(0);
  ASSERT_EQ(gr.family, "gemm");
  compile_space(gr, Compiler(templates(), "sm_90", scratch_dir("gemm")));
}

// Fused attention: heads of 64 under the causal mask with an epilogue, stored with the heads
// merged back (OUT_RANK 4), heads of 128 stored contiguous, every config; the fp32 policy keeps
// the 3xTF32 ones only.
TEST(Compile, EveryAttentionInstance) {
  Graph g = G().value("q", {2, 3, 45, 64}, "input").value("w", {2, 45, 128}, "input")
                .node("a", "aten.scaled_dot_product_attention.default", {G::ref("q"), G::ref("q"), G::ref("q"), nullptr, 0.0, true},
                      {2, 3, 45, 64})
                .node("y", "aten.sigmoid.default", {G::ref("a")}, {2, 3, 45, 64})
                .node("t", "aten.permute.default", {G::ref("y"), {0, 2, 1, 3}}, {2, 45, 3, 64})
                .node("b", "aten.scaled_dot_product_attention.default", {G::ref("w"), G::ref("w"), G::ref("w")}, {2, 45, 128})
                .build({"t", "b"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 2u);
  ASSERT_FALSE(p.groups[0].slots.back().layout.is_contiguous());  // the heads merged back
  const std::string dir = scratch_dir("attention");
  std::vector<std::string> causal, wide;
  compile_space(p.groups[0], Compiler(templates(), "sm_90", dir), &causal);
  compile_space(p.groups[1], Compiler(templates(), "sm_90", dir), &wide);
  EXPECT_EQ(causal.size(), 16u);
  EXPECT_EQ(wide.size(), 16u);
  SearchContext ctx;
  ctx.configs_dir = path_join(fusetune_home(), "configs");
  ctx.arch = "sm_90";
  for (const CompileJob& j : compile_jobs(p.groups[0], ctx, "fp32"))
    EXPECT_NE(j.name.find("_split3"), std::string::npos) << j.name;
}

// nn.Linear's x @ W^T + b with a residual, at sizes that are no tile multiple: both operands are
// K-major with row strides of whole 16 bytes, so the TMA wgmma families compete too, compiled for
// sm_90a: TF32 under the tf32 policy only, 3xTF32 under either.
TEST(Compile, EveryTmaGemmInstance) {
  Graph g = G().value("x", {131, 68}, "input").value("w", {45, 68}, "parameter").value("b", {45}, "parameter")
                .value("r", {131, 45}, "input")
                .node("t", "aten.permute.default", {G::ref("w"), {1, 0}}, {68, 45})
                .node("p", "aten.addmm.default", {G::ref("b"), G::ref("x"), G::ref("t")}, {131, 45})
                .node("q", "aten.add.Tensor", {G::ref("p"), G::ref("r")}, {131, 45})
                .build({"q"});
  const Group gr = plan_graph(g).groups.at(0);
  ASSERT_EQ(gr.family, "gemm");
  const std::string dir = scratch_dir("tma");
  std::vector<std::string> names;
  compile_space(gr, Compiler(templates(), "sm_90", dir), &names);
  const long tma = std::count_if(names.begin(), names.end(), [](const std::string& n) { return n.rfind("gemm_tma_", 0) == 0; });
  EXPECT_EQ(tma, 84);  // configs/gemm_tma.json under its constraints
  const long x3 = std::count_if(names.begin(), names.end(), [](const std::string& n) { return n.rfind("gemm_3xtf32_", 0) == 0; });
  EXPECT_EQ(x3, 16);  // configs/gemm_3xtf32.json under its constraints
  // The cache entry of each TMA instance says it was compiled for sm_90a.
  SearchContext ctx;
  ctx.configs_dir = path_join(fusetune_home(), "configs");
  ctx.arch = "sm_90";
  const Compiler c(templates(), "sm_90", dir);
  for (const CompileJob& j : compile_jobs(gr, ctx, "tf32")) {
    if (j.name.rfind("gemm_tma_", 0) != 0 && j.name.rfind("gemm_3xtf32_", 0) != 0) continue;
    EXPECT_EQ(j.arch, "sm_90a") << j.name;
    const CompileResult r = c.compile(j);
    ASSERT_TRUE(r.cached && r.ok) << j.name;
    const std::string cubin = read_file(r.cubin_path);
    EXPECT_NE(cubin.find("sm_90a"), std::string::npos) << j.name;
  }
  // Under the fp32 policy the TF32 family does not compete; the 3xTF32 one does.
  long x3_fp32 = 0;
  for (const CompileJob& j : compile_jobs(gr, ctx, "fp32")) {
    EXPECT_NE(j.name.rfind("gemm_tma_", 0), 0u) << j.name;
    x3_fp32 += j.name.rfind("gemm_3xtf32_", 0) == 0;
  }
  EXPECT_EQ(x3_fp32, 16);
}

TEST(Compile, EveryReduceInstance) {
  // A sum over the last dimension (a stride-1 run) of an input masked by a bool one (bytes loaded
  // as vectors) with an epilogue reading another input; a minimum over a middle one (strided); a
  // softmax (the online sum, an output per element); a norm over a middle dimension with a
  // per-channel weight and a second pass; a cumsum along the last dimension written flipped (a
  // reversed run) and a cumprod along a middle one with the chain after it reading the mask.
  Graph g = G().value("x", {5, 9, 7}, "input").value("c", {5, 9}, "input").value("w", {9, 1}, "parameter")
                .value("mk", {5, 9, 7}, "input", "bool")
                .node("xm", "aten.mul.Tensor", {G::ref("x"), G::ref("mk")}, {5, 9, 7})
                .node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("xm"), json::array({2})}, {5, 9})
                .node("t", "aten.add.Tensor", {G::ref("s"), G::ref("c")}, {5, 9})
                .node("m", "aten.amin.default", std::vector<json>{G::ref("x"), json::array({1}), true}, {5, 1, 7})
                .node("mx", "aten.amax.default", std::vector<json>{G::ref("c"), json::array({1}), true}, {5, 1})
                .node("d", "aten.sub.Tensor", {G::ref("c"), G::ref("mx")}, {5, 9})
                .node("e", "aten.exp.default", {G::ref("d")}, {5, 9})
                .node("se", "aten.sum.dim_IntList", std::vector<json>{G::ref("e"), json::array({1}), true}, {5, 1})
                .node("sm", "aten.div.Tensor", {G::ref("e"), G::ref("se")}, {5, 9})
                .node("q", "aten.mul.Tensor", {G::ref("x"), G::ref("x")}, {5, 9, 7})
                .node("ms", "aten.mean.dim", std::vector<json>{G::ref("q"), json::array({1}), true}, {5, 1, 7})
                .node("r", "aten.rsqrt.default", {G::ref("ms")}, {5, 1, 7})
                .node("y", "aten.mul.Tensor", {G::ref("x"), G::ref("r")}, {5, 9, 7})
                .node("yw", "aten.mul.Tensor", {G::ref("y"), G::ref("w")}, {5, 9, 7})
                .node("my", "aten.mean.dim", std::vector<json>{G::ref("yw"), json::array({1}), true}, {5, 1, 7})
                .node("z", "aten.sub.Tensor", {G::ref("yw"), G::ref("my")}, {5, 9, 7})
                .node("cs", "aten.cumsum.default", std::vector<json>{G::ref("c"), -1}, {5, 9})
                .node("csr", "aten.flip.default", std::vector<json>{G::ref("cs"), json::array({1})}, {5, 9})
                .node("cp", "aten.cumprod.default", std::vector<json>{G::ref("x"), 1}, {5, 9, 7})
                .node("cy", "aten.mul.Tensor", {G::ref("cp"), G::ref("mk")}, {5, 9, 7})
                .build({"t", "m", "sm", "z", "csr", "cy"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 6u);
  const Compiler c(templates(), "sm_90", scratch_dir("reduce"));
  for (const Group& gr : p.groups) {
    ASSERT_EQ(gr.family, "reduce");
    compile_space(gr, c);
  }
}

TEST(Compile, EveryReduceInstanceOverNeighbouringRows) {
  // A norm over the 40 channels of NCHW-like data with a per-channel weight and the channels'
  // argmax: reduce_thread's RVEC 4 (four rows per thread as one vector) and its KEEP 1 (a
  // thread's whole share of the norm's rows in registers) run here.
  G b;
  b.value("x", {3, 40, 8}, "input").value("w", {40, 1}, "parameter")
      .node("q", "aten.mul.Tensor", {G::ref("x"), G::ref("x")}, {3, 40, 8})
      .node("m", "aten.mean.dim", std::vector<json>{G::ref("q"), json::array({1}), true}, {3, 1, 8})
      .node("y", "aten.mul.Tensor", {G::ref("x"), G::ref("m")}, {3, 40, 8})
      .node("z", "aten.mul.Tensor", {G::ref("y"), G::ref("w")}, {3, 40, 8})
      .node("i", "aten.argmax.default", std::vector<json>{G::ref("x"), 1}, {3, 8})
      .values_dtype("i", "int64");
  const Plan p = plan_graph(b.build({"z", "i"}));
  const Compiler c(templates(), "sm_90", scratch_dir("reduce_rows"));
  int vectors = 0, keeps = 0;
  for (const Group& gr : p.groups) {
    vectors += gr.row_vector == 4;
    std::vector<std::string> names;
    compile_space(gr, c, &names);
    for (const std::string& n : names) keeps += n.find("_keep1_") != std::string::npos;
  }
  EXPECT_GT(vectors, 0);
  EXPECT_GT(keeps, 0);
}

TEST(Compile, EveryReduceInstanceOverCatParts) {
  // Rows of a cat read part by part (Op::in_range, Op::fill): an exclusive cumsum (zeros, then
  // the row without its last element), a softmax over two tensors joined along its rows, and a
  // sum over a middle dimension that two tensors share (rows across an inner dimension, moved
  // as vectors of neighbouring rows).
  G b;
  b.value("x", {5, 9}, "input").value("y", {5, 4}, "input").value("p", {3, 4, 8}, "input").value("q", {3, 5, 8}, "input");
  b.node("z", "aten.full.default", {json::array({5, 1}), 0}, {5, 1})
      .node("c", "aten.cat.default", {json::array({G::ref("z"), G::ref("x")}), 1}, {5, 10})
      .node("sl", "aten.slice.Tensor", {G::ref("c"), 1, 0, -1}, {5, 9})
      .node("cs", "aten.cumsum.default", {G::ref("sl"), 1}, {5, 9})
      .node("xy", "aten.cat.default", {json::array({G::ref("x"), G::ref("y")}), 1}, {5, 13})
      .node("mx", "aten.amax.default", std::vector<json>{G::ref("xy"), json::array({1}), true}, {5, 1})
      .node("d", "aten.sub.Tensor", {G::ref("xy"), G::ref("mx")}, {5, 13})
      .node("e", "aten.exp.default", {G::ref("d")}, {5, 13})
      .node("se", "aten.sum.dim_IntList", std::vector<json>{G::ref("e"), json::array({1}), true}, {5, 1})
      .node("sm", "aten.div.Tensor", {G::ref("e"), G::ref("se")}, {5, 13})
      .node("pq", "aten.cat.default", {json::array({G::ref("p"), G::ref("q")}), 1}, {3, 9, 8})
      .node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("pq"), json::array({1})}, {3, 8});
  const Plan plan = plan_graph(b.build({"cs", "sm", "s"}));
  ASSERT_EQ(plan.groups.size(), 3u);
  const Compiler c(templates(), "sm_90", scratch_dir("reduce_cat"));
  for (const Group& gr : plan.groups) {
    ASSERT_EQ(gr.family, "reduce");
    ASSERT_TRUE(gr.slots[0].range.has_value()) << gr.id;
    compile_space(gr, c);
  }
  EXPECT_EQ(plan.groups[2].row_vector, 4);
}

TEST(Compile, EveryReduceInstanceWithArgs) {
  // argmin over a middle dimension with keepdim; argmax over everything next to a sum.
  G b;
  b.value("x", {5, 9, 7}, "input")
      .node("i", "aten.argmin.default", std::vector<json>{G::ref("x"), 1, true}, {5, 1, 7})
      .values_dtype("i", "int64")
      .node("j", "aten.argmax.default", {G::ref("x")}, {})
      .values_dtype("j", "int64")
      .node("s", "aten.sum.default", {G::ref("x")}, {});
  const Plan p = plan_graph(b.build({"i", "j", "s"}));
  ASSERT_EQ(p.groups.size(), 2u);
  const Compiler c(templates(), "sm_90", scratch_dir("reduce_args"));
  for (const Group& gr : p.groups) compile_space(gr, c);
}

TEST(Compile, EveryReduceInstanceWithHalfOutputs) {
  // Results rounded to half and stored as such by the row kernels: a softmax in bfloat16 per
  // element with its row sum in float16 per row (vectors along a row); a norm over the 40
  // channels of NCHW-like data in bfloat16 (reduce_thread's vectors across rows); a cumsum in
  // float16 (the scans' stores).
  const json to_f16 = json{{"dtype", {{"dtype", "float16"}}}}, to_bf16 = json{{"dtype", {{"dtype", "bfloat16"}}}};
  G b;
  b.value("x", {37, 64}, "input").value("c", {3, 40, 8}, "input");
  b.node("mx", "aten.amax.default", std::vector<json>{G::ref("x"), json::array({1}), true}, {37, 1})
      .node("d", "aten.sub.Tensor", {G::ref("x"), G::ref("mx")}, {37, 64})
      .node("e", "aten.exp.default", {G::ref("d")}, {37, 64})
      .node("se", "aten.sum.dim_IntList", std::vector<json>{G::ref("e"), json::array({1}), true}, {37, 1})
      .node("sm", "aten.div.Tensor", {G::ref("e"), G::ref("se")}, {37, 64})
      .node("smh", "aten._to_copy.default", {G::ref("sm")}, {37, 64}, to_bf16)
      .values_dtype("smh", "bfloat16")
      .node("seh", "aten._to_copy.default", {G::ref("se")}, {37, 1}, to_f16)
      .values_dtype("seh", "float16")
      .node("q", "aten.mul.Tensor", {G::ref("c"), G::ref("c")}, {3, 40, 8})
      .node("m", "aten.mean.dim", std::vector<json>{G::ref("q"), json::array({1}), true}, {3, 1, 8})
      .node("y", "aten.mul.Tensor", {G::ref("c"), G::ref("m")}, {3, 40, 8})
      .node("yh", "aten._to_copy.default", {G::ref("y")}, {3, 40, 8}, to_bf16)
      .values_dtype("yh", "bfloat16")
      .node("cs", "aten.cumsum.default", std::vector<json>{G::ref("x"), -1}, {37, 64})
      .node("csh", "aten._to_copy.default", {G::ref("cs")}, {37, 64}, to_f16)
      .values_dtype("csh", "float16");
  const Plan p = plan_graph(b.build({"smh", "seh", "yh", "csh"}));
  ASSERT_EQ(p.groups.size(), 3u);
  const Compiler c(templates(), "sm_90", scratch_dir("reduce_half"));
  int vectors = 0;
  for (const Group& gr : p.groups) {
    ASSERT_EQ(gr.family, "reduce");
    for (const GroupOutput& o : gr.outputs) EXPECT_NE(o.dtype, "float32") << gr.id << " " << o.value;
    vectors += gr.row_vector == 4;
    compile_space(gr, c);
  }
  EXPECT_GT(vectors, 0);
}

// Every elementwise instance over pooling groups: 2-D max with padding and dilation and the
// chain after it; 3-D average, padding not counted; 1-D average with padding counted over a
// window wider than the template unrolls.
TEST(Compile, EveryPoolInstance) {
  Graph g = G().value("x", {2, 3, 9, 8}, "input").value("y", {2, 3, 5, 6, 7}, "input").value("z", {3, 80}, "input")
                .node("mp", "aten.max_pool2d_with_indices.default",
                      std::vector<json>{G::ref("x"), json::array({3, 3}), json::array({2, 2}), json::array({1, 1}), json::array({2, 1})}, {})
                .value("mp", {}, "tuple")
                .node("v", "getitem", std::vector<json>{G::ref("mp"), 0}, {2, 3, 4, 4})
                .node("r", "aten.relu.default", {G::ref("v")}, {2, 3, 4, 4})
                .node("a3", "aten.avg_pool3d.default",
                      std::vector<json>{G::ref("y"), json::array({2, 2, 2}), json::array({2, 2, 2}), json::array({1, 1, 1}), true, false},
                      {2, 3, 4, 4, 4})
                .node("a1", "aten.avg_pool1d.default", std::vector<json>{G::ref("z"), json::array({67}), json::array({2}), json::array({1})},
                      {3, 8})
                .build({"r", "a3", "a1"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 3u);
  const Compiler c(templates(), "sm_90", scratch_dir("pool"));
  for (const Group& gr : p.groups) {
    ASSERT_EQ(gr.family, "elementwise");
    compile_space(gr, c);
  }
}

// One kernel fusing every op of the table, so that each emitted expression is valid CUDA.
TEST(Compile, EveryFusableOp) {
  G builder;
  builder.value("x", {5, 8}, "input").value("y", {5, 8}, "input");
  std::string acc = "x";
  int i = 0;
  const json x = G::ref("x"), y = G::ref("y");
  for (const std::string& op : supported_elementwise_ops()) {
    std::vector<json> args = {x};
    if (op.find(".Scalar") != std::string::npos && op != "aten.pow.Scalar") args = {x, 1.5};
    else if (op == "aten.pow.Scalar") args = {1.5, x};
    else if (op == "aten.pow.Tensor_Scalar") args = {x, 3.0};
    else if (op == "aten.where.self") args = {x, x, y};
    else if (op == "aten.clamp.default") args = {x, -0.5, nullptr};
    else if (op == "aten.clamp_min.default" || op == "aten.clamp_max.default") args = {x, 0.25};
    else if (op.find(".Tensor") != std::string::npos || op == "aten.maximum.default" || op == "aten.minimum.default" ||
             op == "aten.atan2.default" || (op.rfind("aten.logical_", 0) == 0 && op != "aten.logical_not.default"))
      args = {x, y};
    const std::string v = "v" + std::to_string(i++), s = "s" + std::to_string(i);
    builder.node(v, op, args, {5, 8}, op == "aten.gelu.default" ? json{{"approximate", "tanh"}} : json::object());
    builder.node(s, "aten.add.Tensor", {G::ref(acc), G::ref(v)}, {5, 8});
    acc = s;
  }
  const Plan p = plan_graph(builder.build({acc}));
  ASSERT_EQ(p.groups.size(), 1u);
  Compiler c(templates(), "sm_90", scratch_dir("ops"));
  for (int math : {0, 1}) {
    const Config cfg = Config::from_json("elementwise", json{{"BLOCK", 256}, {"VEC", 4}, {"ILP", 1}, {"MATH", math}});
    const CompileResult r = c.compile(candidate_job(p.groups[0], cfg, "elementwise.cuh", "sm_90"));
    EXPECT_TRUE(r.ok) << r.log << "\n" << p.groups[0].op_struct;
  }
}

TEST(Compile, CheckKernel) {  // the measuring worker's correctness check, one for each output dtype
  const Compiler c(templates(), "sm_90", scratch_dir("check"));
  for (const char* name : {"fusetune_check", "fusetune_check_float16", "fusetune_check_bfloat16"}) {
    const CompileResult r = c.compile(CompileJob{name, "#include \"check.cuh\"\n", name});
    EXPECT_TRUE(r.ok) << r.log;
    EXPECT_EQ(r.lowered_name, name);
  }
}

// A plain bfloat16 bmm, B [batch][k][n] contiguous along n, at sizes that are no tile multiple:
// every TMA GEMM config compiles reading B MN-major (B_MN = 1: transposed 16-bit wgmma B
// tiles), and the fp32 template's converting instances compete.
TEST(Compile, EveryHalfTmaGemmInstanceWithAnMnMajorB) {
  const json to_float = json{{"dtype", {{"dtype", "float32"}}}};
  G b;
  b.value("x", {3, 37, 72}, "input", "bfloat16").value("y", {3, 72, 40}, "input", "bfloat16");
  b.node("cx", "aten._to_copy.default", {G::ref("x")}, {3, 37, 72}, to_float)
      .node("cy", "aten._to_copy.default", {G::ref("y")}, {3, 72, 40}, to_float)
      .node("m", "aten.bmm.default", {G::ref("cx"), G::ref("cy")}, {3, 37, 40});
  const Group gr = plan_graph(b.build({"m"})).groups.at(0);
  ASSERT_TRUE(gemm_tma_b_mn(gr));
  std::vector<std::string> names;
  compile_space(gr, Compiler(templates(), "sm_90", scratch_dir("tma_mn")), &names);
  const long tma = std::count_if(names.begin(), names.end(), [](const std::string& n) { return n.rfind("gemm_tma_", 0) == 0; });
  EXPECT_EQ(tma, 84);
}

// A half-precision model as capture writes it: float16 tensors loaded and converted by
// elementwise steps (the per-column bias in a GEMM's epilogue too, not added by cuBLASLt),
// products of float16 and of bfloat16 operands read as they are (the TMA GEMM's k16 wgmma and
// the fp32 template's converting loads), one whose K (13) the TMA GEMM cannot read converted to
// float32 (the float32 families), a row group over a float32 conversion, results rounded and
// stored as float16 and bfloat16 (in GEMM epilogues too). The first instance of every family
// that can run each group compiles (the Op and operand type are the same in all of a family's
// instances); K = 72 and 48 keep the rows 16-byte aligned for the TMA GEMM.
TEST(Compile, HalfLoadsAndStoresInEveryFamily) {
  const json to_float = json{{"dtype", {{"dtype", "float32"}}}}, to_half = json{{"dtype", {{"dtype", "float16"}}}};
  const json to_bf16 = json{{"dtype", {{"dtype", "bfloat16"}}}};
  G b;
  b.value("x", {37, 72}, "input", "float16").value("w", {45, 72}, "parameter", "float16");
  b.value("bias", {45}, "parameter", "float16").value("y", {37, 45}, "input", "bfloat16");
  b.value("u", {37, 48}, "input", "bfloat16").value("v", {20, 48}, "parameter", "bfloat16");
  b.value("z", {37, 13}, "input", "float16").value("q", {20, 13}, "parameter", "float16");
  b.node("cx", "aten._to_copy.default", {G::ref("x")}, {37, 72}, to_float)
      .node("cw", "aten._to_copy.default", {G::ref("w")}, {45, 72}, to_float)
      .node("cb", "aten._to_copy.default", {G::ref("bias")}, {45}, to_float)
      .node("cy", "aten._to_copy.default", {G::ref("y")}, {37, 45}, to_float)
      .node("t", "aten.permute.default", std::vector<json>{G::ref("cw"), json::array({1, 0})}, {72, 45})
      .node("m", "aten.addmm.default", {G::ref("cb"), G::ref("cx"), G::ref("t")}, {37, 45})
      .node("r", "aten.relu.default", {G::ref("m")}, {37, 45})
      .node("h", "aten._to_copy.default", {G::ref("r")}, {37, 45}, to_half)
      .values_dtype("h", "float16")
      .node("s", "aten.sum.dim_IntList", std::vector<json>{G::ref("cy"), json::array({1})}, {37})
      .node("e", "aten.mul.Tensor", {G::ref("r"), G::ref("cy")}, {37, 45})
      .node("o", "aten._to_copy.default", {G::ref("e")}, {37, 45}, to_bf16)
      .values_dtype("o", "bfloat16")
      .node("cu", "aten._to_copy.default", {G::ref("u")}, {37, 48}, to_float)
      .node("cv", "aten._to_copy.default", {G::ref("v")}, {20, 48}, to_float)
      .node("tv", "aten.permute.default", std::vector<json>{G::ref("cv"), json::array({1, 0})}, {48, 20})
      .node("p", "aten.mm.default", {G::ref("cu"), G::ref("tv")}, {37, 20})
      .node("po", "aten._to_copy.default", {G::ref("p")}, {37, 20}, to_bf16)
      .values_dtype("po", "bfloat16")
      .node("cz", "aten._to_copy.default", {G::ref("z")}, {37, 13}, to_float)
      .node("cq", "aten._to_copy.default", {G::ref("q")}, {20, 13}, to_float)
      .node("tq", "aten.permute.default", std::vector<json>{G::ref("cq"), json::array({1, 0})}, {13, 20})
      .node("pz", "aten.mm.default", {G::ref("cz"), G::ref("tq")}, {37, 20})
      .node("pzo", "aten._to_copy.default", {G::ref("pz")}, {37, 20}, to_half)
      .values_dtype("pzo", "float16");
  const Plan p = plan_graph(b.build({"h", "s", "o", "po", "pzo"}));
  std::set<std::string> families, instances;
  bool half_residual = false;  // y, read by the first product's epilogue as bfloat16 vectors
  for (const Group& gr : p.groups) {
    for (int i = gr.full_slot; i < gr.full_slot + gr.n_full; ++i)
      half_residual |= gr.family == "gemm" && gr.slots[i].layout.base == "y" && gr.slots[i].dtype == "bfloat16";
    SearchContext ctx;
    ctx.configs_dir = path_join(fusetune_home(), "configs");
    ctx.arch = "sm_90";
    std::vector<CompileJob> jobs;
    for (const Family* f : families_for(gr, ctx.arch)) {
      const SearchSpace space = load_space(ctx, f->name());
      for (const Config& c : space.enumerate())
        if (f->allowed(gr, c, "tf32") && f->has_kernel(gr, c)) {
          jobs.push_back(candidate_job(gr, c, space.template_file, ctx.arch));
          families.insert(f->name());
          if (gr.family == "gemm") instances.insert(f->name() + ":" + std::to_string(gemm_operand_type(gr)));
          break;
        }
    }
    for (const auto& r : Compiler(templates(), "sm_90", scratch_dir("half")).compile_all(jobs, workers(), nullptr))
      EXPECT_TRUE(r.ok) << r.name << "\n" << r.log << "\n" << gr.op_struct;
  }
  EXPECT_TRUE(families.count("elementwise") && families.count("reduce")) << testing::PrintToString(families);
  EXPECT_TRUE(half_residual);
  // cuBLASLt's epilogue pass over a float16 product (the bfloat16 product has none: cuBLASLt
  // writes it whole).
  EXPECT_EQ(instances, (std::set<std::string>{"gemm:0", "gemm:1", "gemm:2", "gemm_tma:1", "gemm_tma:2", "cublaslt_tf32:0",
                                              "cublaslt_fp32:0", "cublaslt_fp32:1"}));
}

TEST(Compile, CacheHitsAndErrorsAreRecorded) {
  Compiler c(templates(), "sm_90", scratch_dir("cache"));
  const CompileJob good{"good", "extern \"C\" __global__ void k(float* p) { p[0] = 1.f; }\n", "k"};
  const CompileResult first = c.compile(good);
  ASSERT_TRUE(first.ok) << first.log;
  EXPECT_FALSE(first.cached);
  const CompileResult second = c.compile(good);
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.cubin_path, first.cubin_path);
  const CompileJob bad{"bad", "__global__ void k(float* p) { p[0] = undefined_name; }\n", "k"};
  const auto results = c.compile_all({bad, good}, 2, nullptr);
  EXPECT_FALSE(results[0].ok);
  EXPECT_NE(results[0].log.find("undefined_name"), std::string::npos) << results[0].log;
  EXPECT_TRUE(results[1].ok);
  EXPECT_NE(c.cache_key(good), c.cache_key(bad));
  // The key covers the arch and the template headers.
  EXPECT_NE(Compiler(templates(), "sm_80", scratch_dir("other")).cache_key(good), c.cache_key(good));
}

TEST(Compile, IdenticalJobsCompileOnce) {
  // Two candidates with the same kernel (e.g. one epilogue for every library algorithm): one
  // compile, both results, each under its own name.
  const std::string cache = scratch_dir("same");
  Compiler c(templates(), "sm_90", cache);
  const std::string src = "extern \"C\" __global__ void k(float* p) { p[0] = 2.f; }\n";
  int reported = 0;
  const auto results = c.compile_all({{"a", src, "k"}, {"b", src, "k"}}, 2, [&](const CompileResult&) { ++reported; });
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(reported, 2);
  EXPECT_TRUE(results[0].ok && results[1].ok);
  EXPECT_EQ(results[0].name, "a");
  EXPECT_EQ(results[1].name, "b");
  EXPECT_EQ(results[0].cubin_path, results[1].cubin_path);
  EXPECT_EQ(list_files(cache, ".cubin").size(), 1u);
}

// The persistent LSTM kernel: every config, for a two-layer LSTM of irregular sizes (batch 3,
// hidden units that no U divides) read batch first.
TEST(Compile, EveryRecurrentInstance) {
  const int64_t T = 5, B = 3, I = 7, H = 37, L = 2;
  const int64_t packed = 4 * H * (I + H) + 8 * H + 8 * H * H + 8 * H, out = T * B * H + 2 * L * B * H;
  Graph g = G().value("xb", {B, T, I}, "input").value("h0", {L, B, H}, "input").value("w", {packed}, "parameter")
                .node("x", "aten.transpose.int", {G::ref("xb"), 0, 1}, {T, B, I})
                .node("r", "fusetune.lstm.default", {G::ref("x"), G::ref("h0"), G::ref("h0"), G::ref("w"), L}, {out})
                .build({"r"});
  const Plan p = plan_graph(g);
  ASSERT_EQ(p.groups.size(), 1u);
  std::vector<std::string> names;
  compile_space(p.groups[0], Compiler(templates(), "sm_90", scratch_dir("recurrent")), &names);
  EXPECT_EQ(names.size(), 6u);
}

}  // namespace
}  // namespace fusetune
