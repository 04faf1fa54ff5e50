// The cuBLASLt families on the CPU: how strided operands map to cuBLASLt's column-major view,
// which forms it refuses, and how much of a group's chain cuBLASLt's own epilogue takes.
#include <gtest/gtest.h>

#include "cublaslt_gemm.h"
#include "families.h"
#include "graph_builder.h"
#include "plan.h"

namespace fusetune {
namespace {

using G = GraphBuilder;

TEST(Cublaslt, StridedViewsMapToColumnMajorOperands) {
  LtMatrix m;
  // Row-major 4 x 6 (element (r, c) at r * 6 + c): column-major 6 x 4, transposed.
  ASSERT_TRUE(lt_matrix(4, 6, 6, 1, m));
  EXPECT_EQ(m.op, CUBLAS_OP_T);
  EXPECT_EQ(m.rows, 6u);
  EXPECT_EQ(m.cols, 4u);
  EXPECT_EQ(m.ld, 6);
  // Column-major 4 x 6 with padding: as is.
  ASSERT_TRUE(lt_matrix(4, 6, 1, 8, m));
  EXPECT_EQ(m.op, CUBLAS_OP_N);
  EXPECT_EQ(m.ld, 8);
  // A column (N = 1) and a row: any stride of the unit dimension fits.
  ASSERT_TRUE(lt_matrix(5, 1, 1, 0, m));
  EXPECT_EQ(m.ld, 5);
  ASSERT_TRUE(lt_matrix(1, 5, 0, 1, m));
  EXPECT_EQ(m.op, CUBLAS_OP_N);
  EXPECT_EQ(m.ld, 1);
  // No unit stride, or a leading dimension shorter than a column: cuBLASLt cannot read it.
  EXPECT_FALSE(lt_matrix(4, 6, 12, 2, m));
  EXPECT_FALSE(lt_matrix(4, 6, 1, 3, m));
}

TEST(Cublaslt, AlignmentIsWhatEveryAddressAllows) {
  alignas(16) float buf[64];
  const LtMatrix m{CUBLAS_OP_N, 4, 4, 4};
  EXPECT_EQ(lt_alignment(buf, buf + 16, buf + 32, m, m, 0, 0), 16);
  EXPECT_EQ(lt_alignment(buf + 2, buf + 16, buf + 32, m, m, 0, 0), 8);
  EXPECT_EQ(lt_alignment(buf, buf + 16, buf + 32, LtMatrix{CUBLAS_OP_N, 4, 4, 5}, m, 0, 0), 4);
  EXPECT_EQ(lt_alignment(buf, buf + 16, buf + 32, m, m, 0, 7), 4);  // batch stride of 7 floats
  // Half operands: rows of 5 halves are 10 bytes apart; a half output's rows of 6, 12 bytes.
  EXPECT_EQ(lt_alignment(buf, buf + 16, buf + 32, m, m, 0, 0, 2), 8);
  EXPECT_EQ(lt_alignment(buf, buf + 16, buf + 32, LtMatrix{CUBLAS_OP_N, 4, 4, 5}, m, 0, 0, 2), 2);
  EXPECT_EQ(lt_alignment(buf, buf + 16, buf + 32, m, m, 0, 0, 2, 12), 4);
}

using Chain = std::vector<std::pair<std::string, std::vector<json>>>;

// The ops of `chain` after addmm ([3, 8]), each taking the one before it and its own arguments; the
// last one's name.
std::string append_chain(G& b, const Chain& chain) {
  std::string last = "addmm";
  for (size_t i = 0; i < chain.size(); ++i) {
    std::vector<json> a = {G::ref(last)};
    a.insert(a.end(), chain[i].second.begin(), chain[i].second.end());
    last = "n" + std::to_string(i);
    b.node(last, chain[i].first, a, {3, 8});
  }
  return last;
}

Group linear_group(const Chain& chain, json alpha = nullptr) {
  G b;
  b.value("w", {8, 5}, "parameter").value("b", {8}, "parameter").value("x", {3, 5}, "input").value("r", {3, 8}, "input");
  b.node("permute", "aten.permute.default", {G::ref("w"), {1, 0}}, {5, 8});
  std::vector<json> args = {G::ref("b"), G::ref("x"), G::ref("permute")};
  if (!alpha.is_null()) {
    args.push_back(1.0);
    args.push_back(alpha);
  }
  b.node("addmm", "aten.addmm.default", args, {3, 8});
  const std::string last = append_chain(b, chain);
  const Plan p = plan_graph(b.build({last}));
  EXPECT_EQ(p.groups.size(), 1u);
  return p.groups.at(0);
}

std::string lt_epilogue(const Group& g) {
  return family_by_name("cublaslt_tf32").library_call(g, Config{"cublaslt_tf32", {{"ALGO", 0}}})["cublaslt"]["epilogue_name"];
}

const Config kAlgo0{"cublaslt_tf32", {{"ALGO", 0}}};

TEST(Cublaslt, EpilogueTakesBiasAndALoneRelu) {
  const Family& lt = family_by_name("cublaslt_tf32");
  const Group linear = linear_group({});
  EXPECT_EQ(linear.bias_slot, 2);
  EXPECT_EQ(lt_epilogue(linear), "CUBLASLT_EPILOGUE_BIAS");
  EXPECT_FALSE(lt.has_kernel(linear, kAlgo0));  // cuBLASLt writes the output

  const Group relu = linear_group({{"aten.relu.default", {}}});
  EXPECT_EQ(lt_epilogue(relu), "CUBLASLT_EPILOGUE_RELU_BIAS");
  EXPECT_FALSE(lt.has_kernel(relu, kAlgo0));

  // The residual needs the epilogue pass; the bias stays in cuBLASLt and the pass skips it.
  const Group residual = linear_group({{"aten.relu.default", {}}, {"aten.add.Tensor", {G::ref("r")}}});
  EXPECT_EQ(lt_epilogue(residual), "CUBLASLT_EPILOGUE_BIAS");
  EXPECT_TRUE(lt.has_kernel(residual, kAlgo0));
  EXPECT_EQ(lt.scratch_floats(residual), 24);
  EXPECT_NE(residual.op_struct.find("(kBiasInProduct ? x[0] : "), std::string::npos) << residual.op_struct;

  // alpha = 2 scales the product, not the bias: the bias is not cuBLASLt's to add.
  const Group scaled = linear_group({}, 2.0);
  EXPECT_EQ(scaled.bias_slot, -1);
  EXPECT_EQ(lt_epilogue(scaled), "CUBLASLT_EPILOGUE_DEFAULT");
  EXPECT_TRUE(lt.has_kernel(scaled, kAlgo0));
}

TEST(Cublaslt, PrecisionPolicy) {
  // --precision fp32 leaves only full-fp32 cuBLASLt; every result says which one ran.
  const Family &tf32 = family_by_name("cublaslt_tf32"), &fp32 = family_by_name("cublaslt_fp32");
  const Config c{"cublaslt_tf32", {{"ALGO", 0}}};
  const Group g = linear_group({});
  EXPECT_TRUE(tf32.allowed(g, c, "tf32"));
  EXPECT_FALSE(tf32.allowed(g, c, "fp32"));
  EXPECT_TRUE(fp32.allowed(g, c, "fp32"));
  EXPECT_TRUE(fp32.allowed(g, c, "tf32"));
  EXPECT_EQ(tf32.precision(g, c), "tf32");
  EXPECT_EQ(fp32.precision(g, c), "fp32");
  EXPECT_EQ(tf32.library_call(g, c)["cublaslt"]["tf32"], true);
  EXPECT_EQ(fp32.library_call(g, c)["cublaslt"]["tf32"], false);
}

const ParamText kNoParams = [](const std::string&) { return std::string(); };

// A Linear of `dtype` tensors as captured: converted to float32, the chain, the result rounded
// back (unless `round` is false: a float32 result).
Group half_linear_group(const std::string& dtype, const Chain& chain, bool round = true) {
  const json to_float = json{{"dtype", {{"dtype", "float32"}}}}, to_half = json{{"dtype", {{"dtype", dtype}}}};
  G b;
  b.value("w", {8, 8}, "parameter", dtype).value("b", {8}, "parameter", dtype).value("x", {3, 8}, "input", dtype);
  b.node("cw", "aten._to_copy.default", {G::ref("w")}, {8, 8}, to_float)
      .node("cb", "aten._to_copy.default", {G::ref("b")}, {8}, to_float)
      .node("cx", "aten._to_copy.default", {G::ref("x")}, {3, 8}, to_float)
      .node("permute", "aten.permute.default", {G::ref("cw"), {1, 0}}, {8, 8})
      .node("addmm", "aten.addmm.default", {G::ref("cb"), G::ref("cx"), G::ref("permute")}, {3, 8});
  const std::string last = append_chain(b, chain);
  if (round) b.node("out", "aten._to_copy.default", {G::ref(last)}, {3, 8}, to_half).values_dtype("out", dtype);
  const Plan p = plan_graph(b.build({round ? "out" : last}));
  EXPECT_EQ(p.groups.size(), 1u);
  return p.groups.at(0);
}

// Half operands: cublaslt_fp32 multiplies them in fp32 sums and writes the product, with their
// bias, in their dtype, as PyTorch's product is: the output where cuBLASLt does the whole group
// (its rounding is the group's last step), else what the pass reads.
TEST(Cublaslt, HalfOperandsInFp32Sums) {
  const Family &tf32 = family_by_name("cublaslt_tf32"), &fp32 = family_by_name("cublaslt_fp32");
  const Config c{"cublaslt_fp32", {{"ALGO", 0}}};
  std::string why;
  const Group relu = half_linear_group("bfloat16", {{"aten.relu.default", {}}});
  EXPECT_EQ(relu.bias_slot, 2);
  EXPECT_FALSE(tf32.supports(relu, why));
  EXPECT_NE(why.find("half operands"), std::string::npos) << why;
  ASSERT_TRUE(fp32.supports(relu, why)) << why;
  EXPECT_TRUE(fp32.allowed(relu, c, "fp32"));
  EXPECT_EQ(fp32.precision(relu, c), "bf16");
  json call = fp32.library_call(relu, c)["cublaslt"];
  EXPECT_EQ(call["epilogue_name"], "CUBLASLT_EPILOGUE_RELU_BIAS");
  EXPECT_EQ(call["bias_slot"], 2);
  EXPECT_EQ(call["output_slot"], relu.out_slot);
  EXPECT_EQ(call["dtype"], "bfloat16");
  EXPECT_FALSE(fp32.has_kernel(relu, c));
  EXPECT_NE(fp32.extension_launch(relu, kNoParams).find(
                "tuned::ALIGNMENT, CUDA_R_16BF);"),
            std::string::npos);

  const Group bare = half_linear_group("float16", {});
  call = fp32.library_call(bare, c)["cublaslt"];
  EXPECT_EQ(call["epilogue_name"], "CUBLASLT_EPILOGUE_BIAS");
  EXPECT_EQ(call["dtype"], "float16");
  EXPECT_FALSE(fp32.has_kernel(bare, c));

  // GELU: the pass reads the bfloat16 product (24 halves in 12 floats of scratch) and rounds its
  // result.
  const Group gelu = half_linear_group("bfloat16", {{"aten.gelu.default", {}}});
  call = fp32.library_call(gelu, c)["cublaslt"];
  EXPECT_EQ(call["epilogue_name"], "CUBLASLT_EPILOGUE_BIAS");
  EXPECT_EQ(call["bias_slot"], 2);
  EXPECT_EQ(call["output_slot"], -1);
  EXPECT_EQ(call["dtype"], "bfloat16");
  EXPECT_TRUE(fp32.has_kernel(gelu, c));
  EXPECT_EQ(fp32.scratch_floats(gelu), 12);
  EXPECT_NE(fp32.kernel_instance(gelu, kNoParams).find(", 0, true, fusetune_gen::g0_op, 2>"), std::string::npos)
      << fp32.kernel_instance(gelu, kNoParams);

  // A float32 result of half operands (`(x @ w.t()).float()`): the product in float16, as
  // PyTorch's, then widened by the pass.
  const Group wide = half_linear_group("float16", {}, false);
  EXPECT_EQ(wide.outputs.at(0).dtype, "float32");
  call = fp32.library_call(wide, c)["cublaslt"];
  EXPECT_EQ(call["dtype"], "float16");
  EXPECT_TRUE(fp32.has_kernel(wide, c));
  EXPECT_NE(fp32.kernel_instance(wide, kNoParams).find("_op, 1>"), std::string::npos);
}

TEST(Cublaslt, RefusesOperandsWithoutAUnitStride) {
  // A strided slice of every other column: neither dimension of A has stride 1.
  Graph g = G().value("a", {6, 10}, "input").value("b", {5, 4}, "input")
                .node("s", "aten.slice.Tensor", std::vector<json>{G::ref("a"), 1, 0, 10, 2}, {6, 5})
                .node("p", "aten.mm.default", {G::ref("s"), G::ref("b")}, {6, 4})
                .build({"p"});
  const Group gr = plan_graph(g).groups.at(0);
  std::string why;
  EXPECT_FALSE(family_by_name("cublaslt_tf32").supports(gr, why));
  EXPECT_NE(why.find("unit stride"), std::string::npos) << why;
  for (const Family* f : families_for(gr, "sm_90")) EXPECT_EQ(f->name().find("cublaslt"), std::string::npos) << f->name();
}

}  // namespace
}  // namespace fusetune
