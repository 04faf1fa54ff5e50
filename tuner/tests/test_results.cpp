// best.json: schema and round trip, the tuned-constants header, and refusal of a best.json
// whose fingerprint does not fit (arch, model file, templates).
#include <gtest/gtest.h>

#include <fstream>

#include "emit.h"
#include "graph_builder.h"
#include "journal.h"
#include "error.h"
#include "pipeline.h"
#include "results.h"
#include "scratch.h"
#include "util.h"

namespace fusetune {
namespace {

struct Fixture {
  std::string dir;
  Options o;
  Graph g;
  Plan plan;
  SearchContext ctx;
  json best;

  Fixture() {
    dir = scratch_dir("results");
    o.model = path_join(dir, "m.py");
    write_file_atomic(o.model, "# model\n");
    o.out = dir;
    o.configs_dir = path_join(fusetune_home(), "configs");
    g = GraphBuilder().value("x", {4, 8}, "input").node("y", "aten.exp.default", {GraphBuilder::ref("x")}, {4, 8})
            .build({"y"}, o.model, sha256_hex("# model\n"));
    plan = plan_graph(g);
    ctx.template_dirs = {path_join(fusetune_home(), "templates")};
    ctx.device = {{"name", "Test GPU"}, {"compute_capability", "9.0"}, {"fp32_peak_tflops", 60.0},
                  {"copy_bandwidth_gbps", 4000.0}};
    json group = plan.groups[0].to_json();
    json fast = {{"name", "elementwise_block256_vec4_ilp1_math0"}, {"params", {{"BLOCK", 256}, {"VEC", 4}, {"ILP", 1}, {"MATH", 0}}},
                 {"status", "ok"}, {"time_ms", {{"median", 0.01}, {"min", 0.009}, {"p20", 0.0095}, {"p80", 0.011}, {"runs", 25}}}};
    json broken = {{"name", "elementwise_block128_vec1_ilp1_math0"}, {"params", {{"BLOCK", 128}, {"VEC", 1}, {"ILP", 1}, {"MATH", 0}}},
                   {"status", "fault"}, {"error", "CUDA_ERROR_ILLEGAL_ADDRESS"}};
    group["candidates"] = {fast, broken};
    group["best"] = {{"name", fast["name"]}, {"params", fast["params"]}, {"time_ms", fast["time_ms"]}};
    group["kernel_family"] = "elementwise";
    group["template"] = "elementwise.cuh";
    group["search"] = {{"space_size", 35}, {"candidates", 2}, {"wall_s", 1.5}};
    best = make_best_json(o, g, plan, {group}, ctx, {{"x", 32}, {"y", 32}});
  }
};

TEST(BestJson, SchemaAndRoundTrip) {
  Fixture f;
  const std::string path = path_join(f.dir, "results/best.json");
  write_file_atomic(path, f.best.dump(1));
  const json back = json::parse(read_file(path));
  EXPECT_EQ(back, f.best);
  EXPECT_EQ(back["schema_version"], kSchemaVersion);
  for (const char* k : {"model", "arch", "gpu", "nvrtc_version", "torch_version", "templates", "configs"})
    EXPECT_TRUE(back["fingerprint"].contains(k)) << k;
  EXPECT_TRUE(back["fingerprint"]["templates"].contains("elementwise.cuh"));
  const json& gr = back["groups"][0];
  for (const char* k : {"id", "family", "ops", "index_shape", "precision", "best", "candidates", "search", "flops", "bytes",
                        "floor_ms", "op_hash"})
    EXPECT_TRUE(gr.contains(k) || std::string(k) == "precision") << k;
  // 256 bytes at 4 TB/s = 64 ps floor; 10 us measured: 0.00064% of roofline.
  EXPECT_NEAR(gr["best"]["roofline_pct"].get<double>(), 0.00064, 1e-9);
  EXPECT_EQ(gr["candidates"][1]["status"], "fault");
  EXPECT_EQ(back["tuning_wall_s"], 1.5);
}

TEST(BestJson, RooflinePeakIsThePrecisions) {
  const json device = {{"fp32_peak_tflops", 60.0}, {"tf32_peak_tflops", 480.0}, {"half_peak_tflops", 960.0}};
  EXPECT_EQ(peak_flops(device, "fp32"), 60e12);
  EXPECT_EQ(peak_flops(device, "tf32"), 480e12);
  EXPECT_EQ(peak_flops(device, "fp16"), 960e12);
  EXPECT_EQ(peak_flops(device, "bf16"), 960e12);
  EXPECT_EQ(peak_flops(json{{"fp32_peak_tflops", 60.0}}, "bf16"), 0.0);  // an older fingerprint: no floor
}

TEST(BestJson, TunedConstantsHeader) {
  Fixture f;
  const std::string h = tuned_constants_header(f.best);
  EXPECT_NE(h.find("namespace g0 {"), std::string::npos);
  EXPECT_NE(h.find("constexpr int BLOCK = 256;"), std::string::npos);
  EXPECT_NE(h.find("constexpr int VEC = 4;"), std::string::npos);
}

TEST(BestJson, MismatchedFingerprintIsRefused) {
  Fixture f;
  EXPECT_NO_THROW(check_fingerprint(f.best, f.o));
  Options other_arch = f.o;
  other_arch.arch = "sm_80";
  EXPECT_THROW(check_fingerprint(f.best, other_arch), UserError);

  write_file_atomic(f.o.model, "# model, edited\n");
  EXPECT_THROW(check_fingerprint(f.best, f.o), UserError);
  write_file_atomic(f.o.model, "# model\n");

  json old_schema = f.best;
  old_schema["schema_version"] = 0;
  EXPECT_THROW(check_fingerprint(old_schema, f.o), UserError);
}

TEST(BestJson, StaleKernelSourcesAreRefused) {
  Fixture f;
  const std::string kdir = path_join(f.dir, "extension/kernels");
  const auto& dirs = f.ctx.template_dirs;
  EXPECT_THROW(check_kernel_sources(f.best, kdir, dirs), UserError);
  emit_extension(f.g, f.plan, f.dir, f.o.model, {{"g0", KernelChoice{"elementwise", "elementwise.cuh"}}});
  EXPECT_NO_THROW(check_kernel_sources(f.best, kdir, dirs));
  json other = f.best;
  other["groups"][0]["op_hash"] = "0123456789abcdef";
  EXPECT_THROW(check_kernel_sources(other, kdir, dirs), UserError);
  // The same plan's winner from another family (a best.json copied over older sources): the
  // sources would not build against its constants.
  json other_family = f.best;
  other_family["groups"][0]["kernel_family"] = "reduce";
  try {
    check_kernel_sources(other_family, kdir, dirs);
    ADD_FAILURE() << "sources of another kernel family were accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("another kernel family than best.json's reduce"), std::string::npos) << e.what();
  }

  // A changed template the kernel includes (here through elementwise.cuh) is refused; a changed
  // or removed template it does not include is not its concern.
  json changed = f.best;
  changed["fingerprint"]["templates"]["fused_math.cuh"] = "0000";
  EXPECT_THROW(check_kernel_sources(changed, kdir, dirs), UserError);
  json unrelated = f.best;
  unrelated["fingerprint"]["templates"]["gemm.cuh"] = "0000";
  unrelated["fingerprint"]["templates"]["retired.cuh"] = "0000";
  EXPECT_NO_THROW(check_kernel_sources(unrelated, kdir, dirs));
}

}  // namespace
}  // namespace fusetune

