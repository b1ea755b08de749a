// Kernel resources read from an AMDGPU code object (the ELF hipRTC returns): its
// NT_AMDGPU_METADATA note holds, per kernel, a MessagePack map with .vgpr_count,
// .group_segment_fixed_size (LDS), .private_segment_fixed_size (scratch per lane) and
// .vgpr_spill_count. hipRTC 5.2 prints no resource remarks in its log, so this is where a
// HIP compile's resources come from. The reader is bounds-checked throughout: a malformed
// object gives no resources, never a crash.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "luminal/callable.hpp"

namespace luminal::hip {

/// Per kernel of the code object: registers = VGPRs per lane, shared_bytes = LDS per
/// block, stack_bytes = scratch per lane, spill_bytes = 4 x spilled VGPRs (the bytes per
/// lane they take in scratch). Empty when `elf` has no AMDGPU metadata this reader knows.
std::vector<KernelResources> code_object_resources(std::string_view elf);

}  // namespace luminal::hip
