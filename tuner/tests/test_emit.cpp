// Emission and the extension build on a CPU machine: a real capture of a small model, its
// kernel pairs and model_new.py, then `fusetune build` compiling them against torch's headers.
#include <gtest/gtest.h>
#include <algorithm>
#include <set>

#include "emit.h"
#include "error.h"
#include "families.h"
#include "pipeline.h"
#include "results.h"
#include "scratch.h"
#include "search.h"
#include "util.h"

namespace fusetune {
namespace {

// A best.json as a search would write it, each group's winner the first config of its space,
// with made-up library constants where the worker records some (built, never run).
void write_first_config_best(const Options& o, const Graph& g, const Plan& plan,
                             const std::map<std::string, KernelChoice>& kernels) {
  SearchContext ctx;
  ctx.configs_dir = path_join(fusetune_home(), "configs");
  ctx.template_dirs = {path_join(fusetune_home(), "templates")};
  ctx.device = {{"name", "none"}};
  json groups = json::array();
  for (const Group& gr : plan.groups) {
    const KernelChoice& k = kernels.at(gr.same_as.empty() ? gr.id : gr.same_as);
    const std::vector<Config> space = load_space(ctx, k.family).enumerate();
    const Config c = *std::find_if(space.begin(), space.end(), [&](const Config& c) {
      return family_by_name(k.family).allowed(gr, c, "tf32");
    });
    json group = gr.to_json();
    group["kernel_family"] = k.family;
    group["template"] = k.template_file;
    group["best"] = {{"name", c.name()}, {"params", c.to_json()}, {"time_ms", {{"median", 1.0}}}};
    if (k.family.rfind("cublaslt", 0) == 0) {
      group["best"]["library"] = {{"constants", {{"ALGO_DATA", json::array({"0x1", "0x2", "0x3", "0x4", "0x5", "0x6", "0x7", "0x8"})},
                                                 {"CUBLASLT_VERSION", 130000}, {"ALIGNMENT", 16}}}};
    }
    if (k.family.rfind("cudnn", 0) == 0) {  // engine 7 with two knobs
      group["best"]["library"] = {{"constants", {{"ENGINE_INDEX", 7}, {"KNOBS", json::array({"0x2", "0x3", "0x1", "0xb", "0x0"})},
                                                 {"CUDNN_TUNED_VERSION", 91900}}}};
    }
    group["candidates"] = json::array();
    group["search"] = {{"wall_s", 0.0}};
    groups.push_back(group);
  }
  std::map<std::string, int64_t> numel;
  for (const auto& [name, v] : g.values) numel[name] = v.numel();
  write_file_atomic(path_join(o.out, "results/best.json"), make_best_json(o, g, plan, groups, ctx, numel).dump());
}

// A fresh output folder holding a copy of `model_file` as model.py, captured and planned.
struct Captured {
  Options o;
  Graph g;
  Plan plan;
};

Captured capture_copy(const std::string& model_file) {
  Captured c;
  c.o.out = scratch_dir("emit");
  c.o.model = path_join(c.o.out, "model.py");
  write_file_atomic(c.o.model, read_file(model_file));
  c.o.search.workers = 2;
  validate(c.o);
  c.g = capture_model(c.o);
  c.plan = plan_graph(c.g);
  return c;
}

TEST(Emit, KernelPairsModelNewAndExtensionBuild) {
  const Captured cap = capture_copy(std::string(FUSETUNE_TEST_DATA) + "/small_mixed.py");
  const Options& o = cap.o;
  const Graph& g = cap.g;
  const Plan& plan = cap.plan;
  const std::string dir = o.out;
  ASSERT_EQ(plan.groups.size(), 7u);
  // A stale kernel of an earlier model must not survive.
  write_file_atomic(path_join(dir, "extension/kernels/g7.cu"), "// stale\n");
  // Both cuBLASLt forms (bias inside cuBLASLt, then an epilogue pass; bias and ReLU inside
  // cuBLASLt, writing the output directly), the fp32 template on a bare product, three row
  // kernels (the cluster one with its shared-memory opt-in, the split one with its zeroed
  // workspace).
  const std::map<std::string, KernelChoice> kernels = {{"g0", KernelChoice{"cublaslt_tf32", "cublaslt_gemm.h"}},
                                                       {"g1", KernelChoice{"cublaslt_fp32", "cublaslt_gemm.h"}},
                                                       {"g2", KernelChoice{"gemm", "gemm.cuh"}},
                                                       {"g3", KernelChoice{"reduce_cluster_smem", "reduce.cuh"}},
                                                       {"g4", KernelChoice{"reduce_thread", "reduce.cuh"}},
                                                       {"g5", KernelChoice{"reduce_split", "reduce.cuh"}},
                                                       {"g6", KernelChoice{"elementwise", "elementwise.cuh"}}};
  emit_extension(g, plan, dir, o.model, kernels);
  EXPECT_FALSE(file_exists(path_join(dir, "extension/kernels/g7.cu")));
  EXPECT_TRUE(file_exists(path_join(dir, "extension/kernels/g0.cu")));

  const std::string binding = read_file(path_join(dir, "extension/kernels/g0_binding.cpp"));
  EXPECT_NE(binding.find("REGISTER_BINDING(g0, bind)"), std::string::npos);
  EXPECT_NE(binding.find("torch::empty({37, 29}"), std::string::npos);
  EXPECT_NE(binding.find("check_input(x, \"x\", {37, 53})"), std::string::npos);

  const std::string model_new = read_file(path_join(dir, "model_new.py"));
  EXPECT_NE(model_new.find("def __init__(self, in_features, out_features, scale):"), std::string::npos) << model_new;
  EXPECT_NE(model_new.find("def forward(self, x, r, w):"), std::string::npos);
  EXPECT_NE(model_new.find("cuda_extension.g0(x, self.get_parameter(\"fc.weight\"), r, self.get_parameter(\"fc.bias\"))"),
            std::string::npos)
      << model_new;
  // forward calls nothing but the custom ops.
  const std::string forward = model_new.substr(model_new.find("def forward"));
  EXPECT_EQ(forward.find("torch."), std::string::npos) << forward;

  // The cuBLASLt groups: bias in cuBLASLt and an epilogue pass over a scratch product; bias and
  // ReLU in cuBLASLt writing the output.
  const std::string g0_cu = read_file(path_join(dir, "extension/kernels/g0.cu"));
  EXPECT_NE(g0_cu.find("fusetune::LtBaked lt(args, true, CUBLASLT_EPILOGUE_BIAS, tuned::ALGO_DATA"), std::string::npos) << g0_cu;
  EXPECT_NE(g0_cu.find("fusetune::gemm_epilogue_kernel<256, 4, 2, 0, true, fusetune_gen::g0_op><<<"), std::string::npos) << g0_cu;
  EXPECT_NE(g0_cu.find("(kBiasInProduct ? x[0] : "), std::string::npos) << g0_cu;
  EXPECT_NE(binding.find("torch::Tensor scratch = torch::empty({1073}"), std::string::npos) << binding;
  const std::string g1_cu = read_file(path_join(dir, "extension/kernels/g1.cu"));
  EXPECT_NE(g1_cu.find("fusetune::LtBaked lt(args, false, CUBLASLT_EPILOGUE_RELU_BIAS,"), std::string::npos) << g1_cu;
  EXPECT_EQ(g1_cu.find("gemm_epilogue_kernel"), std::string::npos) << g1_cu;
  EXPECT_EQ(read_file(path_join(dir, "extension/kernels/g1_binding.cpp")).find("scratch"), std::string::npos);

  write_first_config_best(o, g, plan, kernels);
  ASSERT_NO_THROW(stage_build(o));
  EXPECT_FALSE(list_files(path_join(dir, "extension"), ".so").empty());
  EXPECT_NE(read_file(path_join(dir, ".fusetune/fusetune.log")).find(" built cuda_extension in "), std::string::npos);
  const std::string constants = read_file(path_join(dir, "extension/kernels/tuned_constants.h"));
  SearchContext ctx;
  ctx.configs_dir = path_join(fusetune_home(), "configs");
  const Config c = load_space(ctx, "gemm").enumerate().front();
  EXPECT_NE(constants.find("constexpr int TN = " + std::to_string(c.at("TN")) + ";"), std::string::npos);
  EXPECT_NE(constants.find("constexpr unsigned long long ALGO_DATA[8] = {0x1ull, 0x2ull,"), std::string::npos) << constants;
  EXPECT_NE(constants.find("constexpr unsigned long long ALIGNMENT = 16ull;"), std::string::npos) << constants;
  EXPECT_NE(read_file(path_join(dir, "extension/kernels/g2.cu")).find("fusetune::gemm_kernel<tuned::BM"), std::string::npos);
  const std::string g3_cu = read_file(path_join(dir, "extension/kernels/g3.cu"));
  EXPECT_NE(g3_cu.find("static const cudaError_t opt_in = cudaFuncSetAttribute(&fusetune::reduce_cluster_smem_kernel<tuned::CLUSTER, "
                       "tuned::BLOCK, tuned::ILP, tuned::VEC, tuned::MATH, fusetune_gen::g3_op>, "
                       "cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fusetune::reduce_cluster_smem_launch(tuned::CLUSTER, "
                       "tuned::BLOCK, args.numel, args.k, 1).shared_bytes);"),
            std::string::npos) << g3_cu;
  EXPECT_NE(read_file(path_join(dir, "extension/kernels/g4.cu")).find("fusetune::reduce_thread_kernel<tuned::ROWS, tuned::SPLIT, fusetune::thread_cache(tuned::KEEP, tuned::CACHE, "),
            std::string::npos);
  EXPECT_NE(read_file(path_join(dir, "extension/kernels/g5.cu")).find("fusetune::reduce_split_kernel<tuned::BLOCK, tuned::ILP, tuned::VEC, tuned::CHUNKS,"),
            std::string::npos);
  const std::string g5_binding = read_file(path_join(dir, "extension/kernels/g5_binding.cpp"));
  EXPECT_NE(g5_binding.find("cudaMemsetAsync(workspace.data_ptr(), 0, 2052,"), std::string::npos) << g5_binding;
}

// A GEMM group tuned to the TMA wgmma kernel: its launcher (tensor maps, persistent grid) in the
// kernel source, and the whole extension built for sm_90a, which the kernel needs.
TEST(Emit, TmaGemmGroupBuildsForSm90a) {
  const Captured cap = capture_copy(std::string(FUSETUNE_TEST_DATA) + "/linear_residual.py");
  ASSERT_EQ(cap.plan.groups.size(), 1u);
  std::string why;
  ASSERT_TRUE(family_by_name("gemm_tma").supports(cap.plan.groups[0], why)) << why;
  const std::map<std::string, KernelChoice> kernels = {{"g0", KernelChoice{"gemm_tma", "gemm_tma.cuh"}}};
  emit_extension(cap.g, cap.plan, cap.o.out, cap.o.model, kernels);
  const std::string g0_cu = read_file(path_join(cap.o.out, "extension/kernels/g0.cu"));
  EXPECT_NE(g0_cu.find("#define FUSETUNE_TMA_LAUNCH\n#include \"gemm_tma.cuh\"\n#include \"tma_map.h\""), std::string::npos) << g0_cu;
  // The kernel is a template argument of its launcher: its shared-memory opt-in is its own, not
  // that of another group's kernel of the same tile configuration.
  EXPECT_NE(g0_cu.find("fusetune::launch_gemm_tma<&fusetune::gemm_tma_kernel<tuned::BM, tuned::BN, tuned::STAGES, "
                       "tuned::GROUP_M, tuned::PINGPONG, tuned::CLUSTER, fusetune_gen::g0_op>, tuned::BM, tuned::BN, "
                       "tuned::STAGES, tuned::CLUSTER>(args, stream);"),
            std::string::npos) << g0_cu;
  write_first_config_best(cap.o, cap.g, cap.plan, kernels);
  ASSERT_NO_THROW(stage_build(cap.o));
  EXPECT_FALSE(list_files(path_join(cap.o.out, "extension"), ".so").empty());
  EXPECT_NE(read_file(path_join(cap.o.out, ".fusetune/fusetune.log")).find("building cuda_extension for sm_90a"), std::string::npos);
}

// Every convolution form (tests/gpu/models/conv_forms.py): cuDNN writing the output itself or a
// scratch product that the epilogue pass reads, built against cuDNN's and torch's headers.
TEST(Emit, ConvolutionGroupsBuild) {
  const Captured cap = capture_copy(path_join(fusetune_home(), "tests/gpu/models/conv_forms.py"));
  const Options& o = cap.o;
  const Graph& g = cap.g;
  const Plan& plan = cap.plan;
  const std::string dir = o.out;
  ASSERT_EQ(plan.groups.size(), 6u);
  std::map<std::string, KernelChoice> kernels;
  for (const Group& gr : plan.groups) kernels[gr.id] = KernelChoice{gr.id == "g2" ? "cudnn_fp32" : "cudnn_tf32", "cudnn_conv.h"};
  emit_extension(g, plan, dir, o.model, kernels);
  const std::string g1_cu = read_file(path_join(dir, "extension/kernels/g1.cu"));
  EXPECT_NE(g1_cu.find("fusetune::CudnnBaked conv(args, fusetune::ConvSpec{2, false, {2, 1, 0}, {1, 2, 0}, {1, 1, 0}, {0, 0, 0}}, 3,"),
            std::string::npos) << g1_cu;
  EXPECT_NE(g1_cu.find("gemm_epilogue_kernel<256, 4, 2, 0, false, fusetune_gen::g1_op><<<"), std::string::npos) << g1_cu;
  const std::string g2_cu = read_file(path_join(dir, "extension/kernels/g2.cu"));  // the bare depthwise convolution
  EXPECT_EQ(g2_cu.find("gemm_epilogue_kernel<"), std::string::npos) << g2_cu;
  EXPECT_EQ(read_file(path_join(dir, "extension/kernels/g2_binding.cpp")).find("scratch"), std::string::npos);
  const std::string model_new = read_file(path_join(dir, "model_new.py"));
  const std::string forward = model_new.substr(model_new.find("def forward"));
  EXPECT_EQ(forward.find("torch."), std::string::npos) << forward;

  write_first_config_best(o, g, plan, kernels);
  ASSERT_NO_THROW(stage_build(o));
  EXPECT_FALSE(list_files(path_join(dir, "extension"), ".so").empty());
  const std::string constants = read_file(path_join(dir, "extension/kernels/tuned_constants.h"));
  EXPECT_NE(constants.find("constexpr unsigned long long KNOBS[5] = {0x2ull, 0x3ull, 0x1ull, 0xbull, 0x0ull};"), std::string::npos)
      << constants;
}

// Every attention form (tests/gpu/models/attention_forms.py): the fused kernel with its launch
// geometry's header, and the masked form written out into products and a softmax.
TEST(Emit, AttentionGroupsBuild) {
  const Captured cap = capture_copy(path_join(fusetune_home(), "tests/gpu/models/attention_forms.py"));
  std::map<std::string, KernelChoice> kernels;
  int fused = 0;
  for (const Group& gr : cap.plan.groups) {
    const std::map<std::string, KernelChoice> by_family = {{"attention", {"attention", "attention.cuh"}},
                                                           {"gemm", {"gemm", "gemm.cuh"}},
                                                           {"reduce", {"reduce", "reduce.cuh"}}};
    kernels[gr.id] = by_family.at(gr.family);
    fused += gr.family == "attention";
  }
  EXPECT_EQ(fused, 7);  // five forms and two of grouped heads
  emit_extension(cap.g, cap.plan, cap.o.out, cap.o.model, kernels);
  const std::string g0_cu = read_file(path_join(cap.o.out, "extension/kernels/g0.cu"));
  EXPECT_NE(g0_cu.find("#include \"attention.cuh\"\n#include \"attention_launch.h\""), std::string::npos) << g0_cu;
  // Dynamic shared memory: opted in to once, then launched.
  const std::string kernel = "fusetune::attention_kernel<tuned::WARPS, tuned::BN, 64, tuned::STAGES, tuned::SPLIT, true, "
                             "0x3e38aa3bu, 0, fusetune_gen::g0_op>";
  EXPECT_NE(g0_cu.find("cudaFuncSetAttribute(&" + kernel + ", cudaFuncAttributeMaxDynamicSharedMemorySize"), std::string::npos)
      << g0_cu;
  EXPECT_NE(g0_cu.find(kernel + "<<<"), std::string::npos) << g0_cu;
  write_first_config_best(cap.o, cap.g, cap.plan, kernels);
  ASSERT_NO_THROW(stage_build(cap.o));
  EXPECT_FALSE(list_files(path_join(cap.o.out, "extension"), ".so").empty());
}

// An LSTM: a recurrent group launched cooperatively, with its workspace kept per device; the
// packed weights' cat and the zero state are elementwise groups.
TEST(Emit, RecurrentGroupBuilds) {
  const Captured cap = capture_copy(std::string(FUSETUNE_TEST_DATA) + "/small_lstm.py");
  std::map<std::string, KernelChoice> kernels;
  std::vector<std::string> recurrent;
  for (const Group& gr : cap.plan.groups) {
    const bool lstm = gr.family == "recurrent";
    kernels[gr.id] = lstm ? KernelChoice{"recurrent", "recurrent.cuh"} : KernelChoice{"elementwise", "elementwise.cuh"};
    if (lstm) recurrent.push_back(gr.id);
  }
  ASSERT_EQ(recurrent.size(), 1u);
  emit_extension(cap.g, cap.plan, cap.o.out, cap.o.model, kernels);
  const std::string cu = read_file(path_join(cap.o.out, "extension/kernels/" + recurrent[0] + ".cu"));
  EXPECT_NE(cu.find("#include \"recurrent.cuh\"\n#include \"recurrent_launch.h\""), std::string::npos) << cu;
  EXPECT_NE(cu.find("cudaLaunchCooperativeKernel((const void*)&fusetune::lstm_kernel<tuned::U, 11, 3, 7, 13, 2>"),
            std::string::npos) << cu;
  const std::string binding = read_file(path_join(cap.o.out, "extension/kernels/" + recurrent[0] + "_binding.cpp"));
  EXPECT_NE(binding.find("workspaces"), std::string::npos) << binding;
  write_first_config_best(cap.o, cap.g, cap.plan, kernels);
  ASSERT_NO_THROW(stage_build(cap.o));
  EXPECT_FALSE(list_files(path_join(cap.o.out, "extension"), ".so").empty());
}

// State that forward updates in place (a running mean kept as a buffer): its group's binding
// stores the new value into the model's buffer after the kernel ran.
TEST(Emit, StateUpdates) {
  const Captured cap = capture_copy(std::string(FUSETUNE_TEST_DATA) + "/small_state.py");
  const Plan& plan = cap.plan;
  ASSERT_EQ(plan.groups.size(), 3u);
  ASSERT_EQ(plan.mutations.size(), 1u);
  const std::map<std::string, KernelChoice> kernels = {{"g0", KernelChoice{"elementwise", "elementwise.cuh"}},
                                                       {"g1", KernelChoice{"reduce", "reduce.cuh"}},
                                                       {"g2", KernelChoice{"elementwise", "elementwise.cuh"}}};
  emit_extension(cap.g, plan, cap.o.out, cap.o.model, kernels);
  const std::string g1 = read_file(path_join(cap.o.out, "extension/kernels/g1_binding.cpp"));
  EXPECT_NE(g1.find("fusetune::check_input(state_running, \"running\", {7});"), std::string::npos) << g1;
  EXPECT_NE(g1.find("cudaMemcpyAsync(state_running.data_ptr(), out0.data_ptr(), 28,"), std::string::npos) << g1;
  const std::string model_new = read_file(path_join(cap.o.out, "model_new.py"));
  EXPECT_NE(model_new.find("cuda_extension.g1(z, mul, self.get_buffer(\"running\"))"), std::string::npos) << model_new;
}

// A state set to the value it holds is no update; a state set to another one as it is gets a
// copy kernel whose binding stores it.
TEST(Emit, StateSetToAnotherStateIsCopied) {
  const Captured cap = capture_copy(std::string(FUSETUNE_TEST_DATA) + "/small_state_copy.py");
  ASSERT_EQ(cap.plan.mutations.size(), 1u);
  EXPECT_EQ(cap.plan.mutations[0].target, "c0");
  ASSERT_EQ(cap.plan.groups.size(), 3u);
  const Group& copy = cap.plan.groups.back();
  EXPECT_EQ(copy.family, "elementwise");
  EXPECT_EQ(copy.outputs.at(0).value, cap.plan.mutations[0].value);
  EXPECT_EQ(copy.input_values(), (std::vector<std::string>{"b_h0"}));
  std::map<std::string, KernelChoice> kernels;
  for (const Group& gr : cap.plan.groups)
    kernels[gr.id] = gr.family == "gemm" ? KernelChoice{"gemm", "gemm.cuh"} : KernelChoice{"elementwise", "elementwise.cuh"};
  emit_extension(cap.g, cap.plan, cap.o.out, cap.o.model, kernels);
  const std::string binding = read_file(path_join(cap.o.out, "extension/kernels/" + copy.id + "_binding.cpp"));
  EXPECT_NE(binding.find("cudaMemcpyAsync(state_c0.data_ptr(), out0.data_ptr(), 60,"), std::string::npos) << binding;
}

// Plain tensor attributes that forward reassigns (a recurrent model's hidden state, also in a
// submodule) are state: ModelNew makes them non-persistent buffers as capture did, so that .to()
// moves them, the bindings store their new values and state_dict() stays Model's.
TEST(Emit, ReassignedTensorAttributesBecomeBuffers) {
  const Captured cap = capture_copy(std::string(FUSETUNE_TEST_DATA) + "/small_hidden.py");
  EXPECT_EQ(cap.g.state_attributes, (std::vector<std::string>{"hidden", "cell.h", "cell.steps"}));
  ASSERT_EQ(cap.plan.mutations.size(), 4u);
  std::map<std::string, KernelChoice> kernels;
  for (const Group& gr : cap.plan.groups)
    kernels[gr.id] = gr.family == "gemm" ? KernelChoice{"gemm", "gemm.cuh"} : KernelChoice{"elementwise", "elementwise.cuh"};
  emit_extension(cap.g, cap.plan, cap.o.out, cap.o.model, kernels);
  const std::string model_new = read_file(path_join(cap.o.out, "model_new.py"));
  EXPECT_NE(model_new.find("for path in [\"hidden\", \"cell.h\", \"cell.steps\"]:"), std::string::npos) << model_new;
  // The GEMM group stores the new cell.h, cell.total and hidden; another the steps' count.
  EXPECT_NE(model_new.find("self.get_buffer(\"cell.h\"), self.get_buffer(\"cell.total\"), self.get_buffer(\"hidden\"))"),
            std::string::npos) << model_new;
  EXPECT_NE(model_new.find("cuda_extension.g2(self.get_buffer(\"cell.steps\"), self.get_buffer(\"cell.steps\"))"),
            std::string::npos) << model_new;
  // ModelNew's __init__ runs as written (the extension stubbed): the same state_dict as Model's,
  // and the two attributes are buffers.
  const std::string script =
      "import sys, types\n"
      "sys.modules['cuda_extension'] = types.ModuleType('cuda_extension')\n"
      "sys.path.insert(0, sys.argv[1])\n"
      "import model, model_new\n"
      "new, ref = model_new.ModelNew(5), model.Model(5)\n"
      "assert new.state_dict().keys() == ref.state_dict().keys(), (new.state_dict().keys(), ref.state_dict().keys())\n"
      "buffers = dict(new.named_buffers())\n"
      "assert buffers['hidden'].shape == (2, 5) and 'cell.h' in buffers and 'cell.steps' in buffers, buffers.keys()\n"
      "assert 'hidden' not in new.__dict__ and 'h' not in new.cell.__dict__\n";
  EXPECT_EQ(run_process({"python3", "-c", script, cap.o.out}), 0);
}

// Numbers get_inputs() gives are baked into the graph by torch.export: ModelNew's forward takes
// them in their places and refuses other values, as the exported program's guard does. A bool
// mask input reaches its kernel as one byte per element; the extension builds.
TEST(Emit, NumberAndBoolInputsBuild) {
  const Captured cap = capture_copy(std::string(FUSETUNE_TEST_DATA) + "/small_scalar_input.py");
  ASSERT_EQ(cap.plan.groups.size(), 1u);
  EXPECT_NE(cap.plan.groups[0].op_struct.find("const float v0 = (x[0] * 2.5f);\n    const float v1 = (v0 + 3.0f);"),
            std::string::npos)
      << cap.plan.groups[0].op_struct;
  const std::map<std::string, KernelChoice> kernels = {{"g0", KernelChoice{"elementwise", "elementwise.cuh"}}};
  emit_extension(cap.g, cap.plan, cap.o.out, cap.o.model, kernels);
  const std::string model_new = read_file(path_join(cap.o.out, "model_new.py"));
  EXPECT_NE(model_new.find("    def forward(self, x, s, k, mask):\n"
                           "        if s != 2.5:\n"
                           "            raise ValueError(\"ModelNew was tuned for s = 2.5 (get_inputs() of the tuned run); it was "
                           "called with %r. Run fusetune again for this value.\" % (s,))\n"
                           "        if k != 3:\n"),
            std::string::npos)
      << model_new;
  EXPECT_NE(model_new.find("= cuda_extension.g0(x, mask)\n"), std::string::npos) << model_new;
  const std::string binding = read_file(path_join(cap.o.out, "extension/kernels/g0_binding.cpp"));
  EXPECT_NE(binding.find("fusetune::check_input(mask, \"mask\", {5, 7}, torch::kBool);"), std::string::npos) << binding;
  EXPECT_NE(binding.find("reinterpret_cast<float*>(mask.data_ptr<bool>() + 0);"), std::string::npos) << binding;
  write_first_config_best(cap.o, cap.g, cap.plan, kernels);
  ASSERT_NO_THROW(stage_build(cap.o));
  EXPECT_FALSE(list_files(path_join(cap.o.out, "extension"), ".so").empty());
}

// A float16 model: the bindings check and pass float16 tensors as such (at::Half), the TMA GEMM
// reads its float16 operands through float16 tensor maps (k16 wgmma, sm_90a) and its epilogue
// stores the float16 result, an elementwise kernel converts as it loads and stores (half.cuh
// under nvcc), and a plain x @ v reads v MN-major.
TEST(Emit, HalfTensorsBuild) {
  const Captured cap = capture_copy(std::string(FUSETUNE_TEST_DATA) + "/small_half.py");
  std::vector<std::string> families;
  for (const Group& gr : cap.plan.groups) families.push_back(gr.family);
  // The softmax: a row kernel reading float16 x as it is and storing its float16 result (g3).
  ASSERT_EQ(families, (std::vector<std::string>{"gemm", "elementwise", "gemm", "reduce"}));
  const std::map<std::string, KernelChoice> kernels = {{"g0", KernelChoice{"gemm_tma", "gemm_tma.cuh"}},
                                                       {"g1", KernelChoice{"elementwise", "elementwise.cuh"}},
                                                       {"g2", KernelChoice{"gemm_tma", "gemm_tma.cuh"}},
                                                       {"g3", KernelChoice{"reduce", "reduce.cuh"}}};
  emit_extension(cap.g, cap.plan, cap.o.out, cap.o.model, kernels);
  const std::string kdir = path_join(cap.o.out, "extension/kernels");
  const std::string g0 = read_file(path_join(kdir, "g0_binding.cpp")), g1 = read_file(path_join(kdir, "g1_binding.cpp"));
  EXPECT_NE(g0.find("fusetune::check_input(x, \"x\", {8, 16}, torch::kFloat16);"), std::string::npos) << g0;
  EXPECT_NE(g0.find("reinterpret_cast<float*>(x.data_ptr<at::Half>() + 0);"), std::string::npos) << g0;
  EXPECT_NE(g0.find("torch::empty({8, 24}, x.options());"), std::string::npos) << g0;  // float16, as x
  const std::string g0_cu = read_file(path_join(kdir, "g0.cu"));
  EXPECT_NE(g0_cu.find("fusetune_gen::g0_op, 1>, tuned::BM, tuned::BN, tuned::STAGES, tuned::CLUSTER, 1>(args, stream);"),
            std::string::npos)
      << g0_cu;
  EXPECT_NE(g0_cu.find("fusetune::float_to_f16("), std::string::npos) << g0_cu;
  EXPECT_NE(g1.find("torch::empty({8, 16}, x.options());"), std::string::npos) << g1;
  const std::string g2_cu = read_file(path_join(kdir, "g2.cu"));  // v read MN-major: B_MN = 1
  EXPECT_NE(g2_cu.find("fusetune_gen::g2_op, 1, 1>, tuned::BM, tuned::BN, tuned::STAGES, tuned::CLUSTER, 1, 1>(args, stream);"),
            std::string::npos) << g2_cu;
  const std::string g3_cu = read_file(path_join(kdir, "g3.cu")), g3 = read_file(path_join(kdir, "g3_binding.cpp"));
  EXPECT_NE(g3_cu.find("slot_kind(int i) { return i == 0 ? 1 : i == 1 ? 1 : -1; }"), std::string::npos) << g3_cu;
  EXPECT_NE(g3.find("fusetune::check_input(x, \"x\", {8, 16}, torch::kFloat16);"), std::string::npos) << g3;
  EXPECT_NE(g3.find("torch::empty({8, 16}, x.options());"), std::string::npos) << g3;  // float16, as x
  write_first_config_best(cap.o, cap.g, cap.plan, kernels);
  ASSERT_NO_THROW(stage_build(cap.o));
  EXPECT_FALSE(list_files(path_join(cap.o.out, "extension"), ".so").empty());
}

// cuBLASLt on bfloat16 operands: the product with its bias in bfloat16, then the GELU pass that
// reads it and stores bfloat16 (g0); the bias and ReLU in cuBLASLt, which writes the output (g1).
TEST(Emit, HalfCublasLtBuilds) {
  const Captured cap = capture_copy(std::string(FUSETUNE_TEST_DATA) + "/small_half_linear.py");
  ASSERT_EQ(cap.plan.groups.size(), 2u);
  const std::map<std::string, KernelChoice> kernels = {{"g0", KernelChoice{"cublaslt_fp32", "cublaslt_gemm.h"}},
                                                       {"g1", KernelChoice{"cublaslt_fp32", "cublaslt_gemm.h"}}};
  emit_extension(cap.g, cap.plan, cap.o.out, cap.o.model, kernels);
  const std::string kdir = path_join(cap.o.out, "extension/kernels");
  const std::string g0_cu = read_file(path_join(kdir, "g0.cu")), g1_cu = read_file(path_join(kdir, "g1.cu"));
  EXPECT_NE(g0_cu.find("LtBaked lt(args, false, CUBLASLT_EPILOGUE_BIAS, tuned::ALGO_DATA, tuned::CUBLASLT_VERSION, "
                       "tuned::ALIGNMENT, CUDA_R_16BF);"),
            std::string::npos)
      << g0_cu;
  EXPECT_NE(g0_cu.find("lt.run(args, product, args.ptr[2], "), std::string::npos) << g0_cu;
  EXPECT_NE(g0_cu.find("fusetune::gemm_epilogue_kernel<256, 4, 2, 0, true, fusetune_gen::g0_op, 2><<<"), std::string::npos)
      << g0_cu;
  EXPECT_NE(read_file(path_join(kdir, "g0_binding.cpp")).find("torch::Tensor scratch = torch::empty({96}"),
            std::string::npos);
  EXPECT_NE(g1_cu.find("LtBaked lt(args, false, CUBLASLT_EPILOGUE_RELU_BIAS, tuned::ALGO_DATA, tuned::CUBLASLT_VERSION, "
                       "tuned::ALIGNMENT, CUDA_R_16BF);"),
            std::string::npos)
      << g1_cu;
  EXPECT_NE(g1_cu.find("lt.run(args, product, args.ptr[2], "), std::string::npos) << g1_cu;
  EXPECT_EQ(g1_cu.find("gemm_epilogue_kernel"), std::string::npos) << g1_cu;
  write_first_config_best(cap.o, cap.g, cap.plan, kernels);
  ASSERT_NO_THROW(stage_build(cap.o));
  EXPECT_FALSE(list_files(path_join(cap.o.out, "extension"), ".so").empty());
}

// Groups that run an earlier group's kernel (Group::same_as) get no kernel pair of their own:
// model_new.py calls that group's op with their tensors, and, where their slices start elsewhere
// (the time steps), with their offsets, which that op's binding then takes.
TEST(Emit, GroupsRunTheKernelTheyShareBuild) {
  const Captured cap = capture_copy(std::string(FUSETUNE_TEST_DATA) + "/small_twins.py");
  std::vector<std::string> same_as;
  for (const Group& gr : cap.plan.groups) same_as.push_back(gr.same_as);
  ASSERT_EQ(same_as, (std::vector<std::string>{"", "g0", "g0", "", "g3", "g3", "g3", "g3"}));
  const std::map<std::string, KernelChoice> kernels = {{"g0", KernelChoice{"gemm", "gemm.cuh"}},
                                                       {"g3", KernelChoice{"gemm", "gemm.cuh"}}};
  emit_extension(cap.g, cap.plan, cap.o.out, cap.o.model, kernels);
  const std::string kdir = path_join(cap.o.out, "extension/kernels");
  std::vector<std::string> files = list_files(kdir, ".cu");
  for (const auto& f : list_files(kdir, ".cpp")) files.push_back(f);
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"g0.cu", "g0_binding.cpp", "g3.cu", "g3_binding.cpp"}));
  const std::string model_new = read_file(path_join(cap.o.out, "model_new.py"));
  EXPECT_NE(model_new.find("relu_2 = cuda_extension.g0(relu_1, self.get_parameter(\"layers.2.weight\"), "
                           "self.get_parameter(\"layers.2.bias\"))\n"),
            std::string::npos)
      << model_new;
  EXPECT_NE(model_new.find("tanh = cuda_extension.g3(relu_2, self.get_parameter(\"cell.weight\"), "
                           "self.get_parameter(\"cell.bias\"), seq, [0, 0, 0, 0, 0])\n"),
            std::string::npos)
      << model_new;
  EXPECT_NE(model_new.find("tanh_4 = cuda_extension.g3(tanh_3, self.get_parameter(\"cell.weight\"), "
                           "self.get_parameter(\"cell.bias\"), seq, [0, 0, 0, 128, 0])\n"),
            std::string::npos)
      << model_new;
  const std::string g3 = read_file(path_join(kdir, "g3_binding.cpp"));
  EXPECT_NE(g3.find("const torch::Tensor& seq, const std::vector<int64_t>& offsets) {"), std::string::npos) << g3;
  EXPECT_NE(g3.find("args.ptr[3] = seq.data_ptr<float>() + offsets[3];"), std::string::npos) << g3;
  EXPECT_EQ(read_file(path_join(kdir, "g0_binding.cpp")).find("offsets"), std::string::npos);
  write_first_config_best(cap.o, cap.g, cap.plan, kernels);
  ASSERT_NO_THROW(stage_build(cap.o));
  EXPECT_FALSE(list_files(path_join(cap.o.out, "extension"), ".so").empty());
  const std::string constants = read_file(path_join(kdir, "tuned_constants.h"));
  EXPECT_NE(constants.find("namespace g3 {"), std::string::npos);
  EXPECT_EQ(constants.find("namespace g4 {"), std::string::npos) << constants;
}

