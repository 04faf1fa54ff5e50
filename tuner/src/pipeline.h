// The stages of a fusetune run, each callable alone: capture + plan, compile, tune (search and
// write best.json), emit, build, verify, profile.
#pragma once
#include <string>
#include <vector>

#include "graph.h"
#include "search.h"

namespace fusetune {

struct Options {
  std::string model = "model.py";
  std::string arch = "sm_90";
  std::string out = ".";
  std::string precision = "tf32";
  std::vector<std::string> template_dirs;  // searched in order; the project's templates/ last
  std::string configs_dir;
  SearchOptions search;
  int trials = 5;
  bool verify = true;
  bool profile = true;
};

// Checks option values (arch, precision, tolerances, counts); throws UserError.
void validate(Options& o);
// The folder of fusetune's own files (templates/, configs/, tuner/py/, extension/).
std::string fusetune_home();

// Runs the Python capture into <out>/.fusetune and loads the graph.
Graph capture_model(const Options& o);

void stage_plan(const Options& o);     // capture + plan, prints the plan as JSON
void stage_compile(const Options& o);  // capture + plan + NVRTC-compile every candidate (no GPU)
void stage_search(const Options& o);   // capture, plan, search; writes results/best.json only
void stage_tune(const Options& o);     // the whole run
void stage_build(const Options& o);    // rebuild the extension from results/best.json
void stage_verify(const Options& o);
void stage_profile(const Options& o);

}  // namespace fusetune
