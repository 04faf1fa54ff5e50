// Emission and the extension build on a CPU machine: a real capture of a small model, its
// kernel pairs and model_new.py, then `fusetune build` compiling them against torch's headers.
#include <gtest/gtest.h>
#include <unistd.h>

#include "emit.h"
#include "error.h"
#include "pipeline.h"
#include "results.h"
#include "search.h"
#include "util.h"

namespace fusetune {
namespace {

TEST(Emit, KernelPairsModelNewAndExtensionBuild) {
  char tmpl[] = "/tmp/fusetune_emit_XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  Options o;
  o.model = path_join(dir, "model.py");
  write_file_atomic(o.model, read_file(std::string(FUSETUNE_TEST_DATA) + "/small_linear.py"));
  o.out = dir;
  o.search.workers = 2;
  validate(o);
  const Graph g = capture_model(o);
  const Plan plan = plan_graph(g);
  ASSERT_EQ(plan.groups.size(), 1u);
  // A stale kernel of an earlier model must not survive.
  write_file_atomic(path_join(dir, "extension/kernels/g7.cu"), "// stale\n");
  // The TF32 template here: the fp32 one went through this path on the GPU already.
  emit_extension(g, plan, dir, o.model, {{"g0", KernelChoice{"gemm_tf32", "gemm_tf32.cuh"}}});
  EXPECT_FALSE(file_exists(path_join(dir, "extension/kernels/g7.cu")));
  EXPECT_TRUE(file_exists(path_join(dir, "extension/kernels/g0.cu")));

  const std::string binding = read_file(path_join(dir, "extension/kernels/g0_binding.cpp"));
  EXPECT_NE(binding.find("REGISTER_BINDING(g0, bind)"), std::string::npos);
  EXPECT_NE(binding.find("torch::empty({37, 29}"), std::string::npos);
  EXPECT_NE(binding.find("check_input(x, \"x\", {37, 53})"), std::string::npos);

  const std::string model_new = read_file(path_join(dir, "model_new.py"));
  EXPECT_NE(model_new.find("def __init__(self, in_features, out_features, scale):"), std::string::npos) << model_new;
  EXPECT_NE(model_new.find("def forward(self, x, r):"), std::string::npos);
  EXPECT_NE(model_new.find("cuda_extension.g0(x, self.get_parameter(\"fc.weight\"), r, self.get_parameter(\"fc.bias\"))"),
            std::string::npos)
      << model_new;
  // forward calls nothing but the custom ops.
  const std::string forward = model_new.substr(model_new.find("def forward"));
  EXPECT_EQ(forward.find("torch."), std::string::npos) << forward;

  // A best.json as a search would write it (first config of the space), then a real build.
  SearchContext ctx;
  ctx.configs_dir = path_join(fusetune_home(), "configs");
  ctx.template_dirs = {path_join(fusetune_home(), "templates")};
  ctx.device = {{"name", "none"}};
  const Config c = load_space(ctx, "gemm_tf32").enumerate().front();
  json group = plan.groups[0].to_json();
  group["best"] = {{"name", c.name()}, {"params", c.to_json()}, {"time_ms", {{"median", 1.0}}}};
  group["candidates"] = json::array();
  group["search"] = {{"wall_s", 0.0}};
  std::map<std::string, int64_t> numel;
  for (const auto& [name, v] : g.values) numel[name] = v.numel();
  write_file_atomic(path_join(dir, "results/best.json"), make_best_json(o, g, plan, json::array({group}), ctx, numel).dump());
  ASSERT_NO_THROW(stage_build(o));
  EXPECT_FALSE(list_files(path_join(dir, "extension"), ".so").empty());
  const std::string constants = read_file(path_join(dir, "extension/kernels/tuned_constants.h"));
  EXPECT_NE(constants.find("constexpr int WN = " + std::to_string(c.at("WN")) + ";"), std::string::npos);
  EXPECT_NE(read_file(path_join(dir, "extension/kernels/g0.cu")).find("fusetune::gemm_tf32_kernel<tuned::BM"), std::string::npos);
}

}  // namespace
}  // namespace fusetune