// BatchNorm in training mode: int64 counters and running statistics that the bindings store into
// the model's buffers after their kernels ran.
TEST(Emit, StateUpdatesAndInt64Build) {
  const Captured cap = capture_copy(path_join(fusetune_home(), "tests/gpu/models/norms_batch_train.py"));
  const Options& o = cap.o;
  const Graph& g = cap.g;
  const Plan& plan = cap.plan;
  const std::string dir = o.out;
  // BatchNorm2d's statistics in two steps (the moments per (n, c), then over n with both running
  // statistics' updates), its output; BatchNorm1d in one row group with its running statistics;
  // both counters in one group.
  ASSERT_EQ(plan.groups.size(), 5u);
  ASSERT_EQ(plan.mutations.size(), 6u);
  std::map<std::string, KernelChoice> kernels;
  std::set<std::string> row_kernels;  // each row group gets a row kernel no group has yet, where it can
  for (const Group& gr : plan.groups) {
    if (gr.family != "reduce") {
      kernels[gr.id] = KernelChoice{"elementwise", "elementwise.cuh"};
      continue;
    }
    const std::vector<const Family*> fams = families_for(gr, "sm_90", nullptr);
    const Family* pick = fams.at(0);
    for (const Family* f : fams)
      if (!row_kernels.count(f->name())) {
        pick = f;
        break;
      }
    kernels[gr.id] = KernelChoice{pick->name(), "reduce.cuh"};
    row_kernels.insert(pick->name());
  }
  EXPECT_EQ(row_kernels, (std::set<std::string>{"reduce", "reduce_thread", "reduce_cluster"}));
  emit_extension(g, plan, dir, o.model, kernels);
  const std::string g0 = read_file(path_join(dir, "extension/kernels/g0_binding.cpp"));
  EXPECT_NE(g0.find("fusetune::check_input(b_bn2_num_batches_tracked, \"b_bn2_num_batches_tracked\", {}, torch::kInt64);"),
            std::string::npos) << g0;
  EXPECT_NE(g0.find("torch::empty({}, b_bn2_num_batches_tracked.options());"), std::string::npos) << g0;
  EXPECT_NE(g0.find("reinterpret_cast<float*>(b_bn2_num_batches_tracked.data_ptr<int64_t>() + 0)"), std::string::npos) << g0;
  EXPECT_NE(g0.find("cudaMemcpyAsync(state_bn2_num_batches_tracked.data_ptr(), out0.data_ptr(), 8,"), std::string::npos) << g0;
  std::string bindings;
  for (const Group& gr : plan.groups) bindings += read_file(path_join(dir, "extension/kernels/" + gr.id + "_binding.cpp"));
  for (const char* state : {"bn2_running_mean", "bn2_running_var", "bn1_running_mean", "bn1_running_var"})
    EXPECT_NE(bindings.find("cudaMemcpyAsync(state_" + std::string(state) + ".data_ptr(),"), std::string::npos) << state;
  const std::string model_new = read_file(path_join(dir, "model_new.py"));
  EXPECT_NE(model_new.find("self.get_buffer(\"bn2.running_mean\")"), std::string::npos) << model_new;
  EXPECT_NE(model_new.find("self.get_buffer(\"bn1.running_var\")"), std::string::npos) << model_new;
  const std::string forward = model_new.substr(model_new.find("def forward"));
  EXPECT_EQ(forward.find("torch."), std::string::npos) << forward;
  write_first_config_best(o, g, plan, kernels);
  ASSERT_NO_THROW(stage_build(o));
  EXPECT_FALSE(list_files(path_join(dir, "extension"), ".so").empty());
}