namespace fusetune {
namespace {

TEST(Journal, ResumesAndIgnoresACutLine) {
  const std::string path = path_join(scratch_dir("journal"), "journal.jsonl");
  {
    Journal j(path);
    EXPECT_EQ(j.find("a"), nullptr);
    j.append("a", json{{"status", "ok"}, {"time_ms", {{"median", 1.5}}}});
    j.append("b", json{{"status", "fault"}});
  }
  {  // an interruption in the middle of a line
    std::FILE* f = std::fopen(path.c_str(), "a");
    std::fputs("{\"key\": \"c\", \"result\": {\"sta", f);
    std::fclose(f);
  }
  const Journal again(path);
  ASSERT_NE(again.find("a"), nullptr);
  EXPECT_EQ((*again.find("a"))["time_ms"]["median"], 1.5);
  EXPECT_EQ((*again.find("b"))["status"], "fault");
  EXPECT_EQ(again.find("c"), nullptr);
}

}  // namespace
}  // namespace fusetune

namespace fusetune {
namespace {

// The committed results/best.json (a real H200 run of model.py) must still fit this checkout:
// a change to a template it recorded, or to model.py, needs a new run, not a silent rebuild.
TEST(BestJson, CommittedResultFitsTheCheckout) {
  const std::string home = fusetune_home();
  const json best = json::parse(read_file(path_join(home, "results/best.json")));
  Options o;
  o.model = path_join(home, "model.py");
  o.arch = best["fingerprint"]["arch"];
  EXPECT_NO_THROW(check_fingerprint(best, o));
  EXPECT_NO_THROW(check_kernel_sources(best, path_join(home, "extension/kernels"), {path_join(home, "templates")}));
  EXPECT_TRUE(best["end_to_end"]["verify"]["ok"].get<bool>());
}

// The profile's table: each baseline's median, the ratio of medians and the per-round ratio; a
// profile from before the per-round ratio shows "-" there.
TEST(Profile, PrintsTheRatioOfMediansAndPerRound) {
  const json best = {{"groups", {{{"id", "g0"}, {"precision", "tf32"}}}}};
  json prof = {{"gpu", "Test GPU"},
               {"timings", {{"eager", {{"median", 2.0}}}, {"compile", {{"median", 1.0}}}, {"compile_tf32", {{"median", 0.5}}},
                            {"fusetune", {{"median", 0.4}}}}},
               {"speedup_per_round", {{"vs_eager", 5.1}, {"vs_compile", 2.6}, {"vs_compile_tf32", 1.3}}}};
  testing::internal::CaptureStdout();
  print_profile(prof, best);
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("torch.compile with TF32 matmul"), std::string::npos) << out;
  EXPECT_NE(out.find("0.5000          1.25x      1.30x"), std::string::npos) << out;
  EXPECT_NE(out.find("(precision: g0 tf32)"), std::string::npos) << out;
  prof.erase("speedup_per_round");
  testing::internal::CaptureStdout();
  print_profile(prof, best);
  out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("2.0000          5.00x          -"), std::string::npos) << out;
}

}  // namespace
}  // namespace fusetune
