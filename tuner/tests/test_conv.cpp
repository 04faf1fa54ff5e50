// The cuDNN convolution families on the CPU: planning of every convolution form (the group's
// arguments, its bias as a per-channel slot, the chain after it), what is refused, the FLOPs,
// what the worker and the extension are told, and the epilogue pass compiling for sm_90.
#include <gtest/gtest.h>

#include <set>

#include "compile.h"
#include "cudnn_conv.h"
#include "error.h"
#include "families.h"
#include "graph_builder.h"
#include "pipeline.h"
#include "plan.h"
#include "scratch.h"
#include "search.h"
#include "util.h"

namespace fusetune {
namespace {

using G = GraphBuilder;

// conv(x, w[, bias]) with torch's arguments, then the chain of unary ops in `chain`.
Graph conv_graph(std::vector<int64_t> x, std::vector<int64_t> w, bool bias, std::vector<json> args,
                 std::vector<int64_t> out, const std::vector<std::string>& chain = {}) {
  G b;
  b.value("x", x, "input").value("w", w, "parameter");
  std::vector<json> a = {G::ref("x"), G::ref("w"), bias ? G::ref("bias") : json(nullptr)};
  if (bias) b.value("bias", {out[1]}, "parameter");
  a.insert(a.end(), args.begin(), args.end());
  b.node("conv", "aten.convolution.default", a, out);
  std::string last = "conv";
  for (size_t i = 0; i < chain.size(); ++i) {
    b.node("n" + std::to_string(i), chain[i], {G::ref(last)}, out);
    last = "n" + std::to_string(i);
  }
  return b.build({last});
}

TEST(Conv, StridedDilatedConv1dWithBiasAndChain) {
  const Plan p = plan_graph(conv_graph({3, 6, 37}, {10, 6, 5}, true, {json{2}, json{3}, json{2}, false, json{0}, 1}, {3, 10, 18},
                                       {"aten.relu.default"}));
  ASSERT_EQ(p.groups.size(), 1u);
  const Group& g = p.groups[0];
  EXPECT_EQ(g.family, "conv");
  EXPECT_EQ(g.conv.stride, std::vector<int64_t>{2});
  EXPECT_EQ(g.conv.padding, std::vector<int64_t>{3});
  EXPECT_EQ(g.conv.dilation, std::vector<int64_t>{2});
  EXPECT_FALSE(g.conv.transposed);
  // x, the weight, the bias viewed per output channel, the output.
  ASSERT_EQ(g.slots.size(), 4u);
  EXPECT_EQ(g.slots[2].layout.base, "bias");
  EXPECT_EQ(g.slots[2].layout.strides, (std::vector<int64_t>{0, 1, 0}));
  EXPECT_NE(g.op_struct.find("(x[0] + a.ptr[2][((long long)(((unsigned)idx / 18u) % 10u))])"), std::string::npos) << g.op_struct;
  EXPECT_NE(g.op_struct.find("relu("), std::string::npos) << g.op_struct;
  const Family& f = family_by_name("cudnn_tf32");
  const Config first{"cudnn_tf32", {{"ENGINE", 3}, {"LAYOUT", 0}}}, last{"cudnn_tf32", {{"ENGINE", 3}, {"LAYOUT", 1}}};
  EXPECT_TRUE(f.has_kernel(g, first));  // the pass adds the bias and applies ReLU
  EXPECT_EQ(f.library_call(g, first), json::parse(R"({"cudnn": {"tf32": true, "engine": 3, "layout": 0, "output_slot": -1}})"));
  // Channels-last: the pass reads the [3, 18, 10] product through a tile.
  EXPECT_EQ(f.kernel_instance(g, [](const std::string& p) { return p == "LAYOUT" ? "1" : "0"; }),
            "fusetune::channels_last_epilogue_kernel<10LL, 18LL, 0, fusetune_gen::g0_op>");
  const LaunchDims d = f.launch(g, last);
  EXPECT_EQ(std::vector<unsigned>(d.grid, d.grid + 3), (std::vector<unsigned>{1, 1, 3}));
  EXPECT_EQ(std::vector<unsigned>(d.block, d.block + 3), (std::vector<unsigned>{128, 1, 1}));
  EXPECT_EQ(f.scratch_floats(g), 3 * 10 * 18);
  // 2 x outputs x (input channels x kernel taps)
  EXPECT_DOUBLE_EQ(f.flops(g), 2.0 * (3 * 10 * 18) * (6 * 5));
  // Round trip through the worker's job.
  EXPECT_EQ(Group::from_json(g.to_json()).conv.to_json(), g.conv.to_json());
}

TEST(Conv, BareDepthwiseConv3dWritesItsOutput) {
  const Plan p = plan_graph(conv_graph({2, 8, 5, 7, 9}, {8, 1, 3, 3, 3}, false,
                                       {json{1, 1, 1}, json{1, 1, 1}, json{1, 1, 1}, false, json{0, 0, 0}, 8}, {2, 8, 5, 7, 9}));
  const Group& g = p.groups.at(0);
  EXPECT_EQ(g.conv.groups, 8);
  const Family& f = family_by_name("cudnn_fp32");
  const Config first{"cudnn_fp32", {{"ENGINE", 0}, {"LAYOUT", 0}}}, last{"cudnn_fp32", {{"ENGINE", 0}, {"LAYOUT", 1}}};
  EXPECT_FALSE(f.has_kernel(g, first));
  EXPECT_EQ(f.library_call(g, first)["cudnn"]["output_slot"], 2);
  // Channels-last, the pass transposes the product into the output.
  EXPECT_TRUE(f.has_kernel(g, last));
  EXPECT_EQ(f.library_call(g, last)["cudnn"]["output_slot"], -1);
  EXPECT_EQ(f.scratch_floats(g), 0);
  const std::string launch = f.extension_launch(g, [](const std::string& p) { return "tuned::" + p; });
  EXPECT_NE(launch.find("fusetune::CudnnBaked conv(args, fusetune::ConvSpec{3, false, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}}, 8,"),
            std::string::npos) << launch;
  EXPECT_NE(launch.find("float* product = args.ptr[2];"), std::string::npos) << launch;
  EXPECT_EQ(launch.find("gemm_epilogue_kernel"), std::string::npos) << launch;
  EXPECT_NE(launch.find("if (tuned::LAYOUT == 1) {"), std::string::npos) << launch;
  EXPECT_NE(launch.find("fusetune::ConvDims{2, 8, 315}"), std::string::npos) << launch;
  EXPECT_NE(launch.find("fusetune::channels_last_epilogue_kernel<8LL, 315LL, 0, fusetune_gen::g0_op><<<"), std::string::npos) << launch;
}

TEST(Conv, GroupedDilatedTransposedConv2d) {
  // ConvTranspose2d(6, 9, 3, stride=2, padding=1, output_padding=1, groups=3, dilation=2): the
  // weight is [in, out / groups, kh, kw].
  const Plan p = plan_graph(conv_graph({2, 6, 7, 9}, {6, 3, 3, 3}, true,
                                       {json{2, 2}, json{1, 1}, json{2, 2}, true, json{1, 1}, 3}, {2, 9, 16, 20},
                                       {"aten.tanh.default"}));
  const Group& g = p.groups.at(0);
  EXPECT_TRUE(g.conv.transposed);
  EXPECT_EQ(g.conv.output_padding, (std::vector<int64_t>{1, 1}));
  const Family& f = family_by_name("cudnn_tf32");
  // The forward convolution it transposes: outputs are x's elements, each over (9 / 3) x 3 x 3 taps.
  EXPECT_DOUBLE_EQ(f.flops(g), 2.0 * (2 * 6 * 7 * 9) * (3 * 3 * 3));
  const std::string launch = f.extension_launch(g, [](const std::string& p) { return "tuned::" + p; });
  EXPECT_NE(launch.find("fusetune::ConvSpec{2, true, {2, 2, 0}, {1, 1, 0}, {2, 2, 0}, {1, 1, 0}}, 3,"), std::string::npos) << launch;
  EXPECT_NE(launch.find("float* product = args.ptr[4];"), std::string::npos) << launch;  // the scratch slot
  EXPECT_NE(launch.find("gemm_epilogue_kernel<256, 4, 2, 0, false, fusetune_gen::g0_op>"), std::string::npos) << launch;
}

TEST(Conv, OutputSizesAreTorchs) {
  const long long x[] = {2, 6, 7, 9}, w[] = {6, 3, 3, 3};
  ConvSpec t;
  t.spatial = 2;
  t.transposed = true;
  t.stride[0] = t.stride[1] = 2;
  t.padding[0] = t.padding[1] = 1;
  t.dilation[0] = t.dilation[1] = 2;
  t.output_padding[0] = t.output_padding[1] = 1;
  EXPECT_EQ(conv_output_sizes(t, x, w, 3), (std::vector<long long>{2, 9, 16, 20}));
  const long long x1[] = {3, 6, 37}, w1[] = {10, 6, 5};
  ConvSpec c;
  c.spatial = 1;
  c.stride[0] = 2;
  c.padding[0] = 3;
  c.dilation[0] = 2;
  EXPECT_EQ(conv_output_sizes(c, x1, w1, 1), (std::vector<long long>{3, 10, 18}));
}

TEST(Conv, RefusedFormsSayWhy) {
  // The graph's output shape disagrees with the arguments (a stride of 2 halves the length).
  EXPECT_THROW(plan_graph(conv_graph({3, 6, 37}, {10, 6, 5}, false, {json{2}, json{0}, json{1}, false, json{0}, 1}, {3, 10, 33})),
               UserError);
  // Unbatched input.
  EXPECT_THROW(plan_graph(conv_graph({6, 37}, {10, 6, 5}, false, {json{1}, json{0}, json{1}, false, json{0}, 1}, {10, 33})),
               UserError);
  // Channels that the groups do not divide as the weight says.
  EXPECT_THROW(plan_graph(conv_graph({3, 6, 37}, {10, 4, 5}, false, {json{1}, json{0}, json{1}, false, json{0}, 2}, {3, 10, 33})),
               UserError);
}

TEST(Conv, EpiloguePassCompilesForEveryEngine) {
  const Group g = plan_graph(conv_graph({2, 12, 13, 11}, {9, 4, 3, 4}, true, {json{2, 1}, json{1, 2}, json{1, 1}, false, json{0, 0}, 3},
                                        {2, 9, 7, 12}, {"aten.relu.default"}))
                      .groups.at(0);
  const Compiler c({path_join(fusetune_home(), "templates")}, "sm_90", scratch_dir("conv_pass"));
  SearchContext ctx;
  ctx.configs_dir = path_join(fusetune_home(), "configs");
  std::vector<CompileJob> jobs;
  for (const Family* f : families_for(g, "sm_90")) {
    const SearchSpace space = load_space(ctx, f->name());
    for (const Config& cfg : space.enumerate()) jobs.push_back(candidate_job(g, cfg, space.template_file, "sm_90"));
  }
  ASSERT_EQ(jobs.size(), 96u);  // 24 engine ranks in 2 layouts in each of cudnn_tf32 and cudnn_fp32
  std::set<std::string> kernels;  // the channels-first pass and the channels-last one
  for (const auto& r : c.compile_all(jobs, 2, nullptr)) {
    EXPECT_TRUE(r.ok) << r.name << "\n" << r.log;
    kernels.insert(r.lowered_name);
  }
  EXPECT_EQ(kernels.size(), 2u);
}

}  // namespace
}  // namespace fusetune
