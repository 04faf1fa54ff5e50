// fusetune's command line: parses options and runs the requested stage.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "error.h"
#include "measure.h"
#include "pipeline.h"

int main(int argc, char** argv) {
  using namespace fusetune;
  if (argc >= 2 && std::string(argv[1]) == "_worker") {  // internal: the measuring worker process
    try {
      return run_measure_worker(argc >= 4 ? argv[3] : "");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "worker: %s\n", e.what());
      return 1;
    }
  }
  Options o;
  CLI::App app{"fusetune: tunes custom CUDA kernels for a PyTorch model (KernelBench format) and builds ModelNew.\n"
               "With no subcommand: capture, plan, search, write results/best.json, generate and build the\n"
               "extension and model_new.py, verify and profile."};
  app.fallthrough();
  app.add_option("--model", o.model, "model file with Model, get_inputs, get_init_inputs")->capture_default_str();
  app.add_option("--arch", o.arch, "target GPU architecture (must match the GPU present)")->capture_default_str();
  app.add_option("--out", o.out, "output folder (results/, extension/, model_new.py, .fusetune/)")->capture_default_str();
  app.add_option("--precision", o.precision,
                 "tf32: TF32 allowed for fp32 matrix work; fp32: strict (3xTF32, fp32-accurate, allowed)")
      ->check(CLI::IsMember({"tf32", "fp32"}))->capture_default_str();
  app.add_option("--budget-candidates", o.search.budget_candidates, "candidates per group, a seeded sample (0: all)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--budget-seconds", o.search.budget_seconds, "search time per group (0: no limit)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--workers", o.search.workers, "compiler processes")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seed", o.search.seed, "seed for inputs, parameters and sampling")->capture_default_str();
  app.add_option("--atol", o.search.atol, "absolute tolerance")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--rtol", o.search.rtol, "relative tolerance")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--timeout", o.search.candidate_timeout_s, "seconds a candidate may run before it counts as hung")
      ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--trials", o.trials, "verification trials with fresh inputs")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--templates", o.template_dirs, "extra template folders, searched before templates/");
  app.add_option("--configs", o.configs_dir, "search-space folder (default: configs/)");
  app.add_flag("!--no-verify", o.verify, "skip verification after the build");
  app.add_flag("!--no-profile", o.profile, "skip profiling after the build");
  auto* plan = app.add_subcommand("plan", "capture and plan only; print the kernel groups as JSON");
  auto* compile = app.add_subcommand("compile", "capture, plan and NVRTC-compile every candidate (no GPU needed)");
  auto* search = app.add_subcommand("search", "capture, plan and search; write results/best.json only");
  auto* build = app.add_subcommand("build", "rebuild the extension from an existing results/best.json");
  auto* verify = app.add_subcommand("verify", "check ModelNew against Model");
  auto* profile = app.add_subcommand("profile", "time ModelNew, eager and torch.compile");
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);
  try {
    validate(o);
    if (plan->parsed()) stage_plan(o);
    else if (compile->parsed()) stage_compile(o);
    else if (search->parsed()) stage_search(o);
    else if (build->parsed()) stage_build(o);
    else if (verify->parsed()) stage_verify(o);
    else if (profile->parsed()) stage_profile(o);
    else stage_tune(o);
  } catch (const ReportedError&) {
    return 2;
  } catch (const UserError& e) {
    std::fprintf(stderr, "\nerror: %s\n", e.what());
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "\ninternal error (%s:%d): %s\n%s\n", e.file(), e.line(), e.what(), e.log().c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\ninternal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
