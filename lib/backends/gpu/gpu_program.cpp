#include "backends/gpu/gpu_program.hpp"

#include <cstdlib>
#include <fstream>

namespace luminal::gpu {

ScheduleOf plan_schedules(const compiler::KernelPlan& plan) {
  const compiler::KernelPlan* p = &plan;
  return [p](const kernel::Kernel& k) -> std::vector<int64_t> {
    if (k.name.size() < 2 || k.name[0] != 'k') return {};
    const size_t step = static_cast<size_t>(std::strtoul(k.name.c_str() + 1, nullptr, 10));
    if (step >= p->steps.size()) return {};
    return p->steps[step].spec->launch;
  };
}

kernel::lower::Options gpu_lower_options() {
  kernel::lower::Options o;
  o.half_operands = true;
  o.half_results = true;
  o.segmented_b_skinny = true;
  o.pack_params = true;
  o.split_attention = true;
  o.attention_q_inline = true;
  o.gemm_row_prologue = true;
  o.row_accumulators = true;
  o.side_work = true;
  return o;
}

void dump_device_source(const std::string& device_source) {
  if (const char* path = std::getenv("LUMINAL_DUMP_GPU"); path && *path) std::ofstream(path) << device_source;
}

}  // namespace luminal::gpu
