// The family registry and the one place that turns a group's slots into kernel arguments.
#include "families.h"

#include "error.h"

namespace fusetune {

const Family& elementwise_family();
const Family& gemm_family();
const Family& gemm_tma_family();
const Family& gemm_3xtf32_family();
const Family& reduce_family();
const Family& reduce_thread_family();
const Family& reduce_split_family();
const Family& reduce_cluster_family();
const Family& reduce_cluster_smem_family();
const Family& reduce_tile_family();
const Family& cublaslt_tf32_family();
const Family& cublaslt_fp32_family();
const Family& cudnn_tf32_family();
const Family& cudnn_fp32_family();
const Family& attention_family();
const Family& recurrent_family();

std::vector<const Family*> all_families() {
  return {&elementwise_family(),    &gemm_family(),           &gemm_tma_family(),      &gemm_3xtf32_family(),
          &cublaslt_tf32_family(),  &cublaslt_fp32_family(),  &reduce_family(),        &reduce_thread_family(),
          &reduce_split_family(),   &reduce_cluster_family(), &reduce_cluster_smem_family(), &reduce_tile_family(),
          &cudnn_tf32_family(),     &cudnn_fp32_family(),     &attention_family(),      &recurrent_family()};
}

std::vector<const Family*> families_for(const Group& g, const std::string& arch, std::vector<std::string>* refused) {
  std::vector<const Family*> out;
  for (const Family* f : all_families()) {
    if (f->group_family() != g.family) continue;
    std::string why;
    const bool runs_here = !f->arch(arch).empty();
    if (runs_here && f->supports(g, why)) {
      out.push_back(f);
      continue;
    }
    if (refused) refused->push_back(f->name() + ": " + (runs_here ? why : "its kernels do not run on " + arch));
  }
  return out;
}

bool math_allowed(const Group& g, const Config& c, const std::string& policy) {
  return c.at("MATH") == 0 || (policy != "fp32" && g.op_struct.find("<MATH>(") != std::string::npos);
}

std::string shared_memory_opt_in(const Family& f, const Group& g, const ParamText& p) {
  return "  static const cudaError_t opt_in = cudaFuncSetAttribute(&" + f.kernel_instance(g, p) +
         ", cudaFuncAttributeMaxDynamicSharedMemorySize, (int)" + f.launch_expr(g, p) + ".shared_bytes);\n  (void)opt_in;\n";
}

bool operands_float32(const Group& g, int count, std::string& why) {
  for (int s = 0; s < count; ++s)
    if (g.slots.at(s).dtype != "float32") {
      why = "operands other than float32";
      return false;
    }
  return true;
}

const Family& family_by_name(const std::string& name) {
  for (const Family* f : all_families())
    if (f->name() == name) return *f;
  FT_THROW("unknown kernel family " + name);
}

const Family& planner_family(const std::string& group_family) {
  for (const Family* f : all_families())
    if (f->group_family() == group_family) return *f;
  FT_THROW("no kernel family runs " + group_family + " groups");
}

const Family* family_anchoring(const std::string& op) {
  for (const Family* f : all_families())
    if (f->anchors(op)) return f;
  return nullptr;
}

bool slot_dims_fit(const Group& g, const Layout& l) {
  if (l.sizes.size() <= (size_t)kMaxRank) return true;
  if (planner_family(g.family).reads_slot_dims())
    FT_THROW("group " + g.id + " has a slot of rank " + std::to_string(l.sizes.size()) + ", past KernelArgs' " +
             std::to_string(kMaxRank) + " dimensions, which its kernels read");
  return false;
}

KernelArgs kernel_args(const Group& g, const std::vector<float*>& slot_base) {
  KernelArgs a{};
  for (size_t s = 0; s < g.slots.size(); ++s) {
    const Layout& l = g.slots[s].layout;
    // The offset is in elements of the slot's dtype.
    a.ptr[s] = reinterpret_cast<float*>(reinterpret_cast<char*>(slot_base.at(s)) + l.offset * dtype_bytes(g.slots[s].dtype));
    if (!slot_dims_fit(g, l)) continue;
    for (size_t d = 0; d < l.sizes.size(); ++d) {
      a.size[s][d] = l.sizes[d];
      a.stride[s][d] = l.strides[d];
    }
  }
  a.numel = g.numel();
  a.m = g.m;
  a.n = g.n;
  a.k = g.k;
  a.batch = g.batch;
  return a;
}

}  // namespace fusetune
