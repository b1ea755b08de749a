// hipRTC and AMD's code-object manager (comgr) through dlopen: libamdhip64.so.5 (or .6)
// holds hipRTC on Debian 12 (ROCm 5.2), libamd_comgr.so.2 lists the architectures this
// ROCm knows. Nothing links them.
//
// ROCm 5.2's comgr aborts the whole process when asked to compile for an architecture it
// does not know (gfx940, gfx942, gfx1100 and any unknown name fail inside
// amd_comgr_destroy_action_info), so an architecture is checked against comgr's own ISA
// list (amd_comgr_get_isa_count / amd_comgr_get_isa_name) first, and an unknown one is a
// CompileError naming the ROCm version that supports it. hipRTC is never called for it.
#pragma once

#include <string>
#include <vector>

#include "luminal/callable.hpp"

namespace luminal::hip {

struct HiprtcOutput {
  std::string image;  ///< the AMDGPU code object (ELF)
  std::string log;
};

class Hiprtc {
 public:
  /// The process-wide hipRTC, or null with `why` set.
  static const Hiprtc* get(std::string* why = nullptr);

  /// "5.2" (the HIP runtime's version: hipRTC ships with it).
  const std::string& version() const { return version_; }
  /// comgr's ISA names without the target triple: "gfx908", "gfx90a", "gfx1030", ...
  const std::vector<std::string>& isas() const { return isas_; }
  /// Throws CompileError when `arch` is not in isas(), naming the ROCm that supports it.
  void check_arch(const std::string& arch) const;
  /// Compiles `source` for `arch` (checked first). Throws CompileError with the log.
  HiprtcOutput compile(const std::string& source, const std::string& arch) const;
  static std::string options_string();

  struct Api;

 private:
  Hiprtc() = default;
  const Api* api_ = nullptr;
  std::string version_;
  std::vector<std::string> isas_;
};

/// "ROCm 5.3 or later" for gfx940..., "" when unknown.
std::string rocm_supporting(const std::string& arch);

/// Parses AMDGPU resource-usage remarks (-Rpass-analysis=kernel-resource-usage) into
/// per-kernel resources: VGPRs as registers, LDS as shared bytes, scratch as spills.
std::vector<KernelResources> parse_amdgpu_remarks(const std::string& log);

}  // namespace luminal::hip