// The committed extension sources and model_new.py are what the generator writes for the
// committed results/best.json (so that README's claim holds and no hand edit drifts).
TEST(Emit, CommittedSourcesAreTheGeneratorsOutput) {
  const std::string dir = scratch_dir("committed");
  const std::string home = fusetune_home();
  Options o;
  o.model = path_join(dir, "model.py");
  write_file_atomic(o.model, read_file(path_join(home, "model.py")));
  o.out = dir;
  validate(o);
  const Graph g = capture_model(o);
  const Plan plan = plan_graph(g);
  const json best = json::parse(read_file(path_join(home, "results/best.json")));
  std::map<std::string, KernelChoice> kernels;
  for (const json& gr : best.at("groups"))
    kernels[gr.at("id")] = KernelChoice{gr.at("kernel_family").get<std::string>(), gr.at("template").get<std::string>()};
  emit_extension(g, plan, dir, o.model, kernels);
  const std::vector<std::string> sources = list_files(path_join(home, "extension/kernels"), ".cu");
  ASSERT_FALSE(sources.empty());
  for (const std::string& name : sources) {
    const std::string id = name.substr(0, name.size() - 3);
    EXPECT_EQ(read_file(path_join(dir, "extension/kernels/" + name)), read_file(path_join(home, "extension/kernels/" + name)))
        << name;
    EXPECT_EQ(read_file(path_join(dir, "extension/kernels/" + id + "_binding.cpp")),
              read_file(path_join(home, "extension/kernels/" + id + "_binding.cpp")))
        << id;
  }
  EXPECT_EQ(read_file(path_join(dir, "model_new.py")), read_file(path_join(home, "model_new.py")));
}

}  // namespace
// A causal mask is made from factories alone and written for a row kernel: its group has no
// input tensor, so its binding allocates on the current device (no input to take the device and
// dtype from) and model_new.py calls it with no arguments. It used to crash the generator (the
// first input of none).
TEST(Emit, GroupWithoutInputsBuilds) {
  const Captured cap = capture_copy(std::string(FUSETUNE_TEST_DATA) + "/small_causal.py");
  ASSERT_EQ(cap.plan.groups.size(), 2u);
  ASSERT_TRUE(cap.plan.groups[0].input_values().empty());
  const std::map<std::string, KernelChoice> kernels = {{"g0", KernelChoice{"elementwise", "elementwise.cuh"}},
                                                       {"g1", KernelChoice{"reduce", "reduce.cuh"}}};
  emit_extension(cap.g, cap.plan, cap.o.out, cap.o.model, kernels);
  const std::string g0 = read_file(path_join(cap.o.out, "extension/kernels/g0_binding.cpp"));
  EXPECT_NE(g0.find("torch::Tensor g0() {"), std::string::npos) << g0;
  EXPECT_NE(g0.find("torch::empty({40, 40}, torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA, "
                    "c10::cuda::current_device()));"),
            std::string::npos) << g0;
  EXPECT_EQ(g0.find("CUDAGuard guard("), std::string::npos) << g0;
  EXPECT_NE(read_file(path_join(cap.o.out, "model_new.py")).find("cuda_extension.g0()"), std::string::npos);
  write_first_config_best(cap.o, cap.g, cap.plan, kernels);
  ASSERT_NO_THROW(stage_build(cap.o));
  EXPECT_FALSE(list_files(path_join(cap.o.out, "extension"), ".so").empty());
}

}  // namespace fusetune
